/**
 * Group commit in the PostgreSQL ledger (src/stores/postgres/group-commit.ts): the writes that
 * concurrent calls of one process ask for at the same moment go to the server as one transaction,
 * on one connection, in one round trip when it pipelines, without weakening what each call is
 * promised. The contract suite (src/testing/contract-suites/calls.ts) holds the per-write semantics
 * for every store; these are the PostgreSQL-only parts, seen from the client's side of the wire (a
 * pool whose connections log every statement they send and in which round trip): that writes do
 * share a commit, that a lone write is one statement, that one refused statement fails alone, that
 * a failed COMMIT fails its whole batch and writes none of it, that batches lock rows in one order,
 * that a gated write is one statement per durable point, and that a real SIGKILL in the middle of
 * batches leaves no effect without its claim committed.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import pg from "pg";
import { z } from "zod";
import { beforeAll, describe, expect, it } from "vitest";
import { createGate } from "../../src/root/create-gate.js";
import { defineTool } from "../../src/core/tool.js";
import { postgresLedger } from "../../src/stores/postgres/index.js";
import { claimRequest } from "../../src/testing/contract-suites/calls.js";
import { usePostgres } from "../support/pg.js";
import { requireBuild, runFixture } from "../support/processes.js";
import { tempDir } from "../support/tmp.js";

const db = usePostgres();

interface Sent {
  /** Which of the pool's connections sent it. */
  readonly connection: number;
  /** Which round trip of that connection: statements sent while others are still unanswered share one. */
  readonly trip: string;
  readonly text: string;
  readonly values: readonly unknown[];
  /** The prepared statement's name, when it was sent as one. */
  readonly name: string | undefined;
  /** The SQLSTATE the server answered with, once answered, if it refused the statement. */
  code?: string;
}

/** A pool (yours, as `postgresLedger({ pool })` borrows it) whose connections log what they send. */
function loggingPool(options: { pipeline: boolean; max?: number }) {
  const sent: Sent[] = [];
  let connections = 0;
  class Logging extends pg.Client {
    constructor(config?: pg.ClientConfig) {
      super(config);
      const connection = ++connections;
      let unanswered = 0;
      let trips = 0;
      const query = this.query.bind(this) as (...args: unknown[]) => unknown;
      (this as unknown as { query: (...args: unknown[]) => unknown }).query = (...args: unknown[]) => {
        const config = args[0] as string | { text: string; values?: unknown[] };
        if (unanswered === 0) trips++;
        unanswered++;
        const entry: Sent = {
          connection, trip: `${connection}.${trips}`, text: typeof config === "string" ? config : config.text,
          values: (typeof config === "string" ? (Array.isArray(args[1]) ? args[1] : []) : config.values) ?? [],
          name: typeof config === "string" ? undefined : (config as { name?: string }).name,
        };
        sent.push(entry);
        const answered = (err: unknown) => {
          unanswered--;
          const code = (err as { code?: unknown } | null)?.code;
          if (typeof code === "string") entry.code = code;
        };
        const last = args.length - 1;
        const callback = args[last];
        if (typeof callback === "function") {
          args[last] = (err: unknown, ...rest: unknown[]) => {
            answered(err);
            (callback as (...a: unknown[]) => void)(err, ...rest);
          };
          return query(...args);
        }
        const result = query(...args) as Promise<unknown>;
        result.then(() => answered(null), answered);
        return result;
      };
    }
  }
  const pool = new pg.Pool({ connectionString: db.url, max: options.max ?? 8, pipeline: options.pipeline, Client: Logging });
  pool.on("error", () => undefined);
  return { pool, sent };
}

/** The first word of each statement: BEGIN, INSERT, UPDATE, COMMIT… */
const verbs = (sent: readonly Sent[]) => sent.map((s) => s.text.trimStart().split(/\s/)[0]?.toUpperCase());
const count = (sent: readonly Sent[], verb: string) => verbs(sent).filter((v) => v === verb).length;

async function ledgerOn(pool: pg.Pool) {
  const ledger = postgresLedger({ pool }, { schema: db.freshSchema() });
  // Opening migrates the schema: done before anything is counted.
  await ledger.calls.claim(claimRequest({ key: "opening" }));
  return ledger;
}

