/**
 * The rules every call store keeps, as pure functions: how a claim makes a record, how an update
 * changes one, when a holder's lease has run out, and the order lists come in. The memory store
 * applies them directly; the SQL stores state them once in src/stores/sql/call-statements.ts.
 */
import { randomBytes } from "node:crypto";
import { isHeld } from "../core/states.js";
import type { Answer, CallRecord, ClaimRequest, ListCursor, ListQuery, RecordUpdate, RepeatQuery, TakeOverRequest } from "./calls.js";
import { compareBytes } from "./change-order.js";

/** Random bytes drawn 4 KiB at a time: one call into the CSPRNG per 256 claims instead of one per claim. */
const POOL_SIZE = 4096;
let pool = Buffer.alloc(0);
let used = POOL_SIZE;

/** A claim's token (see CallRecord.claimToken): 128 random bits, never the same twice. */
export function newClaimToken(): string {
  if (used + 16 > pool.length) {
    pool = randomBytes(POOL_SIZE);
    used = 0;
  }
  used += 16;
  return pool.toString("hex", used - 16, used);
}

export function newRecord(request: ClaimRequest, now: number, claimToken: string): CallRecord {
  return {
    tenant: request.tenant,
    key: request.key,
    tool: request.tool,
    effect: request.effect,
    task: request.task,
    toolUseId: request.toolUseId,
    fingerprint: request.fingerprint,
    intent: request.intent ?? request.fingerprint,
    input: request.input,
    inputRedacted: request.inputRedacted,
    state: "in_progress",
    result: null,
    error: null,
    owner: request.owner,
    leaseExpiresAt: now + request.leaseMs,
    attempts: 1,
    fence: request.fence ?? 1,
    startedAt: now,
    claimToken,
    version: 1,
    createdAt: now,
    updatedAt: now,
  };
}

/** A call answered without running its tool (CallStore.claimAnswered): settled from the start, nobody holding it, no attempt. */
export function answeredRecord(request: ClaimRequest, answer: Answer, now: number, claimToken: string): CallRecord {
  return { ...newRecord(request, now, claimToken), state: answer.state, result: answer.result, error: answer.error, owner: null, leaseExpiresAt: null, attempts: 0 };
}

/** The states in which an earlier call is repeated by a new one whatever its age: its outcome is not settled yet. */
export const REPEATED_UNSETTLED = ["in_progress", "uncertain", "needs_human"] as const;

/** The repeat query a claim unless repeated asks: the calls its request would repeat. */
export function repeatQueryOf(request: ClaimRequest, windowMs: number): RepeatQuery {
  return { tenant: request.tenant, task: request.task, intent: request.intent ?? request.fingerprint, key: request.key, windowMs };
}

/** The repeat rule (CallStore.findRepeat): same tenant, task and intent, another key, unsettled or completed within the window. */
export function isRepeatOf(record: CallRecord, query: RepeatQuery, now: number): boolean {
  if (record.tenant !== query.tenant || record.task !== query.task || record.intent !== query.intent || record.key === query.key) return false;
  if ((REPEATED_UNSETTLED as readonly string[]).includes(record.state)) return true;
  return record.state === "completed" && record.updatedAt >= now - query.windowMs;
}

/**
 * The take-over rule: a new holder and lease, and a fence at least one more than the last. The
 * previous holder may have sent a request until it died, which was no later than now, nor (if it
 * died at all) than its lease's end: `startedAt` moves up to that, so the settle horizon of any
 * later re-send counts from the last moment a request of the old holder could have left.
 */
export function takeOverRecord(record: CallRecord, request: TakeOverRequest, now: number): CallRecord {
  // A call nobody holds was released by its holder, which marked its last send then (sendEnded).
  const lastPossibleSend = record.owner === null ? record.startedAt : record.leaseExpiresAt === null || record.leaseExpiresAt > now ? now : record.leaseExpiresAt;
  return {
    ...record,
    owner: request.owner,
    leaseExpiresAt: now + request.leaseMs,
    fence: Math.max(record.fence + 1, request.fence ?? 0),
    startedAt: Math.max(record.startedAt, lastPossibleSend),
    version: record.version + 1,
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
    startedAt: update.countAttempt === true || update.sendEnded === true ? now : record.startedAt,
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
export function listOrder(a: ListCursor, b: ListCursor): number {
  return a.createdAt - b.createdAt || compareBytes(a.tenant, b.tenant) || compareBytes(a.key, b.key);
}

/** Where a record stands in the list order: pass it as the next page's `after`. */
export const listCursorOf = (record: ListCursor): ListCursor => ({ createdAt: record.createdAt, tenant: record.tenant, key: record.key });

/** The list rule (contracts/calls.ts `ListQuery`): whether `record` is on a page of `query`, wherever that page starts. */
export function matchesList(record: CallRecord, query: ListQuery): boolean {
  return (query.tenant === undefined || record.tenant === query.tenant) && (query.state === undefined || record.state === query.state) &&
    (query.tool === undefined || record.tool === query.tool) && (query.key === undefined || record.key === query.key) &&
    (query.task === undefined || record.task === query.task) &&
    (query.createdFrom === undefined || record.createdAt >= query.createdFrom) && (query.createdTo === undefined || record.createdAt <= query.createdTo) &&
    (query.after === undefined || listOrder(record, query.after) > 0);
}
