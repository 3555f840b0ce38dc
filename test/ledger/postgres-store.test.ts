/**
 * What the PostgreSQL ledger adds to the contract: migrations, borrowed vs owned pools, error
 * mapping, JSON fidelity, the database clock, schema names, and the indexes behind O(log n) calls.
 */
import { createServer, type Server } from "node:net";
import pg from "pg";
import { beforeAll, describe, expect, it, vi } from "vitest";
import { createGate } from "../../src/root/create-gate.js";
import { migratePostgres, postgresLedger } from "../../src/stores/postgres/index.js";
import { MIGRATIONS, SCHEMA_VERSION } from "../../src/stores/postgres/migrations.js";
import { postgresDialect } from "../../src/stores/postgres/statements.js";
import { callStatements, updateValues } from "../../src/stores/sql/call-statements.js";
import { positional, type CompiledSql } from "../../src/stores/sql/dialect.js";
import type { ListQuery } from "../../src/contracts/calls.js";
import { chargeTool, counter, toolUse } from "../support/tools.js";
import { TEST_PG_URL_VARIABLE, usePostgres } from "../support/pg.js";
import { claimRequest } from "../../src/testing/contract-suites/calls.js";

const db = usePostgres();
const scope = { tenant: "acme", task: "t1" };

async function schemaExists(schema: string): Promise<boolean> {
  return (await db.sql(`SELECT 1 FROM pg_namespace WHERE nspname = $1`, [schema])).rowCount === 1;
}

describe("postgres ledger: migrations", () => {
  it("eight ledgers opening one new schema at once migrate it exactly once", async () => {
    const schema = db.freshSchema();
    const ledgers = Array.from({ length: 8 }, () => postgresLedger({ connectionString: db.url, poolSize: 2 }, { schema }));
    try {
      const claims = await Promise.all(ledgers.map((l, i) => l.calls.claim(claimRequest({ key: `k${i}` }))));
      expect(claims.every((c) => c.claimed)).toBe(true);
      const versions = await db.sql(`SELECT version, description FROM "${schema}".schema_version ORDER BY version`);
      expect(versions.rows).toEqual(MIGRATIONS.map((m) => ({ version: m.version, description: m.description })));
      expect(MIGRATIONS.map((m) => m.version)).toEqual(Array.from({ length: SCHEMA_VERSION }, (_, i) => i + 1));
    } finally {
      await Promise.all(ledgers.map((l) => l.close()));
    }
  });

  it("migratePostgres creates the schema ahead of time and is a no-op the second time", async () => {
    const schema = db.freshSchema();
    expect(await migratePostgres(db.url, schema)).toEqual({ schema, from: 0, to: SCHEMA_VERSION });
    expect(await migratePostgres(db.url, schema)).toEqual({ schema, from: SCHEMA_VERSION, to: SCHEMA_VERSION });
    const ledger = postgresLedger({ connectionString: db.url }, { schema, create: false });
    expect((await ledger.calls.claim(claimRequest())).claimed).toBe(true);
    await ledger.close();
  });

  it("migratePostgres borrows a pool and leaves it open", async () => {
    const pool = new pg.Pool({ connectionString: db.url, max: 1 });
    try {
      const schema = db.freshSchema();
      expect(await migratePostgres(pool, schema)).toMatchObject({ from: 0, to: SCHEMA_VERSION });
      expect((await pool.query("SELECT 1 AS one")).rows).toEqual([{ one: 1 }]);
    } finally {
      await pool.end();
    }
  });

  it("create: false and readOnly refuse a schema without a ledger and create nothing", async () => {
    for (const options of [{ create: false }, { readOnly: true }]) {
      const schema = db.freshSchema();
      const ledger = postgresLedger({ connectionString: db.url }, { schema, ...options });
      await expect(ledger.calls.list()).rejects.toThrow(new RegExp(`EG_LEDGER_UNAVAILABLE: there is no effectgate ledger in schema ${schema}`));
      await expect(ledger.calls.claim(claimRequest())).rejects.toThrow(/EG_LEDGER_UNAVAILABLE/);
      await ledger.close();
      expect(await schemaExists(schema)).toBe(false);
    }
  });

  it("readOnly reads an existing ledger and refuses every write", async () => {
    const schema = db.freshSchema();
    const rw = postgresLedger({ connectionString: db.url }, { schema });
    await rw.calls.claim(claimRequest());
    await rw.close();
    const ro = postgresLedger({ connectionString: db.url }, { schema, readOnly: true });
    expect((await ro.calls.get("acme", "toolu_1"))?.state).toBe("in_progress");
    expect(await ro.calls.list()).toHaveLength(1);
    await expect(ro.calls.claim(claimRequest({ key: "new" }))).rejects.toThrow(/EG_LEDGER_UNAVAILABLE: .* was opened read-only \(could not claim a call\)/);
    await expect(ro.calls.update("acme", "toolu_1", 1, { state: "completed" })).rejects.toThrow(/read-only/);
    await expect(ro.checkpoints.put("acme", "t", "{}")).rejects.toThrow(/read-only/);
    await ro.close();
    expect(await db.sql(`SELECT count(*)::int AS n FROM "${schema}".calls`)).toMatchObject({ rows: [{ n: 1 }] });
  });

  it("refuses a schema written by a newer effectgate, by name, without touching it", async () => {
    const schema = db.freshSchema();
    await db.sql(`CREATE SCHEMA "${schema}"`);
    await db.sql(`CREATE TABLE "${schema}".schema_version (version integer PRIMARY KEY, description text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`);
    await db.sql(`INSERT INTO "${schema}".schema_version (version, description) VALUES (1, 'calls and checkpoints'), (99, 'from the future')`);
    for (const options of [{}, { create: false }, { readOnly: true }]) {
      const ledger = postgresLedger({ connectionString: db.url }, { schema, ...options });
      await expect(ledger.calls.claim(claimRequest())).rejects.toThrow(new RegExp(`EG_LEDGER_TOO_NEW: the ledger .* schema ${schema} has schema version 99`));
      await ledger.close();
    }
    await expect(migratePostgres(db.url, schema)).rejects.toThrow(/EG_LEDGER_TOO_NEW: .*schema version 99/);
    expect((await db.sql(`SELECT to_regclass($1)::text AS t`, [`"${schema}".calls`])).rows[0]).toEqual({ t: null });
    expect((await db.sql(`SELECT max(version) AS v FROM "${schema}".schema_version`)).rows[0]).toEqual({ v: 99 });
  });

  it("validates the schema name before any SQL sees it", () => {
    for (const bad of ['x"; DROP TABLE calls; --', "Public", "pg_catalog", "", "1abc", "a".repeat(64), "a-b"]) {
      expect(() => postgresLedger({ connectionString: db.url }, { schema: bad }), bad).toThrow(/^EG_BAD_OPTION: .* is not a usable schema name/);
    }
    expect(() => postgresLedger({ connectionString: db.url }, { schema: "tenant_42_ledger" }).close()).not.toThrow();
  });
});

