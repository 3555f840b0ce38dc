/**
 * effectgate/testing: fault injection for your own crash tests.
 *
 *   createGate({ tools, faults: killAt("after_execute") })
 *
 * kills the process with a real SIGKILL right after the tool's side effect and before its
 * outcome is recorded: run it in a child process, then recover in a fresh one and check
 * that your downstream saw the effect exactly once.
 */
import type { FaultHook, FaultPoint, SagaFaultHook, SagaFaultPoint } from "./gate/faults.js";

export type { FaultContext, FaultHook, FaultPoint, SagaFaultHook, SagaFaultPoint } from "./gate/faults.js";

export const FAULT_POINTS: readonly FaultPoint[] = ["after_claim", "after_execute", "after_record"];

/** Points in a saga's life (steps and compensations) where `killAtSaga` can strike; see docs/sagas.md. */
export const SAGA_FAULT_POINTS: readonly SagaFaultPoint[] = ["saga_before_step", "saga_after_step", "saga_before_compensation", "saga_after_compensation"];

/** A fault hook that SIGKILLs this process the first time `point` is reached (optionally only for one tool). */
export function killAt(point: FaultPoint, options: { tool?: string } = {}): FaultHook {
  return (reached, call) => {
    if (reached === point && (options.tool === undefined || options.tool === call.tool)) {
      process.kill(process.pid, "SIGKILL");
    }
  };
}

/** `createGate({ tools, sagaFaults: killAtSaga("saga_before_compensation", { tool: "refund" }) })`: SIGKILLs this process the first time a saga reaches `point`. */
export function killAtSaga(point: SagaFaultPoint, options: { tool?: string } = {}): SagaFaultHook {
  return (reached, call) => {
    if (reached === point && (options.tool === undefined || options.tool === call.tool)) {
      process.kill(process.pid, "SIGKILL");
    }
  };
}
