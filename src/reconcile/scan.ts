/**
 * The pull scan: hold the ledger against what each tool's downstream says it did.
 *
 * For each tool with a `lookup`:
 * 1. Read the tool's ledger records that changed since the tool's cursor (incremental; an
 *    index makes this cost what is new, not the ledger), up to a horizon `settleMs` behind the
 *    ledger's clock, so a write stamped just before the scan but committed just after it is
 *    read next time rather than skipped.
 * 2. Ask `lookup` for the downstream's records in a window that covers those records (from
 *    the oldest one's creation) and everything since the last scan's window, widened by
 *    `skewMs` on both sides for the two systems' clocks.
 * 3. Judge every changed record against the downstream records for its key (judge.ts), and
 *    every downstream record no changed record accounts for against the ledger by key:
 *    unknown → orphan_downstream. Downstream records already matched in an earlier scan (the
 *    windows overlap) are recognised by their ref and cost no ledger read.
 * 4. Save the cursor (incremental scans only).
 *
 * A finding is stored once (its id is derived from the difference): scanning again, or
 * overlapping windows, never duplicates one, and a resolved finding stays resolved.
 */
import { EffectgateError } from "../core/errors.js";
import type { AnyTool, Tool } from "../core/tool.js";
import type { Json } from "../core/json.js";
import type { CallRecord, CallStore, ChangeCursor } from "../contracts/calls.js";
import type { Stores } from "../contracts/stores.js";
import { cursorOf } from "../contracts/change-order.js";
import type { ReconcileStore } from "../contracts/reconcile.js";
import { emptyTally, judgeRecord, reportOrphan, type Judge } from "./judge.js";
import type { Finding } from "../contracts/findings.js";
import type { DownstreamRecord, LookupWindow } from "../core/hooks.js";

export const DEFAULT_SETTLE_MS = 60_000;
export const DEFAULT_SKEW_MS = 5 * 60_000;
const DEFAULT_PAGE_SIZE = 500;
/** Open findings of a tool loaded up front to close the ones a scan settles; above this, asked per key. */
const OPEN_FINDINGS_PRELOAD = 10_000;

export interface ReconcileOptions {
  /** Only these tools (default: every tool with a `lookup`). Naming a tool without one is an error. */
  readonly tools?: readonly string[];
  /**
   * An explicit window (epoch ms, the ledger's clock): the records that changed at or after
   * `since` and at or before `until`. An explicit scan neither reads nor moves the saved
   * cursor. Without either, the scan is incremental: from the tool's cursor to the horizon.
   */
  readonly since?: number;
  readonly until?: number;
  /** How far behind the ledger's clock the scan stops (default 60 s): a write commits within this long of its timestamp. */
  readonly settleMs?: number;
  /** How far the downstream's clock may be from the ledger's (default 5 min): the lookup window is widened by it. */
  readonly skewMs?: number;
  /** Ledger records read per query (default 500). */
  readonly pageSize?: number;
  /** Aborts the scan (passed on to `lookup`). */
  readonly signal?: AbortSignal;
}

export interface ToolScan {
  readonly tool: string;
  /** Set when the tool was not scanned, with the reason. */
  readonly skipped?: string;
  /** The downstream window asked of `lookup`. */
  readonly window?: LookupWindow;
  /** Ledger records read (what the scan cost): on an unchanged ledger an incremental scan reads 0. */
  readonly recordsRead: number;
  /** Downstream records `lookup` returned. */
  readonly downstreamRead: number;
  /** Downstream records matched in an earlier scan, recognised by their ref (no ledger read). */
  readonly alreadyMatched: number;
  /** Ledger reads by key, for downstream records no changed record accounted for. */
  readonly keyLookups: number;
  readonly confirmed: number;
  readonly newFindings: readonly Finding[];
  readonly seenAgain: number;
  readonly autoResolved: number;
  /** Where the next incremental scan starts (undefined when nothing was read yet). */
  readonly cursor?: ChangeCursor;
}

export interface ReconcileSummary {
  /** Whether the scan ran from the saved cursors (and moved them). */
  readonly incremental: boolean;
  /** The ledger time the scan stopped at. */
  readonly horizon: number;
  readonly tools: readonly ToolScan[];
  /** Totals over the tools. */
  readonly recordsRead: number;
  readonly downstreamRead: number;
  readonly confirmed: number;
  readonly newFindings: readonly Finding[];
  readonly seenAgain: number;
  readonly autoResolved: number;
}

interface SavedCursor {
  readonly ledger?: ChangeCursor;
  readonly downstreamUntil?: number;
}

const cursorName = (tool: string) => `scan:${tool}`;

/** The ledger's reconcile store, or an error saying the store cannot be reconciled. */
export function reconcileStoreOf(ledger: Stores): ReconcileStore {
  if (!ledger.reconcile) {
    throw new EffectgateError("EG_LEDGER_UNAVAILABLE", `the ledger ${ledger.location} keeps no reconciliation data (its store has no \`reconcile\`)`);
  }
  return ledger.reconcile;
}

