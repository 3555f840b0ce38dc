/**
 * Judging one ledger record against the downstream records known for its key: the rules
 * shared by the pull scan and pushed receipts, so both classify a difference the same way.
 *
 *   ledger state          downstream records for the key     verdict
 *   completed             exactly one, compared fields equal  confirmed
 *   completed             exactly one, a field differs        mismatch
 *   completed             none                                missing_downstream
 *   completed             more than one                       duplicate_downstream
 *   uncertain/needs_human any                                 unresolved (the records are its evidence)
 *   failed                one or more                         orphan_downstream (the ledger says no effect happened)
 *   (no record)           one or more                         orphan_downstream, one per downstream record
 *   in_progress, compensated, compensation_failed: no verdict (still running, or a saga's business);
 *   the downstream records are linked to the key so a later judgement counts them.
 */
import type { CallRecord } from "../contracts/calls.js";
import type { ReconcileStore } from "../contracts/reconcile.js";
import { compareRecord, type Comparison } from "./compare.js";
import { findingId } from "../contracts/finding-rules.js";
import type { Confirmation, Finding, FindingKind, FindingReport, FindingSource, LedgerSnapshot } from "../contracts/findings.js";
import type { DownstreamRecord, LookupWindow } from "../core/hooks.js";

export interface Tally {
  /** Completed calls matched to exactly one downstream record with equal fields. */
  confirmed: number;
  /** Findings recorded for the first time. */
  readonly newFindings: Finding[];
  /** Findings recorded before and seen again (their status unchanged). */
  seenAgain: number;
  /** Open findings closed because what they reported no longer holds (the call settled, the record turned up). */
  autoResolved: number;
  /** Every finding recorded (new or seen again), by id. */
  readonly findingIds: string[];
}

export const emptyTally = (): Tally => ({ confirmed: 0, newFindings: [], seenAgain: 0, autoResolved: 0, findingIds: [] });

export interface Judge {
  readonly store: ReconcileStore;
  readonly tool: string;
  readonly comparison: Comparison;
  readonly source: FindingSource;
  /** The downstream window looked at (for messages), when a scan judges. */
  readonly window?: LookupWindow;
  readonly tally: Tally;
  /** Open findings of this tool for one key (a scan preloads them; a receipt asks the store). */
  openFindings(tenant: string | null, key: string): Promise<readonly Finding[]>;
}

function snapshotOf(record: CallRecord): LedgerSnapshot {
  return { state: record.state, input: record.input, result: record.result, error: record.error, updatedAt: record.updatedAt };
}

const refsOf = (records: readonly DownstreamRecord[]) => records.map((d) => d.ref).sort();
const describeRefs = (records: readonly DownstreamRecord[]) => refsOf(records).join(", ");
const iso = (ms: number) => new Date(ms).toISOString();

async function report(judge: Judge, kind: FindingKind, base: Omit<FindingReport, "id" | "kind" | "tool" | "source">, evidence: unknown): Promise<void> {
  const full: FindingReport = { ...base, kind, tool: judge.tool, source: judge.source, id: findingId(kind, judge.tool, base.tenant, base.key, evidence) };
  const { finding, created } = await judge.store.recordFinding(full);
  judge.tally.findingIds.push(finding.id);
  if (created) judge.tally.newFindings.push(finding);
  else judge.tally.seenAgain++;
}

async function autoResolve(judge: Judge, record: CallRecord, kind: FindingKind, note: string, only?: (f: Finding) => boolean): Promise<void> {
  for (const open of await judge.openFindings(record.tenant, record.key)) {
    if (open.kind !== kind || open.status !== "open" || (only && !only(open))) continue;
    const done = await judge.store.resolveFinding(open.id, { note, by: "effectgate reconcile" });
    if (done?.changed) judge.tally.autoResolved++;
  }
}

/** A downstream record no ledger call accounts for. */
export async function reportOrphan(judge: Judge, record: DownstreamRecord, why: string): Promise<void> {
  await report(judge, "orphan_downstream", {
    tenant: record.tenant ?? null, key: record.key, ledger: null, downstream: [record], differences: [],
    summary: `the downstream has ${record.ref} (key ${record.key}) but ${why}`,
  }, { ref: record.ref });
}

