/** Record construction and update rules shared by every store, so they cannot drift apart. */
import type { CallRecord, ClaimRequest, RecordUpdate } from "./calls.js";

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

/** States in which a call has a holder working on it (running it, or probing its unknown outcome). */
export const HELD_STATES = ["in_progress", "uncertain"] as const;

/** Whether a take-over may happen now: an in_progress or uncertain call nobody holds, whose lease ran out, or whose holder is dead. */
export function isTakeable(record: CallRecord, now: number, holderIsDead: boolean): boolean {
  if (record.state !== "in_progress" && record.state !== "uncertain") return false;
  return holderIsDead || record.owner === null || record.leaseExpiresAt === null || record.leaseExpiresAt <= now;
}
