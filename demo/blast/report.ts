/**
 * The blast-radius report: the JSON document (`--json`, and the file next to the chart) and the
 * terminal table. Column definitions are in docs/demo.md.
 */
import { DEFAULT_FAULTS, SERVICE_TRAITS } from "./services.js";
import { CALL_TIMEOUT_MS, SLOW_MS } from "./timing.js";
import type { BlastRun, LevelRow } from "./runner.js";
import { DESTRUCTIVE_QUOTA_PER_TASK, type Workload } from "./workload.js";

export interface BlastJsonLevel {
  /** 0–6, or "ref" for the JSON-file-ledger reference row. */
  readonly level: number | "ref";
  readonly name: string;
  readonly adds: string;
  readonly available: boolean;
  /** Set when the level cannot run yet: what it waits for. */
  readonly waitingFor?: string;
  readonly duplicates: number | null;
  readonly lost: number | null;
  readonly halfDone: number | null;
  readonly humanQueue: number | null;
  readonly overQuota: number | null;
  readonly wrongParams: number | null;
  readonly discrepancies: { readonly found: number | null; readonly present: number | null };
  readonly toldDoneNotApplied: number | null;
  readonly unresolved: number | null;
  readonly overheadMs: { readonly median: number | null; readonly p99: number | null };
  readonly wallMs: number | null;
  readonly calls: number | null;
  readonly effects: number | null;
  readonly kills: number | null;
  readonly faults: Readonly<Record<string, number>> | null;
}

export interface BlastJson {
  readonly seed: number;
  readonly tasks: number;
  readonly levels: readonly BlastJsonLevel[];
}

const round = (ms: number | null) => (ms === null ? null : Math.round(ms * 1000) / 1000);

export function toJson(run: BlastRun): BlastJson {
  return { seed: run.seed, tasks: run.tasks, levels: run.rows.map(levelJson) };
}

function levelJson(row: LevelRow): BlastJsonLevel {
  const { level, result } = row;
  const id: number | "ref" = level.key === "ref" ? "ref" : Number(level.key);
  const base = { level: id, name: level.name, adds: level.adds };
  if (!result.available) {
    return {
      ...base, available: false, waitingFor: result.waitingFor,
      duplicates: null, lost: null, halfDone: null, humanQueue: null, overQuota: null, wrongParams: null,
      discrepancies: { found: null, present: null }, toldDoneNotApplied: null, unresolved: null,
      overheadMs: { median: null, p99: null }, wallMs: null, calls: null, effects: null, kills: null, faults: null,
    };
  }
  const { truth, audit } = result;
  return {
    ...base, available: true,
    duplicates: truth.duplicates,
    lost: truth.lost,
    halfDone: truth.halfDone,
    humanQueue: audit?.humanQueue ?? 0,
    overQuota: truth.overQuota,
    wrongParams: truth.wrongParams,
    discrepancies: { found: audit?.discrepanciesFound ?? null, present: truth.discrepanciesPresent },
    toldDoneNotApplied: truth.toldDoneNotApplied,
    unresolved: audit?.unresolved ?? 0,
    overheadMs: { median: round(truth.overheadMs.median), p99: round(truth.overheadMs.p99) },
    wallMs: result.wallMs,
    calls: truth.calls,
    effects: truth.effects,
    kills: result.kills,
    faults: result.injected,
  };
}

const COLUMNS = [
  { head: "level", right: false },
  { head: "protection", right: false },
  { head: "duplicates", right: true },
  { head: "lost", right: true },
  { head: "half-done", right: true },
  { head: "wrong params", right: true },
  { head: "found/present", right: true },
  { head: "to a human", right: true },
  { head: "over quota", right: true },
  { head: "overhead p50 / p99", right: true },
  { head: "wall", right: true },
] as const;

export function formatMs(ms: number | null): string {
  if (ms === null) return "-";
  return ms < 10 ? ms.toFixed(2) : ms < 100 ? ms.toFixed(1) : ms.toFixed(0);
}

/** The table as the terminal shows it: numbers right-aligned, unavailable levels on one line each. */
export function blastTable(json: BlastJson): string {
  const cells = json.levels.map((l) => l.available
    ? [
        String(l.level), l.name, String(l.duplicates), String(l.lost), String(l.halfDone), String(l.wrongParams),
        `${l.discrepancies.found ?? "-"}/${l.discrepancies.present}`, String(l.humanQueue), String(l.overQuota),
        `${formatMs(l.overheadMs.median)} / ${formatMs(l.overheadMs.p99)} ms`, `${((l.wallMs ?? 0) / 1000).toFixed(1)} s`,
      ]
    : [String(l.level), l.name]);
  const widths = COLUMNS.map((c, i) => Math.max(c.head.length, ...cells.filter((r) => r.length > 2).map((r) => (r[i] ?? "").length)));
  widths[1] = Math.max(widths[1] ?? 0, ...cells.map((r) => (r[1] ?? "").length));
  const line = (row: readonly string[]) => row.map((c, i) => (COLUMNS[i]?.right ? c.padStart(widths[i] ?? 0) : c.padEnd(widths[i] ?? 0))).join("  ").trimEnd();
  const out = [line(COLUMNS.map((c) => c.head)), line(widths.map((w) => "-".repeat(w)))];
  json.levels.forEach((l, i) => {
    const row = cells[i] ?? [];
    out.push(l.available ? line(row) : `${line(row)}  not available yet (waiting for ${l.waitingFor ?? "?"})`);
  });
  return out.join("\n");
}

/** What was injected, in one paragraph. */
export function faultSummary(workload: Workload): string {
  const t = workload.tasks;
  const n = (f: (task: (typeof t)[number]) => boolean) => t.filter(f).length;
  const pct = (x: number) => `${Math.round(x * 100)}%`;
  return (
    `${t.length} tasks (${n((x) => x.kind === "support")} support, ${n((x) => x.kind === "billing")} billing, ${n((x) => x.kind === "order")} orders ` +
    `run as reserve → charge → ship). Injected into every level alike: ${n((x) => x.crash !== null)} workers SIGKILLed mid-task and resumed ` +
    `from their checkpoint, ${n((x) => x.redeliver !== null)} assistant messages delivered twice, ${n((x) => x.parallel)} tasks run by two workers at once, ` +
    `${n((x) => x.hallucinate !== null)} hallucinated calls (wrong parameters), ${n((x) => x.runaway)} runaway loops of draft deletions ` +
    `(quota ${DESTRUCTIVE_QUOTA_PER_TASK} per task), ${n((x) => x.shipFails)} refused shipments (${n((x) => x.compensationFails !== null)} of them with a ` +
    `compensation that is refused too); and per request: ${pct(DEFAULT_FAULTS.drop)} connections cut, ${pct(DEFAULT_FAULTS.lost)} replies lost after ` +
    `the effect, ${pct(DEFAULT_FAULTS.slow)} completing after ${SLOW_MS} ms while clients wait ${CALL_TIMEOUT_MS} ms.`
  );
}

export function servicesSummary(): string {
  return SERVICE_TRAITS.map((s) =>
    `  ${s.name.padEnd(10)} ${s.does}; ${s.honoursKeys ? "HONOURS Idempotency-Key (like Stripe)" : "ignores Idempotency-Key"}; lookup: ${s.lookup === "drafts only" ? "none for sent e-mails (drafts only)" : s.lookup}`,
  ).join("\n");
}
