/**
 * effectgate/testing: fault injection for your own crash tests.
 *
 *   createGate({ tools, faults: killAt("after_execute") })
 *
 * kills the process with a real SIGKILL right after the tool's side effect and before its
 * outcome is recorded: run it in a child process, then recover in a fresh one and check
 * that your downstream saw the effect exactly once.
 */
import type { FaultHook, FaultPoint } from "./faults.js";

export type { FaultContext, FaultHook, FaultPoint } from "./faults.js";

export const FAULT_POINTS: readonly FaultPoint[] = ["after_claim", "after_execute", "after_record"];

/** A fault hook that SIGKILLs this process the first time `point` is reached (optionally only for one tool). */
export function killAt(point: FaultPoint, options: { tool?: string } = {}): FaultHook {
  return (reached, call) => {
    if (reached === point && (options.tool === undefined || options.tool === call.tool)) {
      process.kill(process.pid, "SIGKILL");
    }
  };
}
