/**
 * Named points in a call's life where a test can inject a fault (a crash, a delay).
 * Pass a `faults` hook to `createGate` in your own crash tests; see `killAt`.
 */
export type FaultPoint =
  /** The claim is durable; the tool has not started. */
  | "after_claim"
  /** The tool returned (its side effect happened); the outcome is not recorded yet. */
  | "after_execute"
  /** The outcome is durable; the result has not been returned yet. */
  | "after_record";

export interface FaultContext {
  readonly tool: string;
  readonly key: string;
  readonly toolUseId: string;
}

export type FaultHook = (point: FaultPoint, call: FaultContext) => void | Promise<void>;
