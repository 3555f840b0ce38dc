/**
 * The reconcile contract: every store runs exactly these tests, for `ledger.calls.listChangedSince`
 * and `ledger.reconcile`. A store that cannot support a case skips it by name with a reason
 * (`contractSuite`'s `skip`), never silently.
 */
import type { CallRecord } from "../../contracts/calls.js";
import type { Stores } from "../../contracts/stores.js";
import type { ReconcileStore } from "../../contracts/reconcile.js";
import { compareChange, cursorOf } from "../../contracts/change-order.js";
import { findingId } from "../../contracts/finding-rules.js";
import type { FindingReport } from "../../contracts/findings.js";
import { claimRequest } from "./calls.js";
import type { ContractSuiteDefinition } from "./suite.js";

function findingReport(overrides: Partial<FindingReport> = {}): FindingReport {
  const base = {
    kind: "missing_downstream", tool: "charge_card", tenant: "acme", key: "toolu_1", summary: "the ledger says completed, but…",
    ledger: { state: "completed", input: { amount: 10 }, result: { id: "ch_1", amount: 10 }, error: null, updatedAt: 1 },
    downstream: [], differences: [], source: "scan", ...overrides,
  } as const;
  return { ...base, id: overrides.id ?? findingId(base.kind, base.tool, base.tenant, base.key, null) };
}

/** Completes a claimed call; returns the record. */
async function complete(ledger: Stores, tenant: string, key: string, tool = "charge_card"): Promise<CallRecord> {
  const { record } = await ledger.calls.claim(claimRequest({ tenant, key, tool, toolUseId: key }));
  const done = await ledger.calls.update(tenant, key, record.version, { state: "completed", result: { key }, owner: null });
  if (!done) throw new Error("could not complete");
  return done;
}

