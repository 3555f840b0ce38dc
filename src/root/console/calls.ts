/**
 * Ledger search for operators: calls filtered by state, tool, tenant, task, key and creation
 * time, in pages, and one call with everything recorded about it. The filtering and paging are
 * the store's own query (CallStore.list, keyset-paged in the list order), so a page costs the
 * records on it, however large the ledger. The cursor handed out is opaque to clients: the
 * place of the page's last record in the list order.
 */
import type { CallState } from "../../core/states.js";
import type { CallRecord, ListCursor } from "../../contracts/calls.js";
import type { ApprovalRecord, GovernanceStore } from "../../contracts/governance.js";
import type { SagaRecord } from "../../contracts/sagas.js";
import type { Stores } from "../../contracts/stores.js";
import { listCursorOf } from "../../contracts/call-rules.js";
import { showQueueItem, type QueueDetail } from "../../reconcile/queue.js";
import { badRequest } from "./api-error.js";

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
  /** Page size (default 50). */
  readonly limit?: number;
  /** The `next` of the previous page. */
  readonly cursor?: string;
}

export interface CallPage {
  readonly calls: readonly CallRecord[];
  /** Pass as `cursor` for the next page; null on the last one. */
  readonly next: string | null;
}

export function encodeCursor(at: ListCursor): string {
  return Buffer.from(JSON.stringify([at.createdAt, at.tenant, at.key])).toString("base64url");
}

export function decodeCursor(text: string): ListCursor {
  try {
    const value: unknown = JSON.parse(Buffer.from(text, "base64url").toString("utf8"));
    if (Array.isArray(value) && value.length === 3 && Number.isSafeInteger(value[0]) && typeof value[1] === "string" && typeof value[2] === "string") {
      return { createdAt: value[0] as number, tenant: value[1], key: value[2] };
    }
  } catch {
    // fall through
  }
  throw badRequest("cursor is not one this API gave out: pass the `next` of the previous page unchanged");
}

export async function searchCalls(ledger: Stores, search: CallSearch): Promise<CallPage> {
  const limit = search.limit ?? 50;
  const after = search.cursor === undefined ? undefined : decodeCursor(search.cursor);
  // One more than the page: whether there is a next page, without a second query.
  const listed = await ledger.calls.list({
    ...(search.tenant === undefined ? {} : { tenant: search.tenant }),
    ...(search.state === undefined ? {} : { state: search.state }),
    ...(search.tool === undefined ? {} : { tool: search.tool }),
    ...(search.task === undefined ? {} : { task: search.task }),
    ...(search.key === undefined ? {} : { key: search.key }),
    ...(search.since === undefined ? {} : { createdFrom: search.since }),
    ...(search.until === undefined ? {} : { createdTo: search.until }),
    ...(after === undefined ? {} : { after }),
    limit: limit + 1,
  });
  const page = listed.slice(0, limit);
  const last = page[page.length - 1];
  return { calls: page, next: listed.length > limit && last ? encodeCursor(listCursorOf(last)) : null };
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

/**
 * Every approval request made for one call: found by its key (an index), all of them. A call has
 * few (one per policy version it was asked under); the count first makes the listing's limit that
 * number, so none is ever cut off.
 */
async function approvalsOf(governance: GovernanceStore, tenant: string, key: string): Promise<ApprovalRecord[]> {
  const count = await governance.countApprovals({ tenant, key });
  return count === 0 ? [] : governance.listApprovals({ tenant, key, limit: count });
}

/** One call and its history: approvals, findings, confirmations and its saga. */
export async function callDetail(ledger: Stores, tenant: string, key: string): Promise<CallDetail | undefined> {
  const call = await ledger.calls.get(tenant, key);
  if (!call) return undefined;
  const shown = await showQueueItem(ledger, key, { tenant });
  const approvals = ledger.governance ? await approvalsOf(ledger.governance, tenant, key) : [];
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
