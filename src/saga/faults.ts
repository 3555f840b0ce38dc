/** Named points in a saga's life where a test can inject a fault; see `createGate({ sagaFaults })` and `killAt`. */
import type { FaultContext } from "../gate/faults.js";

export type SagaFaultPoint =
  /** The step is in the saga log; its call is not claimed yet. */
  | "saga_before_step"
  /** The step's outcome is in the saga log (after a failure: before its compensation starts). */
  | "saga_after_step"
  /** The step is marked compensating; its compensation call is not claimed yet. */
  | "saga_before_compensation"
  /** The compensation is recorded and the step marked compensated; the next compensation has not started. */
  | "saga_after_compensation";

/** `tool` is the step's tool (saga_before_step, saga_after_step) or its compensation's (`<tool>:compensate` for a hook). */
export type SagaFaultHook = (point: SagaFaultPoint, call: FaultContext) => void | Promise<void>;
