/** The saga API's public types (docs/sagas.md). */
import type { Tool } from "../core/tool.js";
import type { EffectClass } from "../core/effect-class.js";
import type { Json } from "../core/json.js";
import type { Scope } from "../core/keys.js";
import type { StandardSchemaV1 } from "../core/standard-schema.js";
import type { OnAbandon, SagaEvent, SagaRecord, SagaStepRecord } from "../contracts/sagas.js";

/** What `approveNonCompensable` is asked about: a step that cannot be undone, before it runs. */
export interface NonCompensableStep {
  readonly tenant: string;
  readonly sagaId: string;
  readonly task: string;
  readonly step: string;
  readonly tool: string;
  readonly effect: EffectClass;
  /** The input as it will be stored (fields the tool marks `redact` read "[redacted]"). */
  readonly input: Json;
  /** Why it counts as non-compensable. */
  readonly reason: string;
}

/**
 * Decides whether a non-compensable step may run. Anything but `true` (false, a throw) refuses
 * it: the step does not run and the saga compensates. Without a policy such steps are refused.
 */
export type ApproveNonCompensable = (step: NonCompensableStep) => boolean | Promise<boolean>;

export interface SagaOptions {
  /** Overrides the gate's `approveNonCompensable` for this saga. */
  readonly approveNonCompensable?: ApproveNonCompensable;
  /**
   * What `gate.recover()` does with this saga if its driver dies while it is `running`:
   * "hold" (default) marks it `stalled` for its driver to resume or an operator to roll back;
   * "compensate" rolls it back. Recorded when the saga starts.
   */
  readonly onAbandon?: OnAbandon;
}

// A tool of any schema (see GateOptions.tools for why `any`).
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type SomeTool = Tool<any, any>;

export interface StepOptions<R = unknown, I = unknown> {
  /**
   * Undo this step with another (registered) tool, called with `input(result, stepInput)`. The
   * input is computed when the step completes and stored, so recovery in another process can
   * run it. Default: the step tool's own `compensate` hook, if it has one.
   */
  readonly compensate?: { readonly tool: string | SomeTool; readonly input: (result: R, input: I) => unknown };
  /** `false`: this step cannot be undone; it runs only once approved (see `approveNonCompensable`). */
  readonly compensable?: boolean;
}

/** A saga as it stands: its record and its steps in order. */
export interface SagaStatus extends SagaRecord {
  readonly steps: readonly SagaStepRecord[];
}

/**
 * A multi-step workflow whose completed steps are compensated in reverse order when a step
 * fails. Made by `gate.saga(id, scope)`; every method is safe to call again after a crash with
 * the same id (a completed step returns its stored result and runs nothing).
 */
export interface Saga {
  readonly id: string;
  readonly scope: Scope;
  /** Records the saga (`running`) if it does not exist yet; the first `step` does it too. */
  start(): Promise<SagaStatus>;
  /**
   * Runs one step as a gated call keyed `saga:<id>:<name>` and returns its (stored, JSON) result.
   * - The step already completed (a re-run after a crash): its stored result, nothing runs.
   * - The step fails definitely, its outcome cannot be known, or it is non-compensable and not
   *   approved: the saga compensates its completed steps in reverse order, then this rejects
   *   with EG_SAGA_FAILED (`SagaError`, whose `status` says how the compensation ended).
   * - Its outcome is not known yet (a probe says "running"): rejects with EG_IN_PROGRESS; the
   *   saga stays running; call `step` again with the same arguments later.
   * - Invalid input, an unknown tool, the same name with another input (EG_KEY_MISMATCH), the
   *   ledger unreachable: rejects with that code; nothing ran and the saga is unchanged.
   * - The saga no longer takes steps (compensated, completed…): rejects with EG_SAGA_CLOSED.
   */
  step<S extends StandardSchemaV1, R>(
    name: string, tool: Tool<S, R>, input: StandardSchemaV1.InferInput<S>, options?: StepOptions<R, StandardSchemaV1.InferOutput<S>>,
  ): Promise<R>;
  step(name: string, tool: string, input: unknown, options?: StepOptions): Promise<unknown>;
  /** Marks the saga `completed`: no more steps. EG_IN_PROGRESS while a step's outcome is not known. */
  finish(): Promise<SagaStatus>;
  /**
   * Rolls the saga back: its completed steps are compensated in reverse order. Also resumes a
   * compensation that was interrupted. Resolves with the saga as it ends (`compensated`,
   * `compensation_failed`, or still `compensating` when a step's outcome is not known yet).
   */
  compensate(reason?: string): Promise<SagaStatus>;
  /** The saga as it stands; undefined if it never started. */
  status(): Promise<SagaStatus | undefined>;
  /** Everything that happened to the saga, oldest first. */
  history(): Promise<SagaEvent[]>;
}

/** What `gate.recover()` did with sagas (`summary.sagas`). */
export interface SagaRecoverySummary {
  /** Running and compensating sagas looked at. */
  readonly examined: number;
  /** Compensations finished: every completed, compensable step undone. */
  readonly compensated: number;
  /** Compensations that ended with a step for a person (a compensation failed, or an outcome is unknown). */
  readonly compensationFailed: number;
  /** Running sagas whose driver died, marked `stalled` for their driver or an operator. */
  readonly stalled: number;
  /** Left as they are: driven by a live worker, or a step's outcome not known yet. */
  readonly leftForLater: number;
  readonly notes: readonly { readonly tenant: string; readonly id: string; readonly note: string }[];
}