export const reconcileSuite: ContractSuiteDefinition = {
  title: "Reconcile contract",
  needs: "reconcile",
  register({ store: storeName, expect, opened, test }) {
    let ledger!: Stores;
    let store!: ReconcileStore;
    opened((opening) => {
      ledger = opening;
      if (!ledger.reconcile || !ledger.calls.listChangedSince) throw new Error(`${storeName} has no reconcile store or listChangedSince`);
      store = ledger.reconcile;
    });
    const changes = (query: Parameters<NonNullable<Stores["calls"]["listChangedSince"]>>[0]) => ledger.calls.listChangedSince!(query);

    // ---- listChangedSince -------------------------------------------------------------------

    test("lists one tool's settled records in (updatedAt, tenant, key) order, leaving out in_progress ones and other tools", async () => {
      const made: CallRecord[] = [];
      for (const [tenant, key] of [["acme", "b"], ["globex", "a"], ["acme", "a"], ["acme", "ü-multibyte"], ["acme", "z"]] as const) {
        made.push(await complete(ledger, tenant, key));
      }
      await ledger.calls.claim(claimRequest({ key: "still-running", tool: "charge_card" }));
      await complete(ledger, "acme", "other-tool", "send_email");
      const listed = await changes({ tool: "charge_card", limit: 100 });
      expect(listed.map((r) => `${r.tenant}/${r.key}`).sort()).toEqual(made.map((r) => `${r.tenant}/${r.key}`).sort());
      const expected = [...listed].sort((a, b) => compareChange(cursorOf(a), cursorOf(b)));
      expect(listed.map((r) => r.key)).toEqual(expected.map((r) => r.key));
      expect(listed.every((r) => r.state === "completed" && r.tool === "charge_card")).toBe(true);
    });

    test("a cursor resumes after the last record read: pages of two read every record exactly once", async () => {
      for (let i = 0; i < 7; i++) await complete(ledger, i % 2 === 0 ? "acme" : "globex", `k${i}`);
      const all = await changes({ tool: "charge_card", limit: 100 });
      const paged: string[] = [];
      let after: ReturnType<typeof cursorOf> | undefined;
      for (let round = 0; round < 10; round++) {
        const page = await changes({ tool: "charge_card", limit: 2, ...(after ? { after } : {}) });
        paged.push(...page.map((r) => `${r.tenant}/${r.key}`));
        const last = page[page.length - 1];
        if (!last) break;
        after = cursorOf(last);
      }
      expect(paged).toEqual(all.map((r) => `${r.tenant}/${r.key}`));
      expect(await changes({ tool: "charge_card", after: cursorOf(all[all.length - 1]!) })).toEqual([]);
    });

    test("a record that changes again is listed again after the cursor, once", async () => {
      const first = await complete(ledger, "acme", "a");
      await complete(ledger, "acme", "b");
      const read = await changes({ tool: "charge_card" });
      const cursor = cursorOf(read[read.length - 1]!);
      const { record } = await ledger.calls.claim(claimRequest({ key: "c", tool: "charge_card" }));
      expect(await changes({ tool: "charge_card", after: cursor })).toEqual([]);
      await ledger.calls.update("acme", "c", record.version, { state: "needs_human", error: "no probe", owner: null });
      const again = await changes({ tool: "charge_card", after: cursor });
      expect(again.map((r) => [r.key, r.state])).toEqual([["c", "needs_human"]]);
      expect(again[0]!.updatedAt).toBeGreaterThanOrEqual(first.updatedAt);
    });

    test("until leaves out records changed after it", async () => {
      const a = await complete(ledger, "acme", "a");
      expect(await changes({ tool: "charge_card", until: a.updatedAt - 1 })).toEqual([]);
      expect((await changes({ tool: "charge_card", until: a.updatedAt })).map((r) => r.key)).toEqual(["a"]);
    });

    // ---- findings ----------------------------------------------------------------------------

    test("a finding is stored once: recording it again refreshes its evidence and count, never its status", async () => {
      const report = findingReport();
      const first = await store.recordFinding(report);
      expect(first.created).toBe(true);
      expect(first.finding).toMatchObject({ id: report.id, status: "open", timesSeen: 1, resolvedAt: null, resolution: null, tenant: "acme" });
      const again = await store.recordFinding({ ...report, summary: "seen again", downstream: [{ ref: "ch_9", key: "toolu_1" }] });
      expect(again.created).toBe(false);
      expect(again.finding).toMatchObject({ status: "open", timesSeen: 2, summary: "seen again", downstream: [{ ref: "ch_9", key: "toolu_1" }] });
      expect(again.finding.firstSeenAt).toBe(first.finding.firstSeenAt);
      expect(again.finding.lastSeenAt).toBeGreaterThanOrEqual(first.finding.lastSeenAt);
      expect(await store.getFinding(report.id)).toEqual(again.finding);
    });

    test("a resolved finding stays resolved when it is recorded again", async () => {
      const report = findingReport();
      await store.recordFinding(report);
      const resolved = await store.resolveFinding(report.id, { note: "refunded by hand", by: "ops" });
      expect(resolved).toMatchObject({ changed: true, finding: { status: "resolved", resolution: "refunded by hand", resolvedBy: "ops" } });
      const again = await store.recordFinding(report);
      expect(again.created).toBe(false);
      expect(again.finding).toMatchObject({ status: "resolved", resolution: "refunded by hand", timesSeen: 2 });
    });

    test("resolveFinding moves open → resolved once, keeps the first resolution, and refuses an empty note", async () => {
      const report = findingReport();
      await store.recordFinding(report);
      await expect(store.resolveFinding(report.id, { note: "  " })).rejects.toThrow(/note/);
      const results = await Promise.all(Array.from({ length: 8 }, (_, i) => store.resolveFinding(report.id, { note: `note ${i}` })));
      expect(results.filter((r) => r?.changed)).toHaveLength(1);
      const winner = results.find((r) => r?.changed)!.finding.resolution;
      expect(results.every((r) => r?.finding.resolution === winner)).toBe(true);
      expect(await store.resolveFinding("f_nope", { note: "x" })).toBeUndefined();
    });

    test("of concurrent recordings of one new finding exactly one creates it and every one is counted", async () => {
      const report = findingReport();
      const results = await Promise.all(Array.from({ length: 10 }, () => store.recordFinding(report)));
      expect(results.filter((r) => r.created)).toHaveLength(1);
      expect((await store.getFinding(report.id))?.timesSeen).toBe(10);
    });

    test("listFindings filters by status, kind, tool, tenant and key, oldest first, with a limit", async () => {
      const reports = [
        findingReport({ id: "f_a", kind: "mismatch", key: "k1" }),
        findingReport({ id: "f_b", kind: "orphan_downstream", tenant: null, key: "k2", ledger: null }),
        findingReport({ id: "f_c", kind: "mismatch", key: "k3", tool: "send_email" }),
        findingReport({ id: "f_d", kind: "unresolved", key: "k1", tenant: "globex" }),
      ];
      for (const r of reports) await store.recordFinding(r);
      await store.resolveFinding("f_c", { note: "fine" });
      const ids = async (q: Parameters<ReconcileStore["listFindings"]>[0]) => (await store.listFindings(q)).map((f) => f.id).sort();
      expect(await ids({})).toEqual(["f_a", "f_b", "f_c", "f_d"]);
      expect(await ids({ status: "open" })).toEqual(["f_a", "f_b", "f_d"]);
      expect(await ids({ status: "resolved" })).toEqual(["f_c"]);
      expect(await ids({ kind: "mismatch" })).toEqual(["f_a", "f_c"]);
      expect(await ids({ tool: "send_email" })).toEqual(["f_c"]);
      expect(await ids({ tenant: "globex" })).toEqual(["f_d"]);
      expect(await ids({ key: "k1", status: "open" })).toEqual(["f_a", "f_d"]);
      expect(await store.listFindings({ limit: 2 })).toHaveLength(2);
      const all = await store.listFindings({});
      expect(all.map((f) => f.firstSeenAt)).toEqual([...all.map((f) => f.firstSeenAt)].sort((a, b) => a - b));
      const orphan = all.find((f) => f.id === "f_b")!;
      expect(orphan).toMatchObject({ tenant: null, ledger: null, kind: "orphan_downstream" });
    });

    test("countFindings counts exactly by status, kind, tool, tenant and key, past any listing's limit, and follows resolutions", async () => {
      expect(await store.countFindings()).toBe(0);
      expect(await store.countFindings({ status: "open" })).toBe(0);
      for (let i = 0; i < 120; i++) await store.recordFinding(findingReport({ id: `f_m${i}`, kind: "mismatch", key: `k${i % 4}` }));
      await store.recordFinding(findingReport({ id: "f_orphan", kind: "orphan_downstream", tenant: null, key: "k0", ledger: null }));
      await store.recordFinding(findingReport({ id: "f_globex", kind: "unresolved", tenant: "globex", key: "k0", tool: "send_email" }));
      await store.recordFinding(findingReport({ id: "f_proto", kind: "unresolved", tenant: "__proto__", key: "k0" }));
      // A listing stops at its limit (100 by default); a count does not.
      expect(await store.listFindings({ status: "open" })).toHaveLength(100);
      expect(await store.countFindings({ status: "open" })).toBe(123);
      expect(await store.countFindings({ kind: "mismatch" })).toBe(120);
      expect(await store.countFindings({ kind: "unresolved", status: "open" })).toBe(2);
      expect(await store.countFindings({ tool: "send_email" })).toBe(1);
      expect(await store.countFindings({ tenant: "acme" })).toBe(120);
      expect(await store.countFindings({ tenant: "__proto__" })).toBe(1);
      expect(await store.countFindings({ tenant: "initech" })).toBe(0);
      expect(await store.countFindings({ key: "k0" })).toBe(33);
      expect(await store.countFindings({ tenant: "acme", key: "k0", status: "open" })).toBe(30);
      expect(await store.countFindings({ key: "k0' OR '1'='1" })).toBe(0);
      // Seen again: still one finding. Resolved: it moves from open to resolved, once.
      await store.recordFinding(findingReport({ id: "f_m0", kind: "mismatch", key: "k0" }));
      await store.resolveFinding("f_m0", { note: "fixed downstream" });
      await store.resolveFinding("f_m0", { note: "twice" });
      await store.resolveFinding("f_orphan", { note: "a test charge" });
      expect(await store.countFindings()).toBe(123);
      expect(await store.countFindings({ status: "open" })).toBe(121);
      expect(await store.countFindings({ status: "resolved" })).toBe(2);
      expect(await store.countFindings({ status: "open", tenant: "acme", key: "k0" })).toBe(29);
    });

    test("a finding's evidence reads back exactly as written (unicode, nested JSON, nulls)", async () => {
      const report = findingReport({
        kind: "mismatch",
        summary: "amount is 12 downstream, 10 in the ledger — ünïcödé ✓",
        downstream: [{ ref: "ch_1", key: "toolu_1", tenant: "acme", at: 1_700_000_000_123, fields: { amount: 12, meta: { a: [1, null, "x"] } } }],
        differences: [{ field: "amount", ledger: 10, downstream: 12 }, { field: "note", ledger: null, downstream: "\u0000 nul" }],
      });
      await store.recordFinding(report);
      const read = await store.getFinding(report.id);
      expect(read).toMatchObject({ summary: report.summary, downstream: report.downstream, differences: report.differences, ledger: report.ledger });
    });

    // ---- confirmations, receipts, cursors ---------------------------------------------------

    test("a confirmation is stored once per (tool, tenant, key, ref) and listed by key or by ref", async () => {
      const c = { tool: "charge_card", tenant: "acme", key: "k1", ref: "ch_1", source: "scan", fields: { amount: 10 } } as const;
      const results = await Promise.all(Array.from({ length: 6 }, () => store.recordConfirmation(c)));
      expect(results.filter(Boolean)).toHaveLength(1);
      expect(await store.recordConfirmation({ ...c, ref: "ch_2", source: "receipt", fields: null })).toBe(true);
      expect(await store.recordConfirmation({ ...c, tenant: "globex" })).toBe(true);
      const byKey = await store.listConfirmations({ tool: "charge_card", tenant: "acme", key: "k1" });
      expect(byKey.map((x) => [x.ref, x.source, x.fields])).toEqual([["ch_1", "scan", { amount: 10 }], ["ch_2", "receipt", null]]);
      expect((await store.listConfirmations({ tool: "charge_card", ref: "ch_1" })).map((x) => x.tenant).sort()).toEqual(["acme", "globex"]);
      expect(await store.listConfirmations({ tool: "send_email", ref: "ch_1" })).toEqual([]);
    });

    test("a receipt is stored once per id; finishReceipt records only the first outcome", async () => {
      const receipt = { id: "evt_1", tool: "charge_card", record: { ref: "ch_1", key: "k1", fields: { amount: 10 } }, digest: "d1" };
      const results = await Promise.all(Array.from({ length: 10 }, () => store.recordReceipt(receipt)));
      expect(results.filter((r) => r.created)).toHaveLength(1);
      expect(results.every((r) => r.receipt.digest === "d1" && r.receipt.processedAt === null)).toBe(true);
      const other = await store.recordReceipt({ ...receipt, digest: "d2" });
      expect(other).toMatchObject({ created: false, receipt: { digest: "d1" } });
      const finished = await store.finishReceipt("evt_1", { result: "confirmed" });
      expect(finished).toMatchObject({ id: "evt_1", outcome: { result: "confirmed" }, record: receipt.record });
      expect(finished?.processedAt).not.toBeNull();
      expect((await store.finishReceipt("evt_1", { result: "finding" }))?.outcome).toEqual({ result: "confirmed" });
      expect(await store.getReceipt("evt_2")).toBeUndefined();
      expect(await store.finishReceipt("evt_2", {})).toBeUndefined();
    });

    test("cursors read back what was saved, by name", async () => {
      expect(await store.getCursor("scan:charge_card")).toBeUndefined();
      await store.putCursor("scan:charge_card", { ledger: { at: 5, tenant: "acme", key: "k" }, downstreamUntil: 9 });
      await store.putCursor("scan:send_email", { downstreamUntil: 1 });
      await store.putCursor("scan:charge_card", { ledger: { at: 7, tenant: "acme", key: "k2" }, downstreamUntil: 10 });
      expect(await store.getCursor("scan:charge_card")).toEqual({ ledger: { at: 7, tenant: "acme", key: "k2" }, downstreamUntil: 10 });
      expect(await store.getCursor("scan:send_email")).toEqual({ downstreamUntil: 1 });
    });
  },
};
