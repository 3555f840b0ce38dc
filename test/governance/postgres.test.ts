import { describe, expect, it } from "vitest";
import { postgresLedger } from "../../src/stores/postgres/index.js";
import { usePostgres } from "../support/pg.js";
import { createGate } from "../../src/root/create-gate.js";
import { deleteAccountTool, effects, use } from "./support.js";

// The GovernanceStore contract suite runs on PostgreSQL in test/ledger/postgres.test.ts.
const pg = usePostgres();

describe("postgres governance in the gate", () => {
  it("two gates on one schema: a runaway loop across both stops at the quota exactly, and a kill switch set through one stops the other", async () => {
    const schema = pg.freshSchema();
    const fx = effects();
    const ledgers = [0, 1].map(() => postgresLedger({ connectionString: pg.url, poolSize: 4 }, { schema }));
    const gates = ledgers.map((ledger) => createGate({
      ledger, tools: [deleteAccountTool(fx)], policy: { quotas: [{ per: "task", tool: "delete_account", limit: 9 }] },
      approver: () => ({ approve: true, by: "bot" }), onAlert: () => {},
    }));
    const scope = { tenant: "acme", task: "loop" };
    const results = (await Promise.all(gates.map((gate, g) => gate.runToolUses(
      Array.from({ length: 40 }, (_, i) => use(`toolu_${g}_${i}`, "delete_account", { account: `acc_${g}_${i}` })), scope)))).flat();
    expect(results.filter((r) => !r.is_error)).toHaveLength(9);
    expect(results.filter((r) => r.content.startsWith("EG_QUOTA_EXCEEDED")).length).toBe(71);
    expect(fx.count()).toBe(9);

    await ledgers[0]!.governance!.setKillSwitch({}, true, { by: "alice" }, Date.now());
    const [killed] = await gates[1]!.runToolUses([use("toolu_k", "delete_account", { account: "a" })], { tenant: "globex", task: "t" });
    expect(killed!.content).toMatch(/^EG_KILL_SWITCH/);
    for (const ledger of ledgers) await ledger.close();
  });
});