describe("postgres group commit", () => {
  it("a lone write is one statement; writes asked for at the same moment share one transaction sent in one round trip", async () => {
    const { pool, sent } = loggingPool({ pipeline: true });
    const ledger = await ledgerOn(pool);
    try {
      sent.length = 0;
      expect((await ledger.calls.claim(claimRequest({ key: "alone" }))).claimed).toBe(true);
      expect(verbs(sent)).toEqual(["INSERT"]);

      sent.length = 0;
      const keys = Array.from({ length: 48 }, (_, i) => `toolu_${String(i).padStart(2, "0")}`);
      // Asked for in reverse order: they go out in (tenant, key) order, so two batches never lock rows in opposite orders.
      const claims = await Promise.all([...keys].reverse().map((key) => ledger.calls.claim(claimRequest({ key, toolUseId: key }))));
      expect(claims.every((c) => c.claimed)).toBe(true);
      expect(verbs(sent)).toEqual(["BEGIN", ...keys.map(() => "INSERT"), "COMMIT"]);
      expect(new Set(sent.map((s) => s.trip)).size).toBe(1);
      expect(sent.filter((s) => s.text.startsWith("INSERT")).map((s) => s.values[1])).toEqual(keys);

      sent.length = 0;
      const outcomes = await Promise.all(keys.map((key, i) => ledger.calls.update("acme", key, 1, { state: "completed", result: { n: i }, owner: null })));
      expect(outcomes.map((r) => r?.result)).toEqual(keys.map((_, i) => ({ n: i })));
      expect(verbs(sent)).toEqual(["BEGIN", ...keys.map(() => "UPDATE"), "COMMIT"]);
      expect(new Set(sent.map((s) => s.trip)).size).toBe(1);
      const stored = await db.sql(`SELECT count(*)::int AS n FROM "${ledger.location.split(" schema ")[1]}".calls WHERE state = 'completed'`);
      expect(stored.rows[0]).toEqual({ n: 48 });
    } finally {
      await ledger.close();
      await pool.end();
    }
  });

  it("a statement the server refuses fails alone: the other writes of its batch are sent again and committed", async () => {
    for (const pipeline of [true, false]) {
      const { pool, sent } = loggingPool({ pipeline });
      const ledger = await ledgerOn(pool);
      try {
        sent.length = 0;
        const keys = ["a", "b", "bad\u0000key", "c", "d"];
        const results = await Promise.allSettled(keys.map((key) => ledger.calls.claim(claimRequest({ key }))));
        expect(results.map((r) => r.status)).toEqual(["fulfilled", "fulfilled", "rejected", "fulfilled", "fulfilled"]);
        expect(String((results[2] as PromiseRejectedResult).reason)).toMatch(/EG_BAD_CONTENT/);
        for (const key of ["a", "b", "c", "d"]) expect(await ledger.calls.get("acme", key)).toMatchObject({ state: "in_progress", version: 1 });
        // The first transaction was rolled back by the refused statement; the second, without it, committed.
        expect(count(sent, "BEGIN")).toBe(2);
        expect(sent.filter((s) => s.text === "COMMIT" || s.text === "ROLLBACK").length).toBe(2);
      } finally {
        await ledger.close();
        await pool.end();
      }
    }
  });

  it("a batch whose COMMIT fails fails every write in it, and none of them is in the database", async () => {
    const { pool } = loggingPool({ pipeline: true });
    const ledger = await ledgerOn(pool);
    const schema = ledger.location.split(" schema ")[1] as string;
    try {
      // A deferred constraint trigger refuses the commit of any transaction that inserted the key "poison".
      await db.sql(`CREATE FUNCTION "${schema}".refuse_poison() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN IF NEW.key = 'poison' THEN RAISE EXCEPTION 'poisoned commit'; END IF; RETURN NEW; END $$`);
      await db.sql(`CREATE CONSTRAINT TRIGGER refuse_poison AFTER INSERT ON "${schema}".calls
        DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION "${schema}".refuse_poison()`);
      const results = await Promise.allSettled([
        ledger.calls.claim(claimRequest({ key: "a" })),
        ledger.calls.claim(claimRequest({ key: "poison" })),
        ledger.calls.claim(claimRequest({ key: "b" })),
        ledger.calls.update("acme", "opening", 1, { state: "completed", result: { ok: true }, owner: null }),
      ]);
      expect(results.map((r) => r.status)).toEqual(["rejected", "rejected", "rejected", "rejected"]);
      for (const r of results) expect(String((r as PromiseRejectedResult).reason)).toMatch(/EG_LEDGER_UNAVAILABLE.*poisoned commit/);
      expect(await ledger.calls.get("acme", "a")).toBeUndefined();
      expect(await ledger.calls.get("acme", "b")).toBeUndefined();
      expect(await ledger.calls.get("acme", "poison")).toBeUndefined();
      expect(await ledger.calls.get("acme", "opening")).toMatchObject({ state: "in_progress", version: 1 });
      // Alone, each write stands or falls by itself again.
      expect((await ledger.calls.claim(claimRequest({ key: "a" }))).claimed).toBe(true);
      await expect(ledger.calls.claim(claimRequest({ key: "poison" }))).rejects.toThrow(/poisoned commit/);
    } finally {
      await ledger.close();
      await pool.end();
    }
  });

  it("on a pool that does not pipeline, the batch is the same one transaction, sent a statement at a time", async () => {
    const { pool, sent } = loggingPool({ pipeline: false });
    const ledger = await ledgerOn(pool);
    try {
      sent.length = 0;
      const claims = await Promise.all(Array.from({ length: 16 }, (_, i) => ledger.calls.claim(claimRequest({ key: `k${i}` }))));
      expect(claims.every((c) => c.claimed)).toBe(true);
      expect(count(sent, "BEGIN")).toBe(1);
      expect(count(sent, "INSERT")).toBe(16);
      expect(count(sent, "COMMIT")).toBe(1);
      expect(new Set(sent.map((s) => s.connection)).size).toBe(1);
      expect(new Set(sent.map((s) => s.trip)).size).toBe(18);
    } finally {
      await ledger.close();
      await pool.end();
    }
  });

  it("two ledgers writing the same rows at once, asked for in opposite orders, never deadlock", async () => {
    const one = loggingPool({ pipeline: true });
    const two = loggingPool({ pipeline: true });
    const schema = db.freshSchema();
    const a = postgresLedger({ pool: one.pool }, { schema });
    const b = postgresLedger({ pool: two.pool }, { schema });
    try {
      await a.calls.claim(claimRequest({ key: "opening" }));
      // Inserting a middle key takes a while, so the two batches surely overlap while each holds rows the other wants next.
      await db.sql(`CREATE FUNCTION "${schema}".slow_middle() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN IF NEW.key LIKE '%-k10' THEN PERFORM pg_sleep(0.1); END IF; RETURN NEW; END $$`);
      await db.sql(`CREATE TRIGGER slow_middle AFTER INSERT ON "${schema}".calls FOR EACH ROW EXECUTE FUNCTION "${schema}".slow_middle()`);
      for (let round = 0; round < 3; round++) {
        const keys = Array.from({ length: 20 }, (_, i) => `r${round}-k${String(i).padStart(2, "0")}`);
        const [fromA, fromB] = await Promise.all([
          Promise.all(keys.map((key) => a.calls.claim(claimRequest({ key, owner: "worker-a" })))),
          Promise.all([...keys].reverse().map((key) => b.calls.claim(claimRequest({ key, owner: "worker-b" })))),
        ]);
        const winners = [...fromA, ...fromB].filter((c) => c.claimed).map((c) => c.record.key).sort();
        expect(winners).toEqual(keys);
      }
      // 40P01 deadlock_detected: the server would have aborted one batch (and it would have been sent again).
      expect([...one.sent, ...two.sent].filter((s) => s.code === "40P01")).toEqual([]);
    } finally {
      await a.close();
      await b.close();
      await one.pool.end();
      await two.pool.end();
    }
  });

  it("writes asked for just before close are committed by close", async () => {
    const schema = db.freshSchema();
    const ledger = postgresLedger({ connectionString: db.url }, { schema });
    await ledger.calls.claim(claimRequest({ key: "opening" }));
    const pending = [ledger.calls.claim(claimRequest({ key: "late-1" })), ledger.calls.claim(claimRequest({ key: "late-2" }))];
    await ledger.close();
    expect((await Promise.all(pending)).every((c) => c.claimed)).toBe(true);
    const again = postgresLedger({ connectionString: db.url }, { schema });
    expect((await again.calls.list({ tenant: "acme" })).map((r) => r.key).sort()).toEqual(["late-1", "late-2", "opening"]);
    await again.close();
  });
});

