/** Operator alerts and the gate's counters: what a person should look at, and what the gate did. */
import type { Logger } from "../core/logger.js";

/** An operator alert: something a person should look at, raised without failing the agent's call. */
export interface Alert {
  readonly code:
    | "record_failed"
    /** The background writes of an outcome that could not be recorded gave up: the outcome is known only to the alert. */
    | "record_gave_up"
    | "record_lost_race"
    /** A reply arrived after the call was settled and says otherwise (docs/guarantees.md: late replies). */
    | "late_reply_contradicts"
    | "needs_human"
    | "breaker_open"
    | "approval_requested";
  readonly message: string;
  readonly tenant: string;
  readonly key: string;
  readonly tool: string;
  readonly cause?: unknown;
}

export interface GateStats {
  /** Tool executions started by this gate (first runs and re-runs after a probe said "absent"). */
  executed: number;
  /** Calls answered from a stored result without executing anything. */
  replayed: number;
  /** Operator alerts raised. */
  alerts: number;
}

/** The default alert sink: one JSON line on stderr (the cause left out: it may hold secrets). */
export function alertToStderr(alert: Alert): void {
  const { cause: _cause, ...rest } = alert;
  process.stderr.write(`${JSON.stringify({ level: "error", source: "effectgate", alert: rest })}\n`);
}

/** Alerts to a pino-compatible logger, at error level, the cause left out as on stderr. */
export function alertToLogger(logger: Logger): (alert: Alert) => void {
  return (alert) => {
    const { cause: _cause, ...rest } = alert;
    logger.error({ source: "effectgate", alert: rest }, alert.message);
  };
}