describe("postgres ledger: pools", () => {
  it("never closes a pool it was given", async () => {
    const pool = new pg.Pool({ connectionString: db.url, max: 2 });
    try {
      const ledger = postgresLedger({ pool }, { schema: db.freshSchema() });
      await ledger.calls.claim(claimRequest());
      await ledger.close();
      expect(pool.ended).toBe(false);
      expect((await pool.query("SELECT 2 AS two")).rows).toEqual([{ two: 2 }]);
      await expect(ledger.calls.get("acme", "toolu_1")).rejects.toThrow(/EG_LEDGER_UNAVAILABLE: the ledger .* was closed/);
    } finally {
      await pool.end();
    }
  });

  it("ends the pool it made from a connection string on close", async () => {
    const end = vi.spyOn(pg.Pool.prototype, "end");
    try {
      const ledger = postgresLedger({ connectionString: db.url }, { schema: db.freshSchema() });
      await ledger.calls.claim(claimRequest());
      await ledger.close();
      await ledger.close();
      expect(end).toHaveBeenCalledTimes(1);
    } finally {
      end.mockRestore();
    }
  });

  it("a pool whose connections all stay busy fails the call EG_LEDGER_UNAVAILABLE after the connect timeout, saying so", async () => {
    const pool = new pg.Pool({ connectionString: db.url, max: 1, connectionTimeoutMillis: 300 });
    try {
      const ledger = postgresLedger({ pool }, { schema: db.freshSchema() });
      await ledger.calls.claim(claimRequest());
      const busy = await pool.connect();
      try {
        await expect(ledger.calls.claim(claimRequest({ key: "second" }))).rejects.toThrow(
          /^EG_LEDGER_UNAVAILABLE: no connection to the ledger database postgres:\/\/.* could be opened or came free in time .*The tool was not started by this request/,
        );
      } finally {
        busy.release();
      }
      expect((await ledger.calls.claim(claimRequest({ key: "second" }))).claimed).toBe(true);
    } finally {
      await pool.end();
    }
  });

  it("keeps working when a column's type changes under its prepared statements", async () => {
    const pool = new pg.Pool({ connectionString: db.url, max: 1 });
    try {
      const schema = db.freshSchema();
      const ledger = postgresLedger({ pool }, { schema });
      await ledger.calls.claim(claimRequest());
      expect((await ledger.calls.get("acme", "toolu_1"))?.version).toBe(1);
      // The one connection now holds prepared statements whose result has error as text.
      await db.sql(`ALTER TABLE "${schema}".calls ALTER COLUMN error TYPE varchar(10000)`);
      expect(await ledger.calls.update("acme", "toolu_1", 1, { state: "failed", error: "boom", owner: null })).toMatchObject({ state: "failed", error: "boom" });
      expect((await ledger.calls.claim(claimRequest())).record).toMatchObject({ state: "failed", version: 2 });
    } finally {
      await pool.end();
    }
  });

  it("process durability sets synchronous_commit for its own transactions only", async () => {
    const pool = new pg.Pool({ connectionString: db.url, max: 1 });
    try {
      const ledger = postgresLedger({ pool }, { schema: db.freshSchema(), durability: "process" });
      await ledger.calls.claim(claimRequest());
      await ledger.calls.update("acme", "toolu_1", 1, { state: "completed", result: 1, owner: null });
      const before = (await db.sql(`SELECT setting FROM pg_settings WHERE name = 'synchronous_commit'`)).rows[0] as { setting: string };
      // The pool's one session is the one the ledger wrote on: its setting is the server's again.
      expect((await pool.query("SHOW synchronous_commit")).rows[0]).toEqual({ synchronous_commit: before.setting });
    } finally {
      await pool.end();
    }
  });
});

