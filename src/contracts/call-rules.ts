/**
 * The rules every call store keeps, as pure functions: how a claim makes a record, how an update
 * changes one, when a holder's lease has run out, and the order lists come in. The memory store
 * applies them directly; the SQL stores state them once in src/stores/sql/call-statements.ts.
 */
import { isHeld } from "../core/states.js";
import type { CallRecord, ClaimRequest, RecordUpdate } from "./calls.js";
import { compareBytes } from "./change-order.js";

export function newRecord(request: ClaimRequest, now: number): CallRecord {
  return {
    tenant: request.tenant,
    key: request.key,
    tool: request.tool,
    effect: request.effect,
    task: request.task,
    toolUseId: request.toolUseId,
    fingerprint: request.fingerprint,
    input: request.input,
    inputRedacted: request.inputRedacted,
    state: "in_progress",
    result: null,
    error: null,
    owner: request.owner,
    leaseExpiresAt: now + request.leaseMs,
    attempts: 1,
    version: 1,
    createdAt: now,
    updatedAt: now,
  };
}

export function applyUpdate(record: CallRecord, update: RecordUpdate, now: number): CallRecord {
  const owner = update.owner === undefined ? record.owner : update.owner;
  let leaseExpiresAt = record.leaseExpiresAt;
  if (owner === null) leaseExpiresAt = null;
  else if (update.leaseMs !== undefined) leaseExpiresAt = now + update.leaseMs;
  return {
    ...record,
    state: update.state,
    result: update.result === undefined ? record.result : update.result,
    error: update.error === undefined ? record.error : update.error,
    owner,
    leaseExpiresAt,
    attempts: record.attempts + (update.countAttempt ? 1 : 0),
    version: record.version + 1,
    updatedAt: now,
  };
}

/** The lease rule, for calls and sagas alike: nobody holds it, or its holder's lease ran out on the store's clock. */
export function leaseRanOut(holder: { readonly owner: string | null; readonly leaseExpiresAt: number | null }, now: number): boolean {
  return holder.owner === null || holder.leaseExpiresAt === null || holder.leaseExpiresAt <= now;
}

/** Whether a take-over may happen now: a held call (in_progress or uncertain) whose lease ran out, or whose holder is dead. */
export function isTakeable(record: CallRecord, now: number, holderIsDead: boolean): boolean {
  return isHeld(record.state) && (holderIsDead || leaseRanOut(record, now));
}

/** The order every store lists calls in: oldest first, then tenant and key byte by byte. */
export function listOrder(a: CallRecord, b: CallRecord): number {
  return a.createdAt - b.createdAt || compareBytes(a.tenant, b.tenant) || compareBytes(a.key, b.key);
}
