/** effectgate/prometheus with the real prom-client: the scrape text, parsed as Prometheus reads it, counts what the gate did. */
import { Registry } from "prom-client";
import { describe, expect, it } from "vitest";
import { ledgerGauges, prometheusObserver } from "../../src/prometheus.js";
import { memoryLedger } from "../../src/stores/memory/index.js";
import { createGate } from "../../src/root/create-gate.js";
import { effects, emailTool, use } from "../governance/support.js";
import { join } from "node:path";
import { postgresLedger } from "../../src/stores/postgres/index.js";
import { sqliteLedger } from "../../src/stores/sqlite/index.js";
import { usePostgres } from "../support/pg.js";
import { tempDir } from "../support/tmp.js";
import { durableScenarioLedger, runScenario } from "./scenario.js";

const pg = usePostgres();

/** Prometheus text format → { 'name{a="x",b="y"}': value } with labels in the order written. */
function parse(text: string): Map<string, number> {
  const samples = new Map<string, number>();
  for (const line of text.split("\n")) {
    if (line === "" || line.startsWith("#")) continue;
    const match = /^([a-zA-Z_:][\w:]*)(\{.*\})?\s+(\S+)$/.exec(line);
    if (!match) throw new Error(`not Prometheus text: ${line}`);
    samples.set(`${match[1]}${match[2] ?? ""}`, Number(match[3]));
  }
  return samples;
}

describe("effectgate/prometheus", () => {
  it("counts calls by tool, effect class and outcome, probe outcomes and alerts; observes latency", async () => {
    const metrics = prometheusObserver();
    const { fx } = await runScenario([metrics]);
    const s = parse(await metrics.metrics());
    const calls = (tool: string, effect: string, outcome: string, error = "") => s.get(`effectgate_calls_total{tool="${tool}",effect_class="${effect}",outcome="${outcome}",error_type="${error}"}`);
    expect(calls("send_email", "write", "executed")).toBe(1);
    expect(calls("send_email", "write", "replayed")).toBe(1);
    expect(calls("send_email", "write", "refused", "EG_INVALID_INPUT")).toBe(1);
    expect(calls("send_email", "write", "refused", "EG_KILL_SWITCH")).toBe(1);
    expect(calls("delete_account", "destructive", "waiting", "EG_AWAITING_APPROVAL")).toBe(1);
    expect(calls("flaky", "write", "executed", "EG_TOOL_FAILED")).toBe(1);
    expect(calls("charge_card", "write", "probed")).toBe(1);
    expect(s.get('effectgate_probe_outcomes_total{tool="charge_card",result="done"}')).toBe(1);
    expect(s.get('effectgate_alerts_total{code="approval_requested"}')).toBe(1);
    expect(s.get('effectgate_call_duration_seconds_count{effect_class="write",outcome="executed"}')).toBe(2);
    expect(s.get('effectgate_call_duration_seconds_bucket{le="+Inf",effect_class="destructive",outcome="waiting"}')).toBe(1);
    const total = [...s].filter(([k]) => k.startsWith("effectgate_calls_total")).reduce((sum, [, v]) => sum + v, 0);
    expect(total).toBe(7);
    // What the tools did, counted in the tools: only the two executions the metrics say.
    expect(fx.log).toEqual(["send_email:toolu_mail", "flaky:-"]);
  });

  it("ledger-write failures: an outcome write the ledger refuses after the tool ran is counted (and the agent still gets the result)", async () => {
    const metrics = prometheusObserver();
    const ledger = memoryLedger();
    let refuse = true;
    // The ledger fails the outcome write once (the disk is full, say), then recovers.
    const calls = new Proxy(ledger.calls, {
      get(target, name, receiver) {
        const value: unknown = Reflect.get(target, name, receiver);
        if (name !== "update" || typeof value !== "function") return typeof value === "function" ? value.bind(target) : value;
        return async (...args: Parameters<typeof target.update>) => {
          if (refuse && args[3].state === "completed") {
            refuse = false;
            throw new Error("SQLITE_FULL: database or disk is full");
          }
          return target.update(...args);
        };
      },
    });
    const fx = effects();
    const gate = createGate({ tools: [emailTool(fx)], ledger: { ...ledger, calls }, observers: [metrics], onAlert: () => {} });
    const [answer] = await gate.runToolUses([use("toolu_w", "send_email", { to: "a" })], { tenant: "acme", task: "t1" });
    expect(answer).toMatchObject({ is_error: false, content: '{"sent":"a"}' });
    await gate.drain();
    await gate.close();
    const s = parse(await metrics.metrics());
    expect(s.get("effectgate_ledger_write_failures_total")).toBe(1);
    expect(s.get('effectgate_alerts_total{code="record_failed"}')).toBe(1);
    expect(fx.count()).toBe(1);
    expect((await ledger.calls.get("acme", "toolu_w"))?.state).toBe("completed");
  });

  it("reads approvals pending and the queue size from the ledger at scrape time, into a registry the user passes", async () => {
    const registry = new Registry();
    const ledger = memoryLedger();
    const metrics = prometheusObserver({ registry, prefix: "agent_", ...ledgerGauges(ledger) });
    expect(metrics.registry).toBe(registry);
    const before = parse(await registry.metrics());
    expect([before.get("agent_approvals_pending"), before.get("agent_queue_size")]).toEqual([0, 0]);
    await ledger.governance!.putApproval({
      id: "apr_000000000000000000000001", tenant: "acme", key: "k1", tool: "delete_account", effect: "destructive", task: "t1", agent: null, toolUseId: "k1",
      input: {}, preview: null, reasons: ["destructive"], digest: "d".repeat(64), policyVersion: "v1", requestedBy: "bot", requestedAt: Date.now(), expiresAt: Date.now() + 60_000,
    });
    const claimed = await ledger.calls.claim({
      tenant: "acme", key: "k2", tool: "send_email", effect: "write", task: "t1", toolUseId: "k2", fingerprint: "f", input: {}, inputRedacted: false, owner: "w", leaseMs: 1000,
    });
    await ledger.calls.update("acme", "k2", claimed.record.version, { state: "needs_human", owner: null, error: "lost" });
    const after = parse(await registry.metrics());
    expect([after.get("agent_approvals_pending"), after.get("agent_queue_size")]).toEqual([1, 1]);
  });

  it("the ledger gauges are exact counts past any list's limit, read without listing approvals", async () => {
    const inner = memoryLedger();
    // No approval list is read: the gauge is the store's count, which no limit cuts off.
    const ledger = { ...inner, governance: { ...inner.governance!, listApprovals: () => Promise.reject(new Error("the gauge listed approvals")) } };
    const metrics = prometheusObserver({ ...ledgerGauges(ledger) });
    const now = Date.now();
    for (let i = 0; i < 1_500; i++) {
      await inner.governance!.putApproval({
        id: `apr_${i}`, tenant: "acme", key: `d${i}`, tool: "delete_account", effect: "destructive", task: "t1", agent: null, toolUseId: `d${i}`,
        input: {}, preview: null, reasons: ["destructive"], digest: "d".repeat(64), policyVersion: "v1", requestedBy: "bot", requestedAt: now, expiresAt: now + 60_000,
      });
    }
    for (let i = 0; i < 1_200; i++) {
      const { record } = await inner.calls.claim({
        tenant: "acme", key: `k${i}`, tool: "send_email", effect: "write", task: "t1", toolUseId: `k${i}`, fingerprint: "f", input: {}, inputRedacted: false, owner: "w", leaseMs: 1000,
      });
      await inner.calls.update("acme", `k${i}`, record.version, { state: "needs_human", owner: null, error: "lost" });
    }
    const s = parse(await metrics.metrics());
    expect([s.get("effectgate_approvals_pending"), s.get("effectgate_queue_size"), s.get("effectgate_ledger_gauge_errors_total")]).toEqual([1_500, 1_200, 0]);
  });
});

