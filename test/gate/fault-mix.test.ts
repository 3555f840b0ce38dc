/**
 * 1,000 seeded calls against a real payments service on 127.0.0.1 with mixed faults (cut
 * connections, lost replies, completions slower than the client's timeout): every effect is
 * applied at most once, and every call ends completed or needs_human — none lost, none doubled.
 */
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { createGate } from "../../src/root/create-gate.js";
import { sqliteLedger } from "../../src/stores/sqlite/index.js";
import { startPaymentService, type PaymentService } from "../../demo/payment-service.js";
import { chargeCardTool } from "../../demo/payment-tool.js";
import { seededRandom } from "../../demo/random.js";
import { tempDir } from "../support/tmp.js";

const SEED = Number(process.env.EFFECTGATE_SEED ?? 20261130);
const CALLS = 1000;
const BATCH = 25;

describe("1,000 seeded calls under mixed faults", () => {
  let service: PaymentService | undefined;
  afterAll(() => service?.close());

  it("applies every effect at most once and leaves every call completed or needs_human", async () => {
    service = await startPaymentService({ seed: SEED, faults: { drop: 0.05, lost: 0.08, slow: 0.04, latency: 0.2 }, slowMs: 120 });
    const ledger = sqliteLedger(join(tempDir(), "fault-mix.db"), { durability: "process" });
    const gate = createGate({
      ledger,
      tools: [
        chargeCardTool(service.url, { name: "charge_probed" }),
        chargeCardTool(service.url, { name: "charge_keyed", downstreamIdempotent: true }),
      ],
      timeoutMs: 50,
      probe: { attempts: 10, initialDelayMs: 10, maxDelayMs: 40 },
      retry: { write: { attempts: 4, initialDelayMs: 5, maxDelayMs: 40 } },
      random: seededRandom(SEED),
      onAlert: () => {},
    });
    const rng = seededRandom(SEED);
    const calls = Array.from({ length: CALLS }, (_, i) => ({
      type: "tool_use", id: `toolu_${SEED}_${i}`, name: rng() < 0.5 ? "charge_probed" : "charge_keyed",
      input: { customer: `cus_${i % 97}`, amount: 1 + Math.floor(rng() * 500) },
    }));
    const results: { tool_use_id: string; content: string; is_error: boolean }[] = [];
    for (let i = 0; i < calls.length; i += BATCH) {
      results.push(...(await gate.runToolUses(calls.slice(i, i + BATCH), { tenant: "acme", task: "fault-mix" })));
    }
    await gate.drain();

    const applied = new Map<string, number>();
    for (const c of service.charges) applied.set(c.key, (applied.get(c.key) ?? 0) + 1);
    const doubled = [...applied.entries()].filter(([, n]) => n > 1);
    const records = await ledger.calls.list({ tenant: "acme", limit: CALLS + 1 });
    const states = new Map<string, number>();
    for (const r of records) states.set(r.state, (states.get(r.state) ?? 0) + 1);

    console.log(
      `fault mix seed=${SEED} calls=${CALLS} injected=${JSON.stringify(service.injected)} ` +
        `applied=${service.charges.length} doubled=${doubled.length} states=${JSON.stringify(Object.fromEntries(states))} ` +
        `errors=${results.filter((r) => r.is_error).length}`,
        results.filter((r) => r.is_error).map((r) => r.content.slice(0, 300)),
    );
    expect(service.injected.drop + service.injected.lost + service.injected.slow).toBeGreaterThan(100); // the faults were live
    expect(doubled).toEqual([]);
    expect(records).toHaveLength(CALLS);
    for (const r of records) {
      expect(["completed", "needs_human"]).toContain(r.state);
      if (r.state === "completed") {
        expect(applied.get(r.key)).toBe(1);
        expect(r.result).toMatchObject({ key: r.key, amount: (r.input as { amount: number }).amount });
      }
    }
    // Every agent-visible success is the charge actually applied for that call.
    for (const res of results.filter((r) => !r.is_error)) {
      expect(applied.get(JSON.parse(res.content).key)).toBe(1);
    }
    await ledger.close();
  });
});
