/**
 * The drift scenario, shared by every store: 60 charges through the gate against the simulated
 * payments service, two calls left for a person, then seeded drift injected into the service's
 * own records (dropped, duplicated, altered, orphan). One scan must report exactly the injected
 * differences and the two unresolved calls — nothing else — and confirm every other charge.
 */
import { afterEach, describe, expect, it } from "vitest";
import { createGate } from "../../src/root/create-gate.js";
import type { Stores } from "../../src/contracts/stores.js";
import { startPaymentService, type PaymentService } from "../../demo/payment-service.js";
import { chargeCardTool } from "../../demo/payment-tool.js";
import { seededRandom } from "../../demo/random.js";
import type { Finding } from "../../src/contracts/findings.js";

const SEED = Number(process.env.EFFECTGATE_SEED ?? 424242);
const CALLS = 60;

export function runDriftScenario(storeName: string, make: () => Promise<Stores> | Stores): void {
  describe(`reconcile against seeded drift: ${storeName}`, () => {
    let service: PaymentService | undefined;
    let ledger: Stores | undefined;
    afterEach(async () => {
      await service?.close();
      await ledger?.close();
    });

    it("one scan finds exactly the injected differences and the unresolved calls, and confirms the rest", async () => {
      service = await startPaymentService({ seed: SEED });
      ledger = await make();
      const tool = chargeCardTool(service.url);
      const gate = createGate({ ledger, tools: [tool], onAlert: () => {} });
      const rng = seededRandom(SEED);
      const uses = Array.from({ length: CALLS }, (_, i) => ({
        type: "tool_use", id: `toolu_${SEED}_${i}`, name: "charge_card",
        input: { customer: `cus_${i % 7}`, amount: 1 + Math.floor(rng() * 500) },
      }));
      for (let i = 0; i < uses.length; i += 20) {
        const results = await gate.runToolUses(uses.slice(i, i + 20), { tenant: i < 40 ? "acme" : "globex", task: "drift" });
        expect(results.filter((r) => r.is_error)).toEqual([]);
      }

      // Two calls a person must settle: one whose charge did happen (the reply was lost), one whose did not.
      const parked = ["toolu_lost_reply", "toolu_never_sent"];
      for (const key of parked) {
        const { record } = await ledger.calls.claim({
          tenant: "acme", key, tool: "charge_card", effect: "write", task: "drift", toolUseId: key, fingerprint: "f".repeat(64),
          input: { customer: "cus_9", amount: 77 }, inputRedacted: false, owner: "worker-gone", leaseMs: 1,
        });
        await ledger.calls.update("acme", key, record.version, { state: "needs_human", error: "no reply and no probe", owner: null });
      }
      const res = await fetch(`${service.url}/charges`, {
        method: "POST", headers: { "content-type": "application/json", "idempotency-key": "toolu_lost_reply" },
        body: JSON.stringify({ customer: "cus_9", amount: 77 }),
      });
      expect(res.status).toBe(201);

      const drift = service.injectDrift({ seed: SEED, dropped: 3, duplicated: 2, altered: 2, orphans: 2 });
      const expected = [
        ...drift.dropped.map((c) => `missing_downstream ${c.key}`),
        ...drift.duplicated.map((d) => `duplicate_downstream ${d.original.key}`),
        ...drift.altered.map((a) => `mismatch ${a.before.key}`),
        ...drift.orphans.map((c) => `orphan_downstream ${c.key}`),
        ...parked.map((key) => `unresolved ${key}`),
      ].sort();

      const summary = await gate.reconcile({ settleMs: 0 });
      const seen = (findings: readonly Finding[]) => findings.map((f) => `${f.kind} ${f.key}`).sort();
      expect(seen(summary.newFindings)).toEqual(expected);
      expect(seen(await ledger.reconcile!.listFindings({ status: "open", limit: 1000 }))).toEqual(expected);
      expect(summary).toMatchObject({ incremental: true, recordsRead: CALLS + 2, seenAgain: 0, autoResolved: 0 });
      expect(summary.confirmed).toBe(CALLS - 3 - 2 - 2);

      // The evidence says what differs.
      for (const { before, after } of drift.altered) {
        const finding = summary.newFindings.find((f) => f.kind === "mismatch" && f.key === before.key)!;
        expect(finding.differences).toEqual([{ field: "amount", ledger: before.amount, downstream: after.amount }]);
        expect(finding.downstream.map((d) => d.ref)).toEqual([before.id]);
      }
      for (const { original, copy } of drift.duplicated) {
        const finding = summary.newFindings.find((f) => f.kind === "duplicate_downstream" && f.key === original.key)!;
        expect(finding.downstream.map((d) => d.ref).sort()).toEqual([original.id, copy.id].sort());
      }
      for (const orphan of drift.orphans) {
        const finding = summary.newFindings.find((f) => f.kind === "orphan_downstream" && f.key === orphan.key)!;
        expect(finding).toMatchObject({ tenant: null, ledger: null, downstream: [{ ref: orphan.id, fields: { amount: orphan.amount } }] });
      }
      const lost = summary.newFindings.find((f) => f.key === "toolu_lost_reply")!;
      expect(lost.summary).toMatch(/the downstream has 1 record with its key \(ch_\d+\): the effect happened/);
      const never = summary.newFindings.find((f) => f.key === "toolu_never_sent")!;
      expect(never.summary).toMatch(/the downstream has no record with its key between/);

      // The same scan again: nothing new, nothing read.
      const again = await gate.reconcile({ settleMs: 0 });
      expect(again).toMatchObject({ recordsRead: 0, newFindings: [], autoResolved: 0 });
      await gate.close();
    });
  });
}
