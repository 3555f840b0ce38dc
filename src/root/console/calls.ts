/**
 * Ledger search for operators: calls filtered by state, tool, tenant, task and time, in pages,
 * and one call with everything recorded about it. The call store lists by tenant, state and tool
 * (oldest first); task and time are filtered here over at most SCAN_LIMIT records, and the answer
 * says when that limit cut the search short rather than pretend it saw everything.
 */
import type { CallState } from "../../core/states.js";
import type { CallRecord } from "../../contracts/calls.js";
import type { ApprovalRecord } from "../../contracts/governance.js";
import type { SagaRecord } from "../../contracts/sagas.js";
import type { Stores } from "../../contracts/stores.js";
import { listOrder } from "../../contracts/call-rules.js";
import { showQueueItem, type QueueDetail } from "../../reconcile/queue.js";
import { badRequest } from "./api-error.js";

/** How many records one search reads from the store at most. */
export const SCAN_LIMIT = 20_000;

export interface CallSearch {
  readonly tenant?: string;
  readonly state?: CallState;
  readonly tool?: string;
  readonly task?: string;
  readonly key?: string;
  /** Created at or after (epoch ms). */
  readonly since?: number;
  /** Created at or before (epoch ms). */
  readonly until?: number;
  /** Page size (default 50, at most 500). */
  readonly limit?: number;
  /** The `next` of the previous page. */
  readonly cursor?: string;
}

export interface CallPage {
  readonly calls: readonly CallRecord[];
  /** Pass as `cursor` for the next page; null on the last one. */
  readonly next: string | null;
  /** True when the store held more than SCAN_LIMIT candidates: narrow the search to see the rest. */
  readonly truncated: boolean;
}

type Cursor = readonly [number, string, string];

function encodeCursor(r: CallRecord): string {
  return Buffer.from(JSON.stringify([r.createdAt, r.tenant, r.key])).toString("base64url");
}

function decodeCursor(text: string): Cursor {
  try {
    const value: unknown = JSON.parse(Buffer.from(text, "base64url").toString("utf8"));
    if (Array.isArray(value) && value.length === 3 && typeof value[0] === "number" && typeof value[1] === "string" && typeof value[2] === "string") {
      return [value[0], value[1], value[2]];
    }
  } catch {
    // fall through
  }
  throw badRequest("cursor is not one this API gave out: pass the `next` of the previous page");
}

const afterCursor = (r: CallRecord, [at, tenant, key]: Cursor) =>
  listOrder(r, { createdAt: at, tenant, key } as CallRecord) > 0;

export async function searchCalls(ledger: Stores, search: CallSearch): Promise<CallPage> {
  const limit = Math.min(search.limit ?? 50, 500);
  const cursor = search.cursor === undefined ? undefined : decodeCursor(search.cursor);
  const listed = await ledger.calls.list({
    ...(search.tenant === undefined ? {} : { tenant: search.tenant }),
    ...(search.state === undefined ? {} : { state: search.state }),
    ...(search.tool === undefined ? {} : { tool: search.tool }),
    ...(search.key === undefined ? {} : { key: search.key }),
    limit: SCAN_LIMIT + 1,
  });
  const truncated = listed.length > SCAN_LIMIT;
  const matching = listed.slice(0, SCAN_LIMIT).filter((r) =>
    (search.task === undefined || r.task === search.task) &&
    (search.since === undefined || r.createdAt >= search.since) &&
    (search.until === undefined || r.createdAt <= search.until) &&
    (cursor === undefined || afterCursor(r, cursor)));
  const page = matching.slice(0, limit);
  const last = page[page.length - 1];
  return { calls: page, next: matching.length > limit && last ? encodeCursor(last) : null, truncated };
}

export interface CallDetail {
  readonly call: CallRecord;
  /** Why a person is (or is not) needed, with open findings and downstream confirmations. */
  readonly queue: QueueDetail;
  /** Approval requests made for this call. */
  readonly approvals: readonly ApprovalRecord[];
  /** The saga this call is a step of, when its key names one. */
  readonly saga: SagaRecord | null;
}

/** One call and its history: approvals, findings, confirmations and its saga. */
export async function callDetail(ledger: Stores, tenant: string, key: string): Promise<CallDetail | undefined> {
  const call = await ledger.calls.get(tenant, key);
  if (!call) return undefined;
  const shown = await showQueueItem(ledger, key, { tenant });
  const approvals = ledger.governance ? (await ledger.governance.listApprovals({ tenant, limit: SCAN_LIMIT })).filter((a) => a.key === key) : [];
  const sagaId = /^saga:([^:]*):/.exec(key)?.[1];
  let saga: SagaRecord | null = null;
  if (sagaId !== undefined && ledger.sagas) {
    try {
      saga = (await ledger.sagas.get(tenant, decodeURIComponent(sagaId))) ?? null;
    } catch {
      saga = null;
    }
  }
  if (!shown.found) return undefined;
  return { call, queue: shown.item, approvals, saga };
}
