/**
 * Schema versions mean the same tables in SQLite and PostgreSQL, and a ledger made by
 * effectgate 0.1.0 still opens: test/fixtures/ledgers-0.1.0 holds ledgers that 0.1.0's own build
 * wrote (a SQLite file, and pg_dump output of PostgreSQL schemas at version 4, and at version 3 of
 * 0.1.0's PostgreSQL numbering, where 3 was governance and sagas did not exist yet).
 */
import { copyFileSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import pg from "pg";
import { describe, expect, it } from "vitest";
import { createGate } from "../../src/root/create-gate.js";
import { ledgerCheckpoint } from "../../src/checkpoint/stored.js";
import type { Stores } from "../../src/contracts/stores.js";
import { MIGRATION_NAMES } from "../../src/stores/migration-names.js";
import { postgresLedger } from "../../src/stores/postgres/index.js";
import { MIGRATIONS as PG_MIGRATIONS, SCHEMA_VERSION as PG_VERSION } from "../../src/stores/postgres/migrations.js";
import { sqliteLedger } from "../../src/stores/sqlite/index.js";
import { MIGRATIONS as SQLITE_MIGRATIONS, SCHEMA_VERSION as SQLITE_VERSION } from "../../src/stores/sqlite/migrations.js";
import { usePostgres } from "../support/pg.js";
import { tempDir } from "../support/tmp.js";
import { z } from "zod";
import { defineTool } from "../../src/core/tool.js";
import { counter, type Counter, toolUse } from "../support/tools.js";

const FIXTURES = fileURLToPath(new URL("../fixtures/ledgers-0.1.0/", import.meta.url));
const scope = { tenant: "acme", task: "t-1" };

/** The tool 0.1.0's fixtures were made with (same name, input and result shape). */
const ticketTool = (c: Counter) => defineTool({
  name: "create_ticket", effect: "write", input: z.object({ title: z.string() }),
  async execute({ title }) {
    c.total++;
    return { id: `T-${c.total + 1}`, title };
  },
});

/** What 0.1.0 wrote into every fixture ledger (see test/fixtures/ledgers-0.1.0/README.md). */
async function expectTheFixture(ledger: Stores, full: boolean): Promise<void> {
  expect(await ledger.calls.get("acme", "toolu_ticket")).toMatchObject({ state: "completed", result: { id: "T-1" } });
  expect(await ledger.governance!.activeKillSwitch("evil", undefined)).toMatchObject({ tenant: "evil", by: "ops", reason: "fixture" });
  if (!full) return;
  expect(await ledger.calls.get("acme", "toolu_mail")).toMatchObject({ state: "needs_human" });
  expect(await ledger.calls.get("acme", "saga:order-1:charge")).toMatchObject({ state: "compensated" });
  expect(await ledger.sagas!.get("acme", "order-1")).toMatchObject({ state: "compensated" });
  expect((await ledger.sagas!.steps("acme", "order-1")).map((s) => [s.name, s.state])).toEqual([["charge", "compensated"]]);
  expect(await ledger.governance!.listApprovals({ state: "pending" })).toMatchObject([{ tool: "delete_account", key: "toolu_delete" }]);
  expect(await ledgerCheckpoint(ledger, { tenant: "acme", id: "cp-1" }).load()).toMatchObject({ counters: { turns: 1 } });
}

/** The gate answers 0.1.0's completed call from the ledger, running nothing, and can write new calls and sagas. */
async function expectItStillWorks(ledger: Stores): Promise<void> {
  const c = counter();
  const gate = createGate({ tools: [ticketTool(c)], ledger });
  const [replayed] = await gate.runToolUses([toolUse("toolu_ticket", "create_ticket", { title: "printer" })], scope);
  expect(replayed).toMatchObject({ is_error: false, content: JSON.stringify({ id: "T-1", title: "printer" }) });
  const [fresh] = await gate.runToolUses([toolUse("toolu_new", "create_ticket", { title: "new" })], scope);
  expect(fresh?.is_error).toBe(false);
  expect(c.total).toBe(1);
  await gate.saga("order-2", scope).start();
  expect(await ledger.sagas!.get("acme", "order-2")).toMatchObject({ state: "running" });
  expect((await ledger.calls.list({ limit: 10 })).map((r) => r.key)).toContain("toolu_new");
}

describe("one numbering of migrations for every dialect", () => {
  it("SQLite and PostgreSQL list the same migrations, in the same order, under the same numbers", () => {
    expect(SQLITE_MIGRATIONS.map((m) => [m.version, m.description])).toEqual(MIGRATION_NAMES.map((name, i) => [i + 1, name]));
    expect(PG_MIGRATIONS.map((m) => [m.version, m.description])).toEqual(MIGRATION_NAMES.map((name, i) => [i + 1, name]));
    expect(SQLITE_VERSION).toBe(PG_VERSION);
  });
});

describe("a SQLite ledger made by effectgate 0.1.0", () => {
  const dir = tempDir("effectgate-migrate-");

  it("opens, reads back everything 0.1.0 wrote, is migrated to the current version, and keeps working", async () => {
    const file = join(dir, "ledger.db");
    copyFileSync(join(FIXTURES, "sqlite-v4.db"), file);
    const ledger = sqliteLedger(file);
    try {
      await expectTheFixture(ledger, true);
      await expectItStillWorks(ledger);
    } finally {
      await ledger.close();
    }
    const { default: Database } = await import("better-sqlite3");
    const raw = new Database(file, { readonly: true });
    try {
      expect(raw.pragma("user_version", { simple: true })).toBe(SQLITE_VERSION);
      expect(raw.prepare(`SELECT name FROM sqlite_master WHERE type = 'index' AND name = 'calls_by_created'`).get()).toEqual({ name: "calls_by_created" });
    } finally {
      raw.close();
    }
  });
});

describe("a PostgreSQL ledger made by effectgate 0.1.0", () => {
  const db = usePostgres();

  /** Restores a fixture dump into a fresh schema (the dump names its schema; the name is replaced). */
  async function restore(fixture: string, name: string): Promise<string> {
    const schema = db.freshSchema();
    const dump = readFileSync(join(FIXTURES, fixture), "utf8").replaceAll(name, schema);
    const client = new pg.Client({ connectionString: db.url });
    await client.connect();
    try {
      await client.query(dump);
    } finally {
      await client.end();
    }
    return schema;
  }

  const versions = async (schema: string) =>
    (await db.sql(`SELECT version, description FROM "${schema}".schema_version ORDER BY version`)).rows.map((r) => [r.version, r.description]);

  it("at version 4: opens, reads back everything, takes the new numbering's names and the next migrations, keeps working", async () => {
    const schema = await restore("postgres-v4.sql", "eg_fixture_v4");
    const ledger = postgresLedger({ connectionString: db.url }, { schema });
    try {
      await expectTheFixture(ledger, true);
      await expectItStillWorks(ledger);
    } finally {
      await ledger.close();
    }
    expect(await versions(schema)).toEqual(MIGRATION_NAMES.map((name, i) => [i + 1, name]));
  });

  it("at version 3 of 0.1.0's numbering (governance, no sagas yet): gains the saga tables, keeps its governance state", async () => {
    const schema = await restore("postgres-v3.sql", "eg_fixture_v3");
    expect(await versions(schema)).toEqual([[1, "calls and checkpoints"], [2, "reconciliation"], [3, "governance"]]);
    const ledger = postgresLedger({ connectionString: db.url }, { schema });
    try {
      await expectTheFixture(ledger, false);
      await expectItStillWorks(ledger);
    } finally {
      await ledger.close();
    }
    expect(await versions(schema)).toEqual(MIGRATION_NAMES.map((name, i) => [i + 1, name]));
  });
});