/** The same outcome counts on the durable ledgers: what a call came to is noted by the gate, whatever store records it. */
describe.each([
  ["SQLite", async () => sqliteLedger(join(tempDir(), "ledger.db"))],
  ["PostgreSQL", async () => postgresLedger({ connectionString: pg.url, poolSize: 2 }, { schema: pg.freshSchema() })],
] as const)("effectgate/prometheus on a %s ledger", (_name, open) => {
  it("counts every outcome as on the memory ledger, and the tools did only what the counts say", async () => {
    const ledger = await open();
    try {
      const metrics = prometheusObserver();
      const { fx } = await runScenario([metrics], {}, durableScenarioLedger(ledger));
      const s = parse(await metrics.metrics());
      const outcomes = [...s].filter(([k]) => k.startsWith("effectgate_calls_total")).map(([k, v]) => `${k.slice(k.indexOf("{"))} ${v}`).sort();
      expect(outcomes).toEqual([
        '{tool="charge_card",effect_class="write",outcome="probed",error_type=""} 1',
        '{tool="delete_account",effect_class="destructive",outcome="waiting",error_type="EG_AWAITING_APPROVAL"} 1',
        '{tool="flaky",effect_class="write",outcome="executed",error_type="EG_TOOL_FAILED"} 1',
        '{tool="send_email",effect_class="write",outcome="executed",error_type=""} 1',
        '{tool="send_email",effect_class="write",outcome="refused",error_type="EG_INVALID_INPUT"} 1',
        '{tool="send_email",effect_class="write",outcome="refused",error_type="EG_KILL_SWITCH"} 1',
        '{tool="send_email",effect_class="write",outcome="replayed",error_type=""} 1',
      ]);
      expect(s.get('effectgate_probe_outcomes_total{tool="charge_card",result="done"}')).toBe(1);
      expect(fx.log).toEqual(["send_email:toolu_mail", "flaky:-"]);
    } finally {
      await ledger.close();
    }
  });
});
