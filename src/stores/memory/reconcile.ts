/**
 * The memory ledger's reconcile store: the same rules as the SQL stores (insert-once findings
 * whose status only `resolveFinding` changes, insert-once confirmations and receipts), and
 * copies handed out so a caller can never change what is stored.
 */
import type { Json } from "../../core/json.js";
import type { ConfirmationQuery, FindingQuery, ReconcileStore } from "../../contracts/reconcile.js";
import { checkResolution, matchesFinding, newFinding, newReceipt, refreshFinding, resolveOnce } from "../../contracts/finding-rules.js";
import type { Confirmation, Finding, StoredReceipt } from "../../contracts/findings.js";
import { recordId } from "./ids.js";

export function memoryReconcileStore(clock: () => number): ReconcileStore {
  const findings = new Map<string, Finding>();
  const confirmations = new Map<string, Confirmation>();
  const receipts = new Map<string, StoredReceipt>();
  const cursors = new Map<string, Json>();
  const copy = <T>(value: T): T => structuredClone(value);

  return {
    async recordFinding(report) {
      const existing = findings.get(report.id);
      const finding = existing ? refreshFinding(existing, report, clock()) : newFinding(report, clock());
      findings.set(report.id, copy(finding));
      return { finding: copy(finding), created: existing === undefined };
    },
    async getFinding(id) {
      const found = findings.get(id);
      return found && copy(found);
    },
    async listFindings(query: FindingQuery = {}) {
      const out = [...findings.values()]
        .filter((f) => matchesFinding(f, query))
        .sort((a, b) => a.firstSeenAt - b.firstSeenAt || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
      return out.slice(0, query.limit ?? 100).map(copy);
    },
    async countFindings(query = {}) {
      let n = 0;
      for (const f of findings.values()) if (matchesFinding(f, query)) n++;
      return n;
    },
    async resolveFinding(id, resolution) {
      checkResolution(resolution);
      const existing = findings.get(id);
      if (!existing) return undefined;
      const result = resolveOnce(existing, resolution, clock());
      findings.set(id, copy(result.finding));
      return { finding: copy(result.finding), changed: result.changed };
    },
    async recordConfirmation(confirmation) {
      const id = recordId(confirmation.tool, confirmation.tenant, confirmation.key, confirmation.ref);
      if (confirmations.has(id)) return false;
      confirmations.set(id, copy({ ...confirmation, at: clock() }));
      return true;
    },
    async listConfirmations(query: ConfirmationQuery) {
      return [...confirmations.values()]
        .filter((c) => c.tool === query.tool && ("ref" in query ? c.ref === query.ref : c.tenant === query.tenant && c.key === query.key))
        .sort((a, b) => a.at - b.at || (a.ref < b.ref ? -1 : a.ref > b.ref ? 1 : 0))
        .map(copy);
    },
    async recordReceipt(receipt) {
      const existing = receipts.get(receipt.id);
      if (existing) return { receipt: copy(existing), created: false };
      const stored = newReceipt(copy(receipt), clock());
      receipts.set(receipt.id, stored);
      return { receipt: copy(stored), created: true };
    },
    async getReceipt(id) {
      const found = receipts.get(id);
      return found && copy(found);
    },
    async finishReceipt(id, outcome) {
      const existing = receipts.get(id);
      if (!existing) return undefined;
      if (existing.processedAt === null) receipts.set(id, { ...existing, processedAt: clock(), outcome: copy(outcome) });
      return copy(receipts.get(id));
    },
    async getCursor(name) {
      const value = cursors.get(name);
      return value === undefined ? undefined : copy(value);
    },
    async putCursor(name, value) {
      cursors.set(name, copy(value));
    },
  };
}