describe("a gated write on postgres: one statement per durable point", () => {
  const tool = defineTool({ name: "create_ticket", effect: "write", input: z.object({ n: z.number() }), execute: (input) => ({ ticket: input.n }) });
  const use = (id: string, n: number) => ({ type: "tool_use" as const, id, name: "create_ticket", input: { n } });

  it("a fresh key costs its claim and its outcome, nothing else (no clock read); 16 concurrent calls share two commits", async () => {
    const { pool, sent } = loggingPool({ pipeline: true, max: 16 });
    const ledger = await ledgerOn(pool);
    const gate = createGate({ tools: [tool], ledger, onAlert: (a) => { throw new Error(a.message); } });
    try {
      await gate.runToolUses([use("toolu_warm", 0)], { tenant: "acme", task: "t" });
      sent.length = 0;
      const [alone] = await gate.runToolUses([use("toolu_alone", 1)], { tenant: "acme", task: "t" });
      expect(alone).toMatchObject({ is_error: false });
      expect(verbs(sent)).toEqual(["INSERT", "UPDATE"]);
      expect(new Set(sent.map((s) => s.trip)).size).toBe(2);

      sent.length = 0;
      const results = await Promise.all(Array.from({ length: 16 }, (_, i) => gate.runToolUses([use(`toolu_c${i}`, i)], { tenant: "acme", task: "t" })));
      expect(results.every(([r]) => r?.is_error === false)).toBe(true);
      // Nothing but the writes themselves and the transactions around them (no read, no clock): the 16
      // claims share one commit, the 16 outcomes another, one round trip each.
      const sixteen = (verb: string) => Array.from({ length: 16 }, () => verb);
      expect(verbs(sent)).toEqual(["BEGIN", ...sixteen("INSERT"), "COMMIT", "BEGIN", ...sixteen("UPDATE"), "COMMIT"]);
      expect(new Set(sent.map((s) => s.trip)).size).toBe(2);
      // And each statement is still the one prepared once per connection.
      const writes = sent.filter((s) => /^(INSERT|UPDATE)/.test(s.text));
      expect(writes.every((s) => s.name?.startsWith("effectgate_"))).toBe(true);
    } finally {
      await gate.close();
      await ledger.close();
      await pool.end();
    }
  });
});

