/**
 * The gateway on a PostgreSQL ledger (--pg): killed mid-call and restarted, the probe settles the
 * call and the upstream counts one effect. PostgreSQL from EFFECTGATE_TEST_PG_URL, else an embedded one.
 */
import { describe, expect, it } from "vitest";
import { requireBuild } from "../support/processes.js";
import { usePostgres } from "../support/pg.js";
import { startGateway, workspace, type Workspace } from "./support.js";

requireBuild();
// Real processes on a shared 2-core machine: a slow start is load, not a failure (no assertion is on time).
const PROCESS_TEST_TIMEOUT_MS = 120_000;
const pg = usePostgres();

const PROBE = { tool: "find_ticket_by_key", arguments: { key: "${key}" }, done: ["found"], absent: ["missing"] };

async function effectsReach(ws: Workspace, count: number): Promise<void> {
  for (let i = 0; i < 2400 && ws.effects().length < count; i++) await new Promise((r) => setTimeout(r, 25));
  if (ws.effects().length < count) throw new Error(`the upstream applied ${ws.effects().length} effects, expected ${count}`);
}

describe("effectgate mcp --pg", { timeout: PROCESS_TEST_TIMEOUT_MS }, () => {
  it("SIGKILLed after the upstream applied the effect, restarted on the same PostgreSQL ledger: one effect, the real result", async () => {
    const ws = workspace({ tools: { create_ticket: { probe: PROBE } } });
    const ledgerArgs = ["--pg", pg.url, "--pg-schema", pg.freshSchema()];
    ws.control({ create_ticket: "hang_after_effect" });
    const first = await startGateway(ws, { ledgerArgs });
    const pending = first.call("create_ticket", { title: "pg" }, { toolUseId: "toolu_pg" }).catch((err: unknown) => String(err));
    await effectsReach(ws, 1);
    const gone = new Promise<void>((resolve) => (first.client.onclose = () => resolve()));
    process.kill(first.pid, "SIGKILL");
    await gone;
    await pending;

    ws.control({});
    const second = await startGateway(ws, { ledgerArgs });
    try {
      const result = await second.call("create_ticket", { title: "pg" }, { toolUseId: "toolu_pg" });
      expect(result.structuredContent).toEqual({ status: "found", id: "T-1", title: "pg" });
      expect(await second.call("create_ticket", { title: "pg" }, { toolUseId: "toolu_pg" })).toEqual(result);
      expect(ws.effects()).toHaveLength(1);
    } finally {
      await second.close();
    }
  });
});
