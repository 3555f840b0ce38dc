/**
 * The human queue: everything that needs a person, in one list, with what is known about each.
 *
 * - calls in `needs_human` (effectgate cannot tell whether the effect happened) and in
 *   `compensation_failed` (undoing a completed call failed), each with the open findings about
 *   the same call attached;
 * - open reconciliation findings about anything else (orphans, duplicates, mismatches…).
 *
 * A call that is a step of a saga a person already resolved (`effectgate saga resolve`) is settled
 * with that saga and leaves the queue.
 *
 * A needs_human call is resolved by recording what actually happened, as the state table
 * allows (needs_human → completed | failed): the agent's next replay of the call gets that
 * answer. A finding is resolved with a note. Resolving a call also closes its open
 * `unresolved` findings.
 */
import { EffectgateError, errorMessage } from "../core/errors.js";
import { assertTransition } from "../core/states.js";
import type { Json } from "../core/json.js";
import type { CallRecord, ListCursor } from "../contracts/calls.js";
import { listCursorOf } from "../contracts/call-rules.js";
import type { Stores } from "../contracts/stores.js";
import type { Confirmation, Finding, FindingKind } from "../contracts/findings.js";

export type QueueKind = "needs_human" | "compensation_failed" | FindingKind;

export interface QueueItem {
  /** What `queue show` / `queue resolve` take: the call's key, or the finding's id (f_…). */
  readonly id: string;
  readonly kind: QueueKind;
  readonly tenant: string | null;
  readonly tool: string;
  readonly key: string;
  /** Since when it has waited: the call's last change, or when the finding was first seen. */
  readonly since: number;
  /** One line: why a person is needed. */
  readonly summary: string;
  /** How it is resolved. */
  readonly resolveWith: string;
  /** The call, for call items (and for findings about a call the ledger has). */
  readonly call: CallRecord | null;
  /** The finding, for finding items. */
  readonly finding: Finding | null;
  /** Open findings about the same call (call items). */
  readonly related: readonly Finding[];
}

export interface QueueQuery {
  readonly tenant?: string;
  /** At most this many of each source (calls per state, findings), default 100. */
  readonly limit?: number;
}

const CALL_RESOLVE = {
  needs_human: "record what actually happened: --completed-with JSON (the result the agent gets) or --failed REASON (no effect happened)",
  compensation_failed: "undo the effect by hand, then settle it through its saga (effectgate saga --help); the state table allows compensated or needs_human",
} as const;
const FINDING_RESOLVE = "check the downstream system, fix what needs fixing there, then resolve it with --note saying what you found or did";

function callItem(record: CallRecord, related: readonly Finding[]): QueueItem {
  const state = record.state as "needs_human" | "compensation_failed";
  return {
    id: record.key, kind: state, tenant: record.tenant, tool: record.tool, key: record.key, since: record.updatedAt,
    summary: record.error ?? (state === "needs_human" ? "the outcome of this call is unknown" : "undoing this call failed"),
    resolveWith: CALL_RESOLVE[state], call: record, finding: null, related,
  };
}

function findingItem(finding: Finding, call: CallRecord | null): QueueItem {
  return {
    id: finding.id, kind: finding.kind, tenant: finding.tenant, tool: finding.tool, key: finding.key, since: finding.firstSeenAt,
    summary: finding.summary, resolveWith: FINDING_RESOLVE, call, finding, related: [],
  };
}

/** JSON, not a NUL join: a key may contain NUL. */
const callId = (tenant: string | null, key: string) => JSON.stringify([tenant, key]);

/** The saga step a key names (saga/keys.ts: `saga:<id>:<step>`, or that + `:compensate`), if any. */
function sagaStepOf(key: string): { sagaId: string; step: string } | undefined {
  const match = /^saga:([^:]*):([^:]*)(?::compensate)?$/.exec(key);
  if (!match) return undefined;
  try {
    return { sagaId: decodeURIComponent(match[1]!), step: decodeURIComponent(match[2]!) };
  } catch {
    return undefined;
  }
}