describe("postgres group commit under a real SIGKILL", () => {
  const agent = fileURLToPath(new URL("./fixtures/pg-batch-agent.mjs", import.meta.url));
  const dir = tempDir("effectgate-pg-group-commit-");
  beforeAll(() => requireBuild());

  it("a process killed in the middle of batches leaves no effect without its committed claim; a fresh process finishes every call once", async () => {
    const schema = db.freshSchema();
    const effects = join(dir, "effects.txt");
    const job = { url: db.url, schema, effects, calls: 120, concurrency: 16 };
    const killed = await runFixture(agent, { ...job, killAfter: 57 }, { cwd: dir, label: "pg batch agent (killed)" });
    expect(killed.signal, killed.stderr).toBe("SIGKILL");
    // The kill came while the process was committing its writes in batches.
    expect(killed.lines).toEqual([{ batches: expect.any(Number) as number }]);
    expect((killed.lines[0] as { batches: number }).batches).toBeGreaterThan(1);
    const lines = readFileSync(effects, "utf8").split("\n").filter((l) => l !== "");
    expect(lines).toHaveLength(57);

    // Every effect the downstream has was claimed and committed before its tool started; every
    // completed record has its effect. (Reads the schema as it was left, before anything recovers it.)
    const ledger = postgresLedger({ connectionString: db.url }, { schema });
    const records = await ledger.calls.list({ tenant: "acme", limit: 1000 });
    await ledger.close();
    const byKey = new Map(records.map((r) => [r.key, r]));
    for (const key of lines) expect(byKey.get(key)?.state, `effect of ${key} has no claim`).toMatch(/^(in_progress|completed)$/);
    for (const r of records.filter((rec) => rec.state === "completed")) expect(lines).toContain(r.key);
    // The kill came while other calls were between claim and outcome (the point of the test).
    expect(records.filter((r) => r.state === "in_progress").length).toBeGreaterThan(0);

    // A fresh process replays all 120 calls: the unrecorded ones are settled by the probe, never run twice.
    const rerun = await runFixture(agent, job, { cwd: dir, label: "pg batch agent (rerun)" });
    expect(rerun.code, rerun.stderr).toBe(0);
    expect(rerun.lines).toMatchObject([{ done: 120 }]);
    const after = readFileSync(effects, "utf8").split("\n").filter((l) => l !== "");
    expect(after).toHaveLength(120);
    expect(new Set(after).size).toBe(120);
  });
});