/**
 * Judges `record` against `fresh` (downstream records just seen for its key) and the
 * confirmations already stored for it; links every fresh record to the key.
 */
export async function judgeRecord(judge: Judge, record: CallRecord, fresh: readonly DownstreamRecord[]): Promise<void> {
  const known: readonly Confirmation[] = await judge.store.listConfirmations({ tool: judge.tool, tenant: record.tenant, key: record.key });
  const all = new Map<string, DownstreamRecord>();
  for (const c of known) {
    all.set(c.ref, { ref: c.ref, key: c.key, tenant: c.tenant, ...(c.fields === null ? {} : { fields: c.fields }) });
  }
  for (const d of fresh) {
    if (!all.has(d.ref)) {
      await judge.store.recordConfirmation({
        tool: judge.tool, tenant: record.tenant, key: record.key, ref: d.ref, source: judge.source, fields: d.fields ?? null,
      });
    }
    all.set(d.ref, d);
  }
  const downstream = [...all.values()].sort((a, b) => (a.ref < b.ref ? -1 : a.ref > b.ref ? 1 : 0));
  const base = { tenant: record.tenant, key: record.key, ledger: snapshotOf(record), downstream };

  switch (record.state) {
    case "in_progress":
    case "compensated":
    case "compensation_failed":
      return;
    case "uncertain":
    case "needs_human": {
      // An uncertain call that went to a person is one unresolved call, not two.
      await autoResolve(judge, record, "unresolved", `the call moved on to ${record.state}`, (f) => f.ledger?.state !== record.state);
      const evidence = downstream.length === 0
        ? judge.window ? `the downstream has no record with its key between ${iso(judge.window.since)} and ${iso(judge.window.until)}` : "no downstream record is known for its key"
        : `the downstream has ${downstream.length} record${downstream.length === 1 ? "" : "s"} with its key (${describeRefs(downstream)}): the effect happened`;
      await report(judge, "unresolved", {
        ...base, differences: [],
        summary: `the call is ${record.state}: the ledger does not know whether its effect happened; ${evidence}`,
      }, { state: record.state });
      return;
    }
    case "failed":
      await autoResolve(judge, record, "unresolved", "the call settled as failed");
      if (downstream.length > 0) {
        await report(judge, "orphan_downstream", {
          ...base, differences: [],
          summary: `the ledger records this call as failed (no effect happened), but the downstream has ${describeRefs(downstream)}`,
        }, { failed: refsOf(downstream) });
      }
      return;
    case "completed": {
      await autoResolve(judge, record, "unresolved", "the call settled as completed");
      if (downstream.length === 0) {
        const where = judge.window ? ` between ${iso(judge.window.since)} and ${iso(judge.window.until)}` : "";
        await report(judge, "missing_downstream", {
          ...base, differences: [],
          summary: `the ledger says completed, but the downstream has no record with this key${where}`,
        }, null);
        return;
      }
      await autoResolve(judge, record, "missing_downstream", `the downstream record ${describeRefs(downstream)} turned up`);
      if (downstream.length > 1) {
        await report(judge, "duplicate_downstream", {
          ...base, differences: [],
          summary: `the downstream has ${downstream.length} records for this one call: ${describeRefs(downstream)}`,
        }, { refs: refsOf(downstream) });
        return;
      }
      const only = downstream[0] as DownstreamRecord;
      const differences = compareRecord(judge.comparison, { input: record.input, result: record.result }, only);
      if (differences.length === 0) {
        judge.tally.confirmed++;
        return;
      }
      await report(judge, "mismatch", {
        ...base, differences,
        summary: `${only.ref} differs from the ledger: ${differences.map((d) => `${d.field} is ${JSON.stringify(d.downstream)} downstream, ${JSON.stringify(d.ledger)} in the ledger`).join("; ")}`,
      }, { ref: only.ref, differences });
      return;
    }
  }
}
