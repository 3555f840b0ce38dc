/**
 * The saga log contract: where a saga's state, its steps and its history live, durably, next
 * to the ledger's call records. The saga engine knows only this interface; each ledger store
 * implements it in its own file (memory-sagas.ts, sqlite-sagas.ts, postgres/sagas.ts) and
 * reaches it as `ledger.sagas`. Every store passes the same contract suite (src/testing/contract-suites/sagas.ts).
 *
 * Rules every store keeps:
 * - One saga per (tenant, id); one step per (tenant, saga, name). Every read and write names the tenant.
 * - `begin` and `addStep` are insert-if-absent: of concurrent callers exactly one creates the row.
 * - `addStep` adds a step only while the saga is `running`, atomically with that check, so no
 *   step can slip in after a compensation pass has read the saga's steps.
 * - A step's `position` is its order of creation within its saga (0, 1, 2…): compensation walks
 *   it backwards.
 * - `update` and `updateStep` are compare-and-set on `version` (stale → `undefined`, nothing
 *   changed) and refuse a move the state tables forbid (src/saga/states.ts) with
 *   EG_ILLEGAL_TRANSITION naming both states.
 * - An event passed with a write is appended in the same transaction, and only if the write
 *   happened: the history never claims a move that did not take place.
 * - Leases are judged by the store's own clock, like call leases.
 * - Damage is never read as absence (EG_LEDGER_CORRUPT / EG_LEDGER_UNAVAILABLE).
 */
import type { EffectClass } from "../core/effect-class.js";
import type { Json } from "../core/json.js";

/**
 * - `running`: steps are being added by a driver (code or an agent loop).
 * - `stalled`: its driver died mid-way; recovery does not continue forward steps on its own. A
 *   driver that opens it again takes it back (`running`); an operator may roll it back.
 * - `completed`: every step done and the driver finished it.
 * - `compensating`: completed steps are being undone in reverse order.
 * - `compensated`: every completed, compensable step was undone (non-compensable ones were approved and kept).
 * - `compensation_failed`: a compensation failed, or a step's outcome could not be known: a person must settle it.
 * - `resolved`: a person settled a `compensation_failed` saga (see its `resolution`).
 */
export type SagaState = "running" | "stalled" | "completed" | "compensating" | "compensated" | "compensation_failed" | "resolved";

/**
 * - `pending`: recorded before its call was claimed; the call may not have started, may be running, or may have finished.
 * - `completed`: its call completed (result stored).
 * - `failed`: its call failed definitely: no effect.
 * - `refused`: non-compensable and not approved: never run.
 * - `unknown`: its call's outcome could not be determined (the call went to `needs_human`).
 * - `skipped`: found, while compensating, never to have happened (not claimed, or its probe said absent): nothing to undo.
 * - `compensating` → `compensated` | `compensation_failed`: its compensation call is running / did undo it / failed.
 */
export type StepState =
  | "pending" | "completed" | "failed" | "refused" | "unknown" | "skipped" | "compensating" | "compensated" | "compensation_failed";

/** What recovery does with a `running` saga whose driver died (chosen when the saga starts). */
export type OnAbandon =
  /** Mark it `stalled` for its driver to resume or an operator to roll back (the default). */
  | "hold"
  /** Compensate it. */
  | "compensate";

/** How a completed step is undone. */
export type Compensation =
  /** The forward tool's own `compensate(input, result, ctx)` hook. */
  | { readonly kind: "hook" }
  /** Another tool, called with `input` (computed from the forward result once it is known; null until then). */
  | { readonly kind: "tool"; readonly tool: string; readonly input: Json | null };

/** A non-compensable step's approval: asked before it runs (`not_needed` for compensable steps). */
export type Approval = "not_needed" | "approved" | "refused";

export interface SagaRecord {
  readonly tenant: string;
  readonly id: string;
  readonly task: string;
  readonly state: SagaState;
  readonly onAbandon: OnAbandon;
  /** The gate driving it (running) or compensating it; null when nobody does. */
  readonly owner: string | null;
  /** Epoch ms on the store's clock; null when nobody holds it. */
  readonly leaseExpiresAt: number | null;
  /** Why it is compensating, stalled or failed. */
  readonly reason: string | null;
  /** The person's note that settled it (`resolved`). */
  readonly resolution: string | null;
  readonly version: number;
  readonly createdAt: number;
  readonly updatedAt: number;
}

export interface SagaStepRecord {
  readonly tenant: string;
  readonly sagaId: string;
  readonly name: string;
  /** Order of creation within the saga, from 0. */
  readonly position: number;
  readonly tool: string;
  readonly effect: EffectClass;
  /** The forward call's idempotency key (see src/saga/keys.ts). */
  readonly key: string;
  /** The forward input as stored in the ledger (fields the tool marks `redact` replaced). */
  readonly input: Json;
  readonly inputRedacted: boolean;
  /** The forward call's fingerprint (tool + full input): a step re-driven with other input is a mismatch. */
  readonly fingerprint: string;
  readonly compensable: boolean;
  /** null: nothing undoes it (a read, or a non-compensable step). */
  readonly compensation: Compensation | null;
  readonly approval: Approval;
  readonly state: StepState;
  /** The forward call's result once completed. */
  readonly result: Json | null;
  /** Why the step or its compensation failed, or why its outcome is unknown. */
  readonly error: string | null;
  /** The compensation call's idempotency key, once compensation started. */
  readonly compensationKey: string | null;
  readonly version: number;
  readonly createdAt: number;
  readonly updatedAt: number;
}

