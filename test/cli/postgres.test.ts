import { describe, expect, it } from "vitest";
import { z } from "zod";
import { createGate } from "../../src/root/create-gate.js";
import { defineTool } from "../../src/core/tool.js";
import { postgresLedger } from "../../src/stores/postgres/index.js";
import { usePostgres } from "../support/pg.js";
import { runCli } from "./run-cli.js";

const pg = usePostgres();

describe("the CLI on a PostgreSQL ledger (--pg / EFFECTGATE_PG_URL)", () => {
  it("migrate creates the schema, then ledger ls/show read the calls the agents recorded", async () => {
    const schema = pg.freshSchema();
    const migrated = await runCli(["migrate", "--pg", pg.url, "--pg-schema", schema]);
    expect(migrated.code).toBe(0);
    expect(migrated.stdout).toMatch(new RegExp(`migrated the PostgreSQL ledger .* schema ${schema} from version 0 to \\d+`));
    expect((await runCli(["migrate", "--pg", pg.url, "--pg-schema", schema])).stdout).toMatch(/is up to date/);

    const ledger = postgresLedger({ connectionString: pg.url }, { schema });
    const tool = defineTool({ name: "open_ticket", effect: "write", input: z.object({ title: z.string() }), execute: (i) => ({ ticket: `T-${i.title}` }) });
    const gate = createGate({ tools: [tool], ledger });
    await gate.runToolUses([{ type: "tool_use", id: "toolu_pg_1", name: "open_ticket", input: { title: "fire" } }], { tenant: "acme", task: "t" });
    await ledger.close();

    const ls = await runCli(["ledger", "ls", "--json", "--pg-schema", schema], { env: { EFFECTGATE_PG_URL: pg.url } });
    expect(ls.code).toBe(0);
    expect(JSON.parse(ls.stdout)).toMatchObject([{ key: "toolu_pg_1", tool: "open_ticket", state: "completed", result: { ticket: "T-fire" } }]);
    const show = await runCli(["ledger", "show", "toolu_pg_1", "--pg", pg.url, "--pg-schema", schema]);
    expect(show.code).toBe(0);
    expect(show.stdout).toContain("T-fire");
  });

  it("a schema that holds no ledger is an error naming it, and nothing is created", async () => {
    const schema = pg.freshSchema();
    const ls = await runCli(["ledger", "ls", "--pg", pg.url, "--pg-schema", schema]);
    expect(ls.code).toBe(1);
    expect(ls.stderr).toContain(`EG_LEDGER_UNAVAILABLE: there is no effectgate ledger in schema ${schema}`);
    expect((await runCli(["ledger", "ls", "--pg", pg.url, "--pg-schema", schema])).code).toBe(1);
  });

  it("never prints the URL's password", async () => {
    const url = new URL(pg.url);
    url.password = "hunter2-secret";
    const run = await runCli(["ledger", "ls", "--pg", url.toString(), "--pg-schema", pg.freshSchema()]);
    expect(run.code).not.toBe(0);
    expect(run.stderr + run.stdout).not.toContain("hunter2-secret");
  });
});