/**
 * The resolution of the saga this call is a step (or a step's compensation) of, when a person
 * already settled that saga (`effectgate saga resolve`): its calls no longer wait for anyone.
 */
async function settledWithSaga(ledger: Stores, record: CallRecord): Promise<string | undefined> {
  const named = sagaStepOf(record.key);
  if (!named || !ledger.sagas) return undefined;
  const saga = await ledger.sagas.get(record.tenant, named.sagaId);
  if (saga?.state !== "resolved") return undefined;
  // Only a key that really is one of its steps' (a key function could produce any text).
  const step = await ledger.sagas.getStep(record.tenant, named.sagaId, named.step);
  if (!step || (step.key !== record.key && `${step.key}:compensate` !== record.key)) return undefined;
  return `saga ${saga.id} was resolved (${saga.resolution ?? "by a person"})`;
}

/** Everything that needs a person, oldest first. The calls of a saga a person resolved are settled with it. */
export async function listQueue(ledger: Stores, query: QueueQuery = {}): Promise<QueueItem[]> {
  const limit = query.limit ?? 100;
  const scope = query.tenant === undefined ? {} : { tenant: query.tenant };
  const waiting = [
    ...(await ledger.calls.list({ ...scope, state: "needs_human", limit })),
    ...(await ledger.calls.list({ ...scope, state: "compensation_failed", limit })),
  ];
  const calls: CallRecord[] = [];
  for (const c of waiting) if ((await settledWithSaga(ledger, c)) === undefined) calls.push(c);
  const findings = ledger.reconcile ? await ledger.reconcile.listFindings({ ...scope, status: "open", limit }) : [];
  const related = new Map<string, Finding[]>();
  const byCall = new Set(calls.map((c) => callId(c.tenant, c.key)));
  const items: QueueItem[] = [];
  for (const f of findings) {
    const id = callId(f.tenant, f.key);
    if (byCall.has(id)) related.set(id, [...(related.get(id) ?? []), f]);
    else items.push(findingItem(f, null));
  }
  for (const c of calls) items.push(callItem(c, related.get(callId(c.tenant, c.key)) ?? []));
  return items.sort((a, b) => a.since - b.since || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
}

/** How many waiting calls a queue count reads at a time. */
const COUNT_PAGE = 1000;

/**
 * How many items `listQueue` would list with no limit: exact, never capped (the console's queue
 * size and the `queue_size` gauge). The waiting calls are paged through in the list order (keyset:
 * no call is skipped or read twice) instead of counted by the store, because whether a call of a
 * resolved saga still waits is judged call by call (`settledWithSaga`). Open findings are counted
 * by the store, less those about a waiting call (listed with it, not on their own): one indexed
 * count per waiting call, asked only while some open finding is not yet accounted for. So the cost
 * grows with the calls waiting for a person, not with the ledger.
 */
export async function countQueue(ledger: Stores, query: { readonly tenant?: string } = {}): Promise<number> {
  const scope = query.tenant === undefined ? {} : { tenant: query.tenant };
  const findings = ledger.reconcile;
  const open = findings ? await findings.countFindings({ ...scope, status: "open" }) : 0;
  let calls = 0;
  let aboutCalls = 0;
  for (const state of ["needs_human", "compensation_failed"] as const) {
    let after: ListCursor | undefined;
    for (;;) {
      const page = await ledger.calls.list({ ...scope, state, limit: COUNT_PAGE, ...(after === undefined ? {} : { after }) });
      for (const c of page) {
        if ((await settledWithSaga(ledger, c)) !== undefined) continue;
        calls++;
        if (findings && aboutCalls < open) aboutCalls += await findings.countFindings({ tenant: c.tenant, key: c.key, status: "open" });
      }
      const last = page[page.length - 1];
      if (page.length < COUNT_PAGE || last === undefined) break;
      after = listCursorOf(last);
    }
  }
  // Findings resolved while the calls were read can make the two counts disagree by a moment: never below the calls.
  return calls + Math.max(0, open - aboutCalls);
}

export interface QueueDetail extends Omit<QueueItem, "kind"> {
  /** As in the queue, or "call" for a call that is not waiting for anyone (shown on request). */
  readonly kind: QueueKind | "call";
  /** Downstream records matched to the call so far (by scans and receipts). */
  readonly confirmations: readonly Confirmation[];
}

export type Lookup =
  | { readonly found: true; readonly item: QueueDetail }
  | { readonly found: false; readonly why: "none" }
  /** The key exists in several tenants: say which. */
  | { readonly found: false; readonly why: "ambiguous"; readonly tenants: readonly string[] };

/**
 * One queue entry (or any call or finding, queued or not): a finding by id, else a call by key
 * (in `tenant`, or the only tenant that has it).
 */
export async function showQueueItem(ledger: Stores, id: string, options: { readonly tenant?: string } = {}): Promise<Lookup> {
  const store = ledger.reconcile;
  const finding = store ? await store.getFinding(id) : undefined;
  if (finding) {
    const call = finding.tenant === null ? undefined : await ledger.calls.get(finding.tenant, finding.key);
    const confirmations = store && call ? await store.listConfirmations({ tool: call.tool, tenant: call.tenant, key: call.key }) : [];
    return { found: true, item: { ...findingItem(finding, call ?? null), confirmations } };
  }
  const located = await locateCall(ledger, id, options.tenant);
  if (!located.found) return located;
  const call = located.record;
  const open = store ? await store.listFindings({ tenant: call.tenant, key: call.key, status: "open", limit: 1000 }) : [];
  const confirmations = store ? await store.listConfirmations({ tool: call.tool, tenant: call.tenant, key: call.key }) : [];
  const settled = await settledWithSaga(ledger, call);
  const item: Omit<QueueDetail, "confirmations"> = (call.state === "needs_human" || call.state === "compensation_failed") && settled === undefined
    ? callItem(call, open)
    : {
        id: call.key, kind: "call", tenant: call.tenant, tool: call.tool, key: call.key, since: call.updatedAt,
        summary: `the call is ${call.state}; it is not waiting for a person${settled === undefined ? "" : `: ${settled}`}`,
        resolveWith: "nothing to resolve", call, finding: null, related: open,
      };
  return { found: true, item: { ...item, confirmations } };
}

async function locateCall(ledger: Stores, key: string, tenant: string | undefined):
  Promise<{ found: true; record: CallRecord } | { found: false; why: "none" } | { found: false; why: "ambiguous"; tenants: string[] }> {
  if (tenant !== undefined) {
    const record = await ledger.calls.get(tenant, key);
    return record ? { found: true, record } : { found: false, why: "none" };
  }
  const matches = await ledger.calls.list({ key, limit: 1000 });
  const [only] = matches;
  if (matches.length === 1 && only) return { found: true, record: only };
  if (matches.length === 0) return { found: false, why: "none" };
  return { found: false, why: "ambiguous", tenants: matches.map((m) => m.tenant) };
}

/** What actually happened to a call a person checked. */
export type CallResolution =
  /** The effect happened: this is its result (what the agent's replay of the call gets). */
  | { readonly completedWith: Json; readonly note?: string; readonly by?: string }
  /** The effect did not happen. */
  | { readonly failed: string; readonly note?: string; readonly by?: string };

/**
 * Settles a needs_human call (compare-and-set: if the call moved meanwhile, nothing is written
 * and EG_ILLEGAL_TRANSITION or a "changed meanwhile" error says so). Closes the call's open
 * `unresolved` findings. Returns the settled record.
 */
export async function resolveCall(ledger: Stores, tenant: string, key: string, resolution: CallResolution): Promise<{ record: CallRecord; closedFindings: readonly string[] }> {
  const record = await ledger.calls.get(tenant, key);
  if (!record) throw new EffectgateError("EG_BAD_CONTENT", `no call with key ${JSON.stringify(key)} in tenant ${JSON.stringify(tenant)}`);
  const to = "completedWith" in resolution ? "completed" : "failed";
  assertTransition(key, record.state, to);
  const by = resolution.by === undefined ? "" : ` (${resolution.by})`;
  const note = resolution.note === undefined ? "" : `: ${resolution.note}`;
  const settled = "completedWith" in resolution
    ? await ledger.calls.update(tenant, key, record.version, {
        state: "completed", result: resolution.completedWith, owner: null, error: `settled by a person${by}${note}`,
      })
    : await ledger.calls.update(tenant, key, record.version, {
        state: "failed", owner: null,
        error: errorMessage("EG_TOOL_FAILED", `${record.tool} failed (settled by a person${by}): ${resolution.failed}${resolution.note === undefined ? "" : ` (${resolution.note})`}`),
      });
  if (!settled) {
    throw new EffectgateError("EG_IN_PROGRESS", `call ${key} in tenant ${tenant} changed while it was being resolved (it was ${record.state} at version ${record.version}); look at it again`);
  }
  const closed: string[] = [];
  if (ledger.reconcile) {
    for (const f of await ledger.reconcile.listFindings({ tenant, key, tool: record.tool, status: "open", kind: "unresolved", limit: 1000 })) {
      const done = await ledger.reconcile.resolveFinding(f.id, { note: `the call was settled by a person as ${to}${note}`, ...(resolution.by === undefined ? {} : { by: resolution.by }) });
      if (done?.changed) closed.push(f.id);
    }
  }
  return { record: settled, closedFindings: closed };
}

/** How a person settles one queue entry: a call by what happened to it, a finding with a note. */
export type QueueMove = CallResolution | { readonly note: string; readonly by?: string };

export type QueueResolved =
  | { readonly kind: "call"; readonly record: CallRecord; readonly closedFindings: readonly string[] }
  | { readonly kind: "finding"; readonly finding: Finding; readonly changed: boolean };

/**
 * Settles the queue entry `id` (a finding id, or a call key in `tenant` or its only tenant): the
 * one move the CLI's `queue resolve` and the console's API both make. A finding takes a note; a
 * call takes `completedWith` or `failed` (resolveCall). A wrong move is refused with EG_INVALID_INPUT.
 */
export async function resolveQueueItem(ledger: Stores, id: string, move: QueueMove, options: { readonly tenant?: string } = {}): Promise<QueueResolved | Exclude<Lookup, { found: true }>> {
  const shown = await showQueueItem(ledger, id, options);
  if (!shown.found) return shown;
  const item = shown.item;
  const settlesCall = "completedWith" in move || "failed" in move;
  if (item.finding) {
    if (settlesCall) throw new EffectgateError("EG_INVALID_INPUT", `${id} is a finding, not a call: resolve it with a note (completedWith and failed settle needs_human calls)`);
    if (typeof move.note !== "string" || move.note.trim() === "") throw new EffectgateError("EG_INVALID_INPUT", `resolving finding ${id} needs a note saying what you found or did`);
    const done = await ledger.reconcile?.resolveFinding(id, { note: move.note, ...(move.by === undefined ? {} : { by: move.by }) });
    if (!done) throw new EffectgateError("EG_LEDGER_CORRUPT", `finding ${id} vanished while it was being resolved`);
    return { kind: "finding", finding: done.finding, changed: done.changed };
  }
  const call = item.call;
  if (!call) throw new EffectgateError("EG_BAD_CONTENT", `no call ${JSON.stringify(id)}`);
  if (!settlesCall) throw new EffectgateError("EG_INVALID_INPUT", `settle call ${call.key} with completedWith (its effect happened: the result the agent gets) or failed (it did not)`);
  const settled = await resolveCall(ledger, call.tenant, call.key, move);
  return { kind: "call", ...settled };
}
