/**
 * "No store fault ends the process": while the explorer runs, every uncaught exception and
 * unhandled rejection is caught here and noted against the schedule that was running, instead of
 * ending the process (as an unhandled 'error' of a database connection would end an agent's).
 * Each one is a violation: the explorer reports them (ExploreReport.processFaults).
 */
import { messageOf } from "../../core/errors.js";

export interface ProcessFaults {
  /** What was caught since the last take, oldest first. */
  take(): string[];
  /** Stops listening (the process's own handling applies again). */
  stop(): void;
}

export function watchProcessFaults(): ProcessFaults {
  let seen: string[] = [];
  const uncaught = (err: unknown) => void seen.push(`uncaught exception: ${messageOf(err)}`);
  const unhandled = (reason: unknown) => void seen.push(`unhandled rejection: ${messageOf(reason)}`);
  process.on("uncaughtException", uncaught);
  process.on("unhandledRejection", unhandled);
  return {
    take() {
      const taken = seen;
      seen = [];
      return taken;
    },
    stop() {
      process.off("uncaughtException", uncaught);
      process.off("unhandledRejection", unhandled);
    },
  };
}
