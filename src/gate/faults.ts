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

/** Named points in a saga's life (steps and compensations); see `createGate({ sagaFaults })` and `killAtSaga`. */
export type SagaFaultPoint =
  /** The step is in the saga log; its call is not claimed yet. */
  | "saga_before_step"
  /** The step's outcome is in the saga log (after a failure: before its compensation starts). */
  | "saga_after_step"
  /** The step is marked compensating; its compensation call is not claimed yet. */
  | "saga_before_compensation"
  /** The compensation is recorded and the step marked compensated; the next compensation has not started. */
  | "saga_after_compensation";

export interface FaultContext {
  readonly tool: string;
  readonly key: string;
  readonly toolUseId: string;
}

export type FaultHook = (point: FaultPoint, call: FaultContext) => void | Promise<void>;

/** `tool` is the step's tool (saga_before_step, saga_after_step) or its compensation's (`<tool>:compensate` for a hook). */
export type SagaFaultHook = (point: SagaFaultPoint, call: FaultContext) => void | Promise<void>;