describe("postgres ledger: when the database cannot be reached", () => {
  let silent: Server;
  let port: number;
  beforeAll(async () => {
    // A port that accepts nothing: listen, note the port, close.
    silent = createServer();
    await new Promise<void>((resolve) => silent.listen(0, "127.0.0.1", resolve));
    port = (silent.address() as { port: number }).port;
    await new Promise<void>((resolve) => silent.close(() => resolve()));
  });

  const unreachable = () =>
    postgresLedger({ connectionString: `postgres://eguser:s3cret-pw@127.0.0.1:${port}/ledgerdb`, connectTimeoutMs: 2000 }, { schema: "effectgate" });

  it("every operation fails EG_LEDGER_UNAVAILABLE naming the database, never the password", async () => {
    const ledger = unreachable();
    expect(ledger.location).toBe(`postgres://eguser@127.0.0.1:${port}/ledgerdb schema effectgate`);
    const attempts = [
      ledger.calls.claim(claimRequest()), ledger.calls.get("acme", "k"), ledger.calls.now(), ledger.calls.list(), ledger.calls.listUnsettled(),
      ledger.calls.takeOver({ tenant: "acme", key: "k", version: 1, owner: "w", leaseMs: 1 }),
    ];
    for (const attempt of attempts) {
      const err = await attempt.then(() => undefined, (e: unknown) => e as Error);
      expect(err?.message).toMatch(new RegExp(`^EG_LEDGER_UNAVAILABLE: cannot reach the ledger database postgres://eguser@127\\.0\\.0\\.1:${port}/ledgerdb \\(could not .*ECONNREFUSED`));
      expect(err?.message).not.toContain("s3cret-pw");
      expect(err).toMatchObject({ code: "EG_LEDGER_UNAVAILABLE", outcome: "retryable" });
    }
    await expect(ledger.calls.claim(claimRequest())).rejects.toThrow(/\(could not claim a call: /);
    await expect(ledger.calls.claim(claimRequest())).rejects.toThrow(/The tool was not started by this request; replay this same call once the database is reachable to run it or get its outcome\./);
    await ledger.close();
  });

  it("the gate answers a write call with an is_error result and runs nothing", async () => {
    const c = counter();
    const gate = createGate({ tools: [chargeTool(c)], ledger: unreachable() });
    const [result] = await gate.runToolUses([toolUse("toolu_1", "charge_card", { customer: "cus_1", amount: 10 })], scope);
    expect(result).toMatchObject({ type: "tool_result", tool_use_id: "toolu_1", is_error: true });
    expect(result?.content).toMatch(/^EG_LEDGER_UNAVAILABLE: cannot reach the ledger database postgres:\/\/eguser@127\.0\.0\.1:\d+\/ledgerdb .*The tool was not started by this request/);
    expect(result?.content).not.toContain("s3cret-pw");
    expect(c.total).toBe(0);
    expect(gate.stats.executed).toBe(0);
    await gate.close();
    await gate.ledger.close();
  });

  it("migratePostgres says the same", async () => {
    await expect(migratePostgres(`postgres://eguser:s3cret-pw@127.0.0.1:${port}/ledgerdb`)).rejects.toThrow(
      new RegExp(`^EG_LEDGER_UNAVAILABLE: cannot reach the ledger database postgres://eguser@127\\.0\\.0\\.1:${port}/ledgerdb .*Nothing was changed`),
    );
  });

  const shared = Boolean(process.env[TEST_PG_URL_VARIABLE]);
  it.skipIf(shared)(`a wrong password is named as such, without the password${shared ? " (skipped: the shared server may trust local connections, so no password can be wrong)" : ""}`, async () => {
    const wrong = db.url.replace(/:([0-9a-f]+)@/, ":not-the-password@");
    const ledger = postgresLedger({ connectionString: wrong }, { schema: db.freshSchema() });
    const err = await ledger.calls.claim(claimRequest()).then(() => undefined, (e: unknown) => e as Error);
    expect(err?.message).toMatch(/^EG_LEDGER_UNAVAILABLE: the ledger postgres:\/\/postgres@127\.0\.0\.1:\d+\/postgres schema .* is unavailable \(could not claim a call: 28P01: password authentication failed/);
    expect(err?.message).not.toContain("not-the-password");
    await ledger.close();
  });
});

describe("postgres ledger: damaged rows", () => {
  it("refuses a record with an unknown state or unreadable JSON, naming it, and keeps the others readable", async () => {
    const schema = db.freshSchema();
    const ledger = postgresLedger({ connectionString: db.url }, { schema });
    await ledger.calls.claim(claimRequest({ key: "good" }));
    await ledger.calls.claim(claimRequest({ key: "bad-state" }));
    await ledger.calls.claim(claimRequest({ key: "bad-json" }));
    await db.sql(`UPDATE "${schema}".calls SET state = 'exploded' WHERE key = 'bad-state'`);
    // json columns check their text on the way in, so damage can only come from outside: a changed column type.
    await db.sql(`ALTER TABLE "${schema}".calls ALTER COLUMN result TYPE text`);
    await db.sql(`UPDATE "${schema}".calls SET result = '{not json', state = 'completed' WHERE key = 'bad-json'`);
    await expect(ledger.calls.get("acme", "bad-state")).rejects.toThrow(
      /EG_LEDGER_CORRUPT: the ledger .* holds a damaged row: record acme\/bad-state has an unknown state "exploded"/,
    );
    await expect(ledger.calls.get("acme", "bad-json")).rejects.toThrow(/EG_LEDGER_CORRUPT: .*record acme\/bad-json has unreadable result/);
    await expect(ledger.calls.claim(claimRequest({ key: "bad-json" }))).rejects.toThrow(/EG_LEDGER_CORRUPT: .*acme\/bad-json/);
    await expect(ledger.calls.list({ tenant: "acme" })).rejects.toThrow(/EG_LEDGER_CORRUPT/);
    expect((await ledger.calls.get("acme", "good"))?.state).toBe("in_progress");
    await ledger.close();
  });

  it("the gate runs nothing for a damaged record", async () => {
    const schema = db.freshSchema();
    const ledger = postgresLedger({ connectionString: db.url }, { schema });
    await ledger.calls.claim(claimRequest({ key: "toolu_1", tool: "charge_card" }));
    await db.sql(`UPDATE "${schema}".calls SET effect = 'explosive' WHERE key = 'toolu_1'`);
    const c = counter();
    const gate = createGate({ tools: [chargeTool(c)], ledger });
    const [result] = await gate.runToolUses([toolUse("toolu_1", "charge_card", { customer: "cus_1", amount: 10 })], scope);
    expect(result).toMatchObject({ is_error: true });
    expect(result?.content).toMatch(/^EG_LEDGER_CORRUPT: .*record acme\/toolu_1 has an unknown effect "explosive"/);
    expect(c.total).toBe(0);
    await ledger.close();
  });
});

describe("postgres ledger: values text cannot hold", () => {
  it("a key with U+0000 is refused EG_BAD_CONTENT, saying what to remove; the gate runs nothing and records nothing", async () => {
    const schema = db.freshSchema();
    const ledger = postgresLedger({ connectionString: db.url }, { schema });
    await expect(ledger.calls.claim(claimRequest({ key: "toolu_\u0000x" }))).rejects.toThrow(
      /^EG_BAD_CONTENT: the ledger .* cannot store this value: PostgreSQL text cannot hold the NUL character U\+0000 .*Nothing was written and no call was executed; remove the NUL/,
    );
    const c = counter();
    const gate = createGate({ tools: [chargeTool(c)], ledger });
    const [result] = await gate.runToolUses([toolUse("toolu_\u0000y", "charge_card", { customer: "cus_1", amount: 10 })], scope);
    expect(result).toMatchObject({ is_error: true });
    expect(result?.content).toMatch(/^EG_BAD_CONTENT: .*U\+0000/);
    expect(c.total).toBe(0);
    expect((await db.sql(`SELECT count(*)::int AS n FROM "${schema}".calls`)).rows).toEqual([{ n: 0 }]);
    await gate.close();
    await ledger.close();
  });
});

describe("postgres ledger: fidelity and the clock", () => {
  it("replays a result verbatim: key order, \\u0000 and unicode survive (json, not jsonb)", async () => {
    const ledger = postgresLedger({ connectionString: db.url }, { schema: db.freshSchema() });
    const input = { zeta: 1, alpha: { y: "nul:\u0000", b: [3, 2, 1] }, "ключ": "☃" };
    const result = { id: "T-1", customer: "cus_1", title: "z first, a last", nested: { z: 1, a: 2 }, big: 1e21, neg: -0.5 };
    await ledger.calls.claim(claimRequest({ input }));
    await ledger.calls.update("acme", "toolu_1", 1, { state: "completed", result, owner: null });
    const stored = await ledger.calls.get("acme", "toolu_1");
    expect(JSON.stringify(stored?.input)).toBe(JSON.stringify(input));
    expect(JSON.stringify(stored?.result)).toBe(JSON.stringify(result));
    await ledger.close();
  });

  it("judges leases by the database clock, not the worker's", async () => {
    const ledger = postgresLedger({ connectionString: db.url }, { schema: db.freshSchema() });
    await ledger.calls.claim(claimRequest({ leaseMs: 60_000 }));
    const real = Date.now();
    const dbNow = await ledger.calls.now();
    expect(Math.abs(dbNow - real)).toBeLessThan(5_000);
    // This worker's clock runs two hours fast: the lease must still count as live.
    const spy = vi.spyOn(Date, "now").mockImplementation(() => real + 2 * 3600_000);
    try {
      expect(Math.abs((await ledger.calls.now()) - real)).toBeLessThan(5_000);
      expect(await ledger.calls.takeOver({ tenant: "acme", key: "toolu_1", version: 1, owner: "w", leaseMs: 1000 })).toBeUndefined();
      expect(await ledger.calls.listUnsettled()).toEqual([]);
    } finally {
      spy.mockRestore();
    }
    const record = await ledger.calls.get("acme", "toolu_1");
    expect(record!.createdAt).toBeGreaterThanOrEqual(dbNow - 5_000);
    expect(record!.leaseExpiresAt).toBe(record!.createdAt + 60_000);
    await ledger.close();
  });
});

interface PlanNode {
  readonly "Node Type": string;
  readonly "Relation Name"?: string;
  readonly "Index Name"?: string;
  readonly "Conflict Arbiter Indexes"?: readonly string[];
  readonly Plans?: readonly PlanNode[];
}

const nodes = (node: PlanNode): PlanNode[] => [node, ...(node.Plans ?? []).flatMap(nodes)];

describe("postgres ledger: cost per call does not grow with the ledger", () => {
  it("every per-call statement walks an index on a ledger of 50 000 records", async () => {
    const schema = db.freshSchema();
    await migratePostgres(db.url, schema);
    await db.sql(
      `INSERT INTO "${schema}".calls (tenant, key, tool, effect, task, tool_use_id, fingerprint, intent, input, input_redacted, state,
         result, error, owner, lease_expires_at, attempts, version, created_at, updated_at)
       SELECT 't' || (i % 50), 'k' || i, 'create_ticket', 'write', 'task', 'k' || i, 'fp', 'fp', '{}', false,
         CASE WHEN i % 1000 = 0 THEN 'in_progress' ELSE 'completed' END, '{}', NULL, NULL, NULL, 1, 2, i, i
       FROM generate_series(1, 50000) AS i`,
    );
    await db.sql(`ANALYZE "${schema}".calls`);
    const sql = callStatements(postgresDialect(`"${schema}"`, "fsync"));
    const bound = (compiled: CompiledSql, values: Record<string, unknown>): [string, unknown[]] => [compiled.text, positional(compiled, values)];
    const plans: Record<string, [string, unknown[]]> = {
      claim: bound(sql.claim, {
        tenant: "t1", key: "k1", tool: "x", effect: "write", task: "t", tool_use_id: "k1", fingerprint: "fp", intent: "fp", input: "{}",
        input_redacted: false, owner: "w", lease_ms: 1000, fence: null, claim_token: "t",
      }),
      get: bound(sql.get, { tenant: "t1", key: "k1" }),
      update: bound(sql.update.completed, updateValues("t1", "k1", 2, { state: "completed", result: 1, error: null, owner: null })),
      takeOver: bound(sql.takeOver, { tenant: "t1", key: "k1", version: 2, owner: "w", lease_ms: 1000, dead: false, fence: null }),
      renew: bound(sql.renew, { tenant: "t1", key: "k1", version: 2, owner: "w", lease_ms: 1000 }),
      remove: bound(sql.remove, { tenant: "t1", key: "k1", version: 2, claim_token: "t" }),
      unsettled: bound(sql.unsettled, { live: true, limit: 100 }),
      // Intent windows: a task's calls (calls_by_task), on every write of a tool with a repeats policy.
      findRepeat: bound(sql.findRepeat, { tenant: "t7", task: "task", intent: "fp", key: "k1", window_ms: 60_000 }),
      ...Object.fromEntries(Object.entries({
        byKey: { key: "k1" },
        // Ledger search (the console): every filter walks an index (calls_by_task, calls_by_created, the primary key), never the table.
        byTenant: { tenant: "t7" }, byTool: { tool: "create_ticket" }, byTask: { task: "task" }, byState: { state: "in_progress" },
        byTenantAfter: { tenant: "t7", after: { createdAt: 40_000, tenant: "t7", key: "k40000" } },
        byTaskInTime: { task: "task", createdFrom: 10_000, createdTo: 20_000 },
      } satisfies Record<string, ListQuery>).map(([name, query]) => {
        const list = sql.list({ ...query, limit: 50 });
        return [name, bound(list.sql, list.values)];
      })),
    };
    for (const [name, [text, values]] of Object.entries(plans)) {
      const plan = (await db.sql(`EXPLAIN (FORMAT JSON) ${text}`, values)).rows[0]["QUERY PLAN"][0].Plan as PlanNode;
      const scans = nodes(plan).filter((n) => n["Relation Name"] === "calls" && n["Node Type"].endsWith("Scan")).map((n) => `${n["Node Type"]}${n["Index Name"] ? ` ${n["Index Name"]}` : ""}`);
      // A claim reads nothing: its ON CONFLICT probes the primary key.
      if (name === "claim") expect(plan["Conflict Arbiter Indexes"]).toEqual(["calls_pkey"]);
      else expect(scans.length, `${name} reads calls`).toBeGreaterThan(0);
      expect(scans.filter((scan) => !scan.includes("Index")), `${name}: ${scans.join(", ")}`).toEqual([]);
    }
  }, 120_000); // 50,000 rows inserted and analysed: a loaded server takes longer than the default budget
});