function changesOf(ledger: Stores): NonNullable<CallStore["listChangedSince"]> {
  if (!ledger.calls.listChangedSince) {
    throw new EffectgateError("EG_LEDGER_UNAVAILABLE", `the ledger ${ledger.location} cannot list changed records (no listChangedSince), so it cannot be scanned`);
  }
  return ledger.calls.listChangedSince.bind(ledger.calls);
}

export interface ReconcileTarget {
  readonly ledger: Stores;
  // Tools of any schema and result type, as createGate takes them (only lookup and the comparison are used).
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  readonly tools: readonly Tool<any, any>[];
}

/** Runs one scan over `target.tools` (see the file comment; `gate.reconcile` is this with the gate's ledger and tools). */
export async function reconcile(target: ReconcileTarget, options: ReconcileOptions = {}): Promise<ReconcileSummary> {
  const { ledger } = target;
  const tools = target.tools as readonly AnyTool[];
  const store = reconcileStoreOf(ledger);
  const changes = changesOf(ledger);
  const byName = new Map(tools.map((t) => [t.name, t]));
  let chosen: AnyTool[];
  if (options.tools !== undefined) {
    chosen = options.tools.map((name) => {
      const tool = byName.get(name);
      if (!tool) throw new EffectgateError("EG_UNKNOWN_TOOL", `cannot reconcile ${JSON.stringify(name)}: no such tool was given (tools: ${[...byName.keys()].join(", ") || "none"})`);
      if (!tool.lookup) throw new EffectgateError("EG_BAD_TOOL_DEFINITION", `cannot reconcile ${name}: it has no lookup(window, ctx) listing the downstream's records`);
      return tool;
    });
  } else {
    chosen = tools.filter((t) => t.effect !== "read");
  }
  const explicit = options.since !== undefined || options.until !== undefined;
  const now = await ledger.calls.now();
  const horizon = options.until ?? now - (options.settleMs ?? DEFAULT_SETTLE_MS);
  const scans: ToolScan[] = [];
  for (const tool of chosen) {
    if (!tool.lookup) {
      scans.push({ tool: tool.name, skipped: "it has no lookup", recordsRead: 0, downstreamRead: 0, alreadyMatched: 0, keyLookups: 0, confirmed: 0, newFindings: [], seenAgain: 0, autoResolved: 0 });
      continue;
    }
    options.signal?.throwIfAborted();
    scans.push(await scanTool(ledger, store, changes, tool, { ...options, explicit, horizon }));
  }
  const sum = (pick: (s: ToolScan) => number) => scans.reduce((n, s) => n + pick(s), 0);
  return {
    incremental: !explicit,
    horizon,
    tools: scans,
    recordsRead: sum((s) => s.recordsRead),
    downstreamRead: sum((s) => s.downstreamRead),
    confirmed: sum((s) => s.confirmed),
    newFindings: scans.flatMap((s) => s.newFindings),
    seenAgain: sum((s) => s.seenAgain),
    autoResolved: sum((s) => s.autoResolved),
  };
}

