/** The console's API on a PostgreSQL ledger shared with a gate in another pool: approve, queue, search, live stream. */
import { describe, expect, it } from "vitest";
import { silentLogger } from "../../src/core/logger.js";
import { createGate } from "../../src/root/create-gate.js";
import { startConsole } from "../../src/root/console/server.js";
import { postgresLedger } from "../../src/stores/postgres/index.js";
import { deleteAccountTool, effects, emailTool, use } from "../governance/support.js";
import { usePostgres } from "../support/pg.js";
import { call, needsHumanCall } from "./support.js";

const pg = usePostgres();
const TOKEN = "pg-console-token-0123456789abcdefghij";

describe("console API on PostgreSQL", () => {
  it("approves a call another gate then runs once, settles a queue item, searches the ledger", async () => {
    const schema = pg.freshSchema();
    const agentLedger = postgresLedger({ connectionString: pg.url, poolSize: 2 }, { schema });
    const fx = effects();
    const gate = createGate({ tools: [deleteAccountTool(fx), emailTool(fx)], ledger: agentLedger, onAlert: () => {} });
    const scope = { tenant: "acme", task: "t1" };
    const [asked] = await gate.runToolUses([use("toolu_d", "delete_account", { account: "acc_1" })], scope);
    const id = /apr_\w+/.exec(asked!.content)![0];

    const consoleLedger = postgresLedger({ connectionString: pg.url, poolSize: 2 }, { schema, create: false });
    const server = await startConsole({ ledger: consoleLedger, token: TOKEN, port: 0, logger: silentLogger });
    try {
      expect((await call(server.url, TOKEN, "POST", `/api/approvals/${id}/approve`, { by: "alice" })).status).toBe(200);
      for (let i = 0; i < 2; i++) expect((await gate.runToolUses([use("toolu_d", "delete_account", { account: "acc_1" })], scope))[0]!.is_error).toBe(false);
      expect(fx.log).toEqual(["delete_account:toolu_d"]);

      await needsHumanCall(agentLedger, { tenant: "acme", key: "toolu_q", tool: "send_email", input: { to: "bob" }, why: "lost reply" });
      expect((await call(server.url, TOKEN, "POST", "/api/queue/toolu_q/resolve", { failed: "the mail server has no record of it" })).status).toBe(200);
      const [replay] = await gate.runToolUses([use("toolu_q", "send_email", { to: "bob" })], scope);
      expect(replay!.content).toMatch(/^EG_TOOL_FAILED: .*settled by a person/);
      expect(fx.count("send_email")).toBe(0);

      const page = (await call(server.url, TOKEN, "GET", "/api/calls?tenant=acme")).body as { calls: { key: string; state: string }[] };
      expect(page.calls.map((c) => [c.key, c.state])).toEqual([["toolu_d", "completed"], ["toolu_q", "failed"]]);
    } finally {
      await server.close();
      await gate.close();
      await consoleLedger.close();
      await agentLedger.close();
    }
  });
});
