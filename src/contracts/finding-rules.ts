/** Finding construction and update rules shared by every reconcile store, so they cannot drift apart. */
import { canonicalJson, sha256Hex } from "../core/keys.js";
import type { FindingCountQuery, Resolution } from "./reconcile.js";
import { FINDING_KINDS, type Finding, type FindingKind, type FindingReport, type ReceiptInput, type StoredReceipt } from "./findings.js";

/**
 * A finding's id: derived from what differs, so the same difference seen by the next scan (or by
 * a receipt) is the same finding, and a different one is a new finding. `evidence` is what
 * identifies the difference within its key: the downstream refs involved, the differing fields
 * and values, or the ledger state.
 */
export function findingId(kind: FindingKind, tool: string, tenant: string | null, key: string, evidence: unknown): string {
  return `f_${sha256Hex(canonicalJson({ kind, tool, tenant, key, evidence })).slice(0, 16)}`;
}

export function newFinding(report: FindingReport, now: number): Finding {
  return {
    ...report,
    status: "open",
    firstSeenAt: now,
    lastSeenAt: now,
    timesSeen: 1,
    resolvedAt: null,
    resolution: null,
    resolvedBy: null,
  };
}

/** Seen again: the evidence is refreshed, the status and resolution never change. */
export function refreshFinding(existing: Finding, report: FindingReport, now: number): Finding {
  return {
    ...existing,
    summary: report.summary,
    ledger: report.ledger,
    downstream: report.downstream,
    differences: report.differences,
    lastSeenAt: Math.max(existing.lastSeenAt, now),
    timesSeen: existing.timesSeen + 1,
  };
}

export function resolveOnce(existing: Finding, resolution: Resolution, now: number): { finding: Finding; changed: boolean } {
  if (existing.status === "resolved") return { finding: existing, changed: false };
  return {
    finding: { ...existing, status: "resolved", resolvedAt: now, resolution: resolution.note, resolvedBy: resolution.by ?? null },
    changed: true,
  };
}

export function checkResolution(resolution: Resolution): void {
  if (typeof resolution?.note !== "string" || resolution.note.trim() === "") {
    throw new TypeError("effectgate: resolving a finding needs a note saying what was found or done");
  }
}

/** SHA-256 of a receipt's canonical content: a redelivery has the same digest, a reused id another. */
export function receiptDigest(receipt: ReceiptInput): string {
  return sha256Hex(canonicalJson({ id: receipt.id, tool: receipt.tool, record: receipt.record }));
}

export function newReceipt(receipt: ReceiptInput & { readonly digest: string }, now: number): StoredReceipt {
  return { id: receipt.id, digest: receipt.digest, tool: receipt.tool, record: receipt.record, receivedAt: now, processedAt: null, outcome: null };
}

/** A finding's evidence as stored (one JSON column in the SQL stores). */
export const evidenceOf = (f: Pick<Finding, "ledger" | "downstream" | "differences">) =>
  JSON.stringify({ ledger: f.ledger, downstream: f.downstream, differences: f.differences });

/** The filter rule of a findings listing or count (`findingFilters` in SQL): every filter given must hold. */
export function matchesFinding(f: Finding, query: FindingCountQuery): boolean {
  return (query.status === undefined || f.status === query.status) && (query.kind === undefined || f.kind === query.kind) &&
    (query.tool === undefined || f.tool === query.tool) && (query.tenant === undefined || f.tenant === query.tenant) &&
    (query.key === undefined || f.key === query.key);
}

/** Builds the WHERE clause of a findings listing or count: enums inline (so the partial index on open findings applies), the rest as parameters. */
export function findingFilters(query: FindingCountQuery, param: (value: string) => string): string[] {
  const where: string[] = [];
  if (query.status !== undefined) {
    if (query.status !== "open" && query.status !== "resolved") throw new TypeError(`unknown finding status ${JSON.stringify(query.status)}`);
    where.push(`status = '${query.status}'`);
  }
  if (query.kind !== undefined) {
    if (!(FINDING_KINDS as readonly string[]).includes(query.kind)) throw new TypeError(`unknown finding kind ${JSON.stringify(query.kind)}`);
    where.push(`kind = '${query.kind}'`);
  }
  for (const column of ["tool", "tenant", "key"] as const) {
    const value = query[column];
    if (value !== undefined) where.push(`${column} = ${param(value)}`);
  }
  return where;
}