export type SagaEventKind =
  | "saga_started" | "step_started" | "step_approved" | "step_refused" | "step_completed" | "step_failed" | "step_unknown"
  | "saga_completed" | "compensation_requested" | "compensation_started" | "step_skipped" | "step_kept" | "step_compensated"
  | "step_compensation_failed" | "compensation_paused" | "saga_compensated" | "saga_compensation_failed" | "driver_died"
  | "driver_resumed" | "resolved";

/** One line of a saga's history. */
export interface SagaEvent {
  readonly tenant: string;
  readonly sagaId: string;
  /** 1, 2, 3… within the saga: the order things happened in. */
  readonly seq: number;
  readonly at: number;
  readonly kind: SagaEventKind;
  readonly step: string | null;
  readonly message: string;
  readonly data: Json | null;
}

export interface NewSagaEvent {
  readonly kind: SagaEventKind;
  readonly step?: string;
  readonly message: string;
  readonly data?: Json;
}

export interface BeginSaga {
  readonly tenant: string;
  readonly id: string;
  readonly task: string;
  readonly owner: string;
  readonly leaseMs: number;
  readonly onAbandon: OnAbandon;
}

export interface SagaUpdate {
  readonly state: SagaState;
  /** Set the holder; `null` releases the saga (lease cleared too). */
  readonly owner?: string | null;
  /** New lease length from now, for the (new) owner. */
  readonly leaseMs?: number;
  readonly reason?: string | null;
  readonly resolution?: string | null;
}

export interface NewStep {
  readonly tenant: string;
  readonly sagaId: string;
  readonly name: string;
  readonly tool: string;
  readonly effect: EffectClass;
  readonly key: string;
  readonly input: Json;
  readonly inputRedacted: boolean;
  readonly fingerprint: string;
  readonly compensable: boolean;
  readonly compensation: Compensation | null;
  readonly approval: Approval;
  /** `pending` normally; `refused` when its approval was refused (it never runs). */
  readonly state: "pending" | "refused";
  readonly error?: string | null;
}

export interface StepUpdate {
  readonly state: StepState;
  readonly result?: Json | null;
  readonly error?: string | null;
  readonly compensation?: Compensation | null;
  readonly compensationKey?: string | null;
}

export type AddStepResult =
  | { readonly outcome: "added"; readonly step: SagaStepRecord }
  /** A step of that name exists (whatever the saga's state): it as it stands. Nothing was changed. */
  | { readonly outcome: "exists"; readonly step: SagaStepRecord }
  /** The saga is not `running` (or does not exist): nothing was added. */
  | { readonly outcome: "saga_not_running"; readonly saga: SagaRecord | undefined };

export interface SagaQuery {
  readonly tenant?: string;
  readonly state?: SagaState;
  /** One saga id, in every tenant (operators looking a saga up). */
  readonly id?: string;
  /** At most this many, oldest first (default 100). */
  readonly limit?: number;
}

export interface SagaLog {
  /** Creates the saga `running`, held by `owner`, unless it exists: then returns it unchanged. */
  begin(request: BeginSaga, event: NewSagaEvent): Promise<{ readonly created: boolean; readonly saga: SagaRecord }>;
  get(tenant: string, id: string): Promise<SagaRecord | undefined>;
  /** Compare-and-set on `version`; `undefined` when the saga moved on (or does not exist). */
  update(tenant: string, id: string, version: number, update: SagaUpdate, event?: NewSagaEvent): Promise<SagaRecord | undefined>;
  /** Extends `owner`'s lease on a `running` or `compensating` saga it holds. False when it no longer does. */
  renewLease(tenant: string, id: string, owner: string, leaseMs: number): Promise<boolean>;
  addStep(step: NewStep, event?: NewSagaEvent): Promise<AddStepResult>;
  getStep(tenant: string, sagaId: string, name: string): Promise<SagaStepRecord | undefined>;
  /** Compare-and-set on the step's `version`; `undefined` when it moved on (or does not exist). */
  updateStep(tenant: string, sagaId: string, name: string, version: number, update: StepUpdate, event?: NewSagaEvent): Promise<SagaStepRecord | undefined>;
  /** The saga's steps in position order. */
  steps(tenant: string, sagaId: string): Promise<SagaStepRecord[]>;
  appendEvent(tenant: string, sagaId: string, event: NewSagaEvent): Promise<void>;
  /** The saga's history, oldest first (at most `limit`, default 1000). */
  history(tenant: string, sagaId: string, options?: { limit?: number }): Promise<SagaEvent[]>;
  list(query?: SagaQuery): Promise<SagaRecord[]>;
  /** Sagas a recovery pass looks at: `running` and `compensating`, oldest first. Cost follows those sagas, not the log. */
  listActive(options?: { limit?: number }): Promise<SagaRecord[]>;
}