async function scanTool(
  ledger: Stores,
  store: ReconcileStore,
  changes: NonNullable<CallStore["listChangedSince"]>,
  tool: AnyTool,
  options: ReconcileOptions & { explicit: boolean; horizon: number },
): Promise<ToolScan> {
  const skewMs = options.skewMs ?? DEFAULT_SKEW_MS;
  const pageSize = options.pageSize ?? DEFAULT_PAGE_SIZE;
  const saved = options.explicit ? undefined : decodeCursor(await store.getCursor(cursorName(tool.name)));

  // 1. What changed in the ledger.
  let after: ChangeCursor | undefined = options.since !== undefined ? { at: options.since, tenant: "", key: "" } : saved?.ledger;
  const changed: CallRecord[] = [];
  for (;;) {
    options.signal?.throwIfAborted();
    const page = await changes({ tool: tool.name, until: options.horizon, limit: pageSize, ...(after ? { after } : {}) });
    changed.push(...page);
    const last = page[page.length - 1];
    if (last) after = cursorOf(last);
    if (page.length < pageSize) break;
  }

  // 2. What the downstream says, over a window covering those records and everything since the last window.
  const oldest = changed.reduce((min, r) => Math.min(min, r.createdAt), Number.POSITIVE_INFINITY);
  const from = Math.min(options.since ?? saved?.downstreamUntil ?? oldest, oldest);
  const window: LookupWindow = {
    since: (Number.isFinite(from) ? from : options.horizon) - skewMs,
    until: options.horizon + skewMs,
  };
  const controller = new AbortController();
  const onAbort = () => controller.abort(options.signal?.reason);
  options.signal?.addEventListener("abort", onAbort, { once: true });
  const fresh = new Map<string, DownstreamRecord[]>();
  let downstreamRead = 0;
  try {
    const listed = await (tool.lookup as NonNullable<AnyTool["lookup"]>).call(tool, window, { tool: tool.name, signal: controller.signal });
    for await (const record of listed as AsyncIterable<DownstreamRecord>) {
      checkDownstreamRecord(tool.name, record);
      downstreamRead++;
      const same = fresh.get(record.key);
      if (same) {
        // The same downstream record listed twice is one record.
        if (!same.some((d) => d.ref === record.ref)) same.push(record);
      } else fresh.set(record.key, [record]);
    }
  } finally {
    options.signal?.removeEventListener("abort", onAbort);
  }

  // 3. Judge.
  const preloaded = await store.listFindings({ status: "open", tool: tool.name, limit: OPEN_FINDINGS_PRELOAD + 1 });
  const openByKey = new Map<string, Finding[]>();
  for (const f of preloaded) openByKey.set(f.key, [...(openByKey.get(f.key) ?? []), f]);
  const judge: Judge = {
    store, tool: tool.name, comparison: tool, source: "scan", window, tally: emptyTally(),
    async openFindings(tenant, key) {
      const found = preloaded.length > OPEN_FINDINGS_PRELOAD
        ? await store.listFindings({ status: "open", tool: tool.name, key })
        : openByKey.get(key) ?? [];
      return found.filter((f) => f.tenant === tenant);
    },
  };
  // A downstream record naming no tenant is matched by key alone, unless the changed records use
  // that key in several tenants: then it is left to the by-key pass below, which reports it.
  const tenantsByKey = new Map<string, Set<string>>();
  for (const r of changed) tenantsByKey.set(r.key, (tenantsByKey.get(r.key) ?? new Set()).add(r.tenant));
  for (const record of changed) {
    const candidates = fresh.get(record.key) ?? [];
    const shared = (tenantsByKey.get(record.key)?.size ?? 0) > 1;
    const mine = candidates.filter((d) => d.tenant === record.tenant || (d.tenant === undefined && !shared));
    if (mine.length > 0) {
      const rest = candidates.filter((d) => !mine.includes(d));
      if (rest.length > 0) fresh.set(record.key, rest);
      else fresh.delete(record.key);
    }
    await judgeRecord(judge, record, mine);
  }

  let alreadyMatched = 0;
  let keyLookups = 0;
  for (const [key, records] of fresh) {
    const unmatched: DownstreamRecord[] = [];
    for (const d of records) {
      const linked = await store.listConfirmations({ tool: tool.name, ref: d.ref });
      if (linked.some((c) => c.key === d.key)) alreadyMatched++;
      else unmatched.push(d);
    }
    if (unmatched.length === 0) continue;
    const byTenant = new Map<string | undefined, DownstreamRecord[]>();
    for (const d of unmatched) byTenant.set(d.tenant, [...(byTenant.get(d.tenant) ?? []), d]);
    for (const [tenant, group] of byTenant) {
      keyLookups++;
      const found = tenant !== undefined
        ? [await ledger.calls.get(tenant, key)].filter((r): r is CallRecord => r !== undefined)
        : await ledger.calls.list({ key, tool: tool.name, limit: 2 });
      const record = found[0];
      if (found.length === 1 && record && record.tool === tool.name) {
        await judgeRecord(judge, record, group);
        continue;
      }
      const why = found.length > 1
        ? `its key is used by ${tool.name} calls in several tenants (${found.map((r) => r.tenant).join(", ")}) and the record names none`
        : record && record.tool !== tool.name
          ? `the ledger's call with that key is a ${record.tool} call, not ${tool.name}`
          : "the ledger has no call with that key";
      for (const d of group) await reportOrphan(judge, d, why);
    }
  }

  // 4. Move the cursor.
  if (!options.explicit) {
    const next: SavedCursor = { ...(after ? { ledger: after } : {}), downstreamUntil: options.horizon };
    await store.putCursor(cursorName(tool.name), next as unknown as Json);
  }
  const { tally } = judge;
  return {
    tool: tool.name, window, recordsRead: changed.length, downstreamRead, alreadyMatched, keyLookups,
    confirmed: tally.confirmed, newFindings: tally.newFindings, seenAgain: tally.seenAgain, autoResolved: tally.autoResolved,
    ...(after ? { cursor: after } : {}),
  };
}

function decodeCursor(value: Json | undefined): SavedCursor | undefined {
  if (value === undefined || value === null || typeof value !== "object" || Array.isArray(value)) return undefined;
  const ledger = value.ledger;
  const cursor = typeof ledger === "object" && ledger !== null && !Array.isArray(ledger) &&
      typeof ledger.at === "number" && typeof ledger.tenant === "string" && typeof ledger.key === "string"
    ? { at: ledger.at, tenant: ledger.tenant, key: ledger.key }
    : undefined;
  const until = typeof value.downstreamUntil === "number" ? value.downstreamUntil : undefined;
  return { ...(cursor ? { ledger: cursor } : {}), ...(until !== undefined ? { downstreamUntil: until } : {}) };
}

function checkDownstreamRecord(tool: string, record: DownstreamRecord): void {
  const ok = typeof record === "object" && record !== null && typeof record.ref === "string" && record.ref !== "" &&
    typeof record.key === "string" && (record.tenant === undefined || typeof record.tenant === "string");
  if (!ok) {
    throw new EffectgateError("EG_BAD_TOOL_DEFINITION", `${tool}.lookup returned ${JSON.stringify(record)}: each record needs a non-empty string ref and a string key`);
  }
}
