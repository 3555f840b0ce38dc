/**
 * Saga and step construction and update rules shared by every store, so they cannot drift
 * apart. The SQL stores read the row, apply these inside one transaction, and write it back.
 */
import type { BeginSaga, Compensation, NewSagaEvent, NewStep, SagaEvent, SagaRecord, SagaStepRecord, SagaUpdate, StepUpdate } from "./sagas.js";
import { assertSagaMove, assertStepMove } from "./saga-states.js";

export function newSaga(request: BeginSaga, now: number): SagaRecord {
  return {
    tenant: request.tenant,
    id: request.id,
    task: request.task,
    state: "running",
    onAbandon: request.onAbandon,
    owner: request.owner,
    leaseExpiresAt: now + request.leaseMs,
    reason: null,
    resolution: null,
    version: 1,
    createdAt: now,
    updatedAt: now,
  };
}

/** The saga after `update`; throws EG_ILLEGAL_TRANSITION for a move the table forbids. */
export function applySagaUpdate(saga: SagaRecord, update: SagaUpdate, now: number): SagaRecord {
  assertSagaMove(saga.id, saga.state, update.state);
  const owner = update.owner === undefined ? saga.owner : update.owner;
  let leaseExpiresAt = saga.leaseExpiresAt;
  if (owner === null) leaseExpiresAt = null;
  else if (update.leaseMs !== undefined) leaseExpiresAt = now + update.leaseMs;
  return {
    ...saga,
    state: update.state,
    owner,
    leaseExpiresAt,
    reason: update.reason === undefined ? saga.reason : update.reason,
    resolution: update.resolution === undefined ? saga.resolution : update.resolution,
    version: saga.version + 1,
    updatedAt: now,
  };
}

export function newStep(request: NewStep, position: number, now: number): SagaStepRecord {
  return {
    tenant: request.tenant,
    sagaId: request.sagaId,
    name: request.name,
    position,
    tool: request.tool,
    effect: request.effect,
    key: request.key,
    input: request.input,
    inputRedacted: request.inputRedacted,
    fingerprint: request.fingerprint,
    compensable: request.compensable,
    compensation: request.compensation,
    approval: request.approval,
    state: request.state,
    result: null,
    error: request.error ?? null,
    compensationKey: null,
    version: 1,
    createdAt: now,
    updatedAt: now,
  };
}

/** The step after `update`; throws EG_ILLEGAL_TRANSITION for a move the table forbids. */
export function applyStepUpdate(step: SagaStepRecord, update: StepUpdate, now: number): SagaStepRecord {
  assertStepMove(step.sagaId, step.name, step.state, update.state);
  return {
    ...step,
    state: update.state,
    result: update.result === undefined ? step.result : update.result,
    error: update.error === undefined ? step.error : update.error,
    compensation: update.compensation === undefined ? step.compensation : update.compensation,
    compensationKey: update.compensationKey === undefined ? step.compensationKey : update.compensationKey,
    version: step.version + 1,
    updatedAt: now,
  };
}

export function newEvent(tenant: string, sagaId: string, seq: number, at: number, event: NewSagaEvent): SagaEvent {
  return { tenant, sagaId, seq, at, kind: event.kind, step: event.step ?? null, message: event.message, data: event.data ?? null };
}

/** Checks a stored compensation (from JSON) has the shape the engine expects. */
export function isCompensation(value: unknown): value is Compensation {
  if (typeof value !== "object" || value === null) return false;
  const c = value as { kind?: unknown; tool?: unknown; input?: unknown };
  if (c.kind === "hook") return true;
  return c.kind === "tool" && typeof c.tool === "string" && c.tool !== "" && c.input !== undefined;
}

