/**
 * Gated write calls per second on PostgreSQL and SQLite at concurrency 1, 8 and 64, each next
 * to the raw cost of the same number of bare INSERT + UPDATE round trips on the same server
 * (or file), same table shape and indexes, in the same run. A gated write of a fresh key is
 * exactly those two statements (claim, then record the outcome), so gated/raw is the price
 * of the gate itself: key, fingerprint, validation, JSON, decoding rows, the lease timer.
 * The raw statements are sent unprepared (they are short and cheap to plan); the ledger
 * prepares its own, and one more set of PostgreSQL rows shows it with preparedStatements: false.
 *
 *   npm run bench:postgres -- [--pg=URL] [--calls=N] [--concurrency=1,8,64] [--only=postgres,sqlite] [--quick] [--out=FILE]
 *
 * URL: --pg, else EFFECTGATE_BENCH_PG_URL, else EFFECTGATE_TEST_PG_URL, else
 * postgres://postgres@127.0.0.1:5432/test. A random schema is created and dropped.
 * Never part of the test suite. Stdout gets the table; progress goes to stderr.
 */
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import pg from "pg";
import { z } from "zod";
import { createGate, defineTool, type Stores, type Scope, type ToolUseBlock } from "../src/index.js";
import { sqliteLedger } from "../src/sqlite.js";
import { migratePostgres, postgresLedger } from "../src/postgres.js";
import { table } from "./lib/stats.js";

const argv = process.argv.slice(2);
const arg = (name: string) => argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
const quick = argv.includes("--quick");
const url = arg("pg") ?? process.env.EFFECTGATE_BENCH_PG_URL ?? process.env.EFFECTGATE_TEST_PG_URL ?? "postgres://postgres@127.0.0.1:5432/test";
const CALLS = Number(arg("calls") ?? (quick ? 300 : 3000));
const WARMUP = quick ? 30 : 200;
const CONCURRENCY: readonly number[] = (arg("concurrency") ?? "1,8,64").split(",").map(Number);
/** Which stores to measure: `postgres`, `sqlite` or both. */
const ONLY = new Set((arg("only") ?? "postgres,sqlite").split(","));
/** Gated and raw runs alternate in this many blocks each. */
const BLOCKS = 10;
/** Connections per PostgreSQL pool: the same for the gated and the raw runs. */
const poolSizeFor = (concurrency: number) => Math.min(concurrency, 16);

const progress = (message: string) => process.stderr.write(`[bench:postgres ${(performance.now() / 1000).toFixed(1)}s] ${message}\n`);

// The workload: a write tool that does nothing but return a constant, so the figures are the gate's and the store's.
const SCOPE: Scope = { tenant: "bench-tenant", task: "bench-task" };
const TICKET = { ticketId: "T-1001", status: "open" } as const;
const createTicket = defineTool({
  name: "create_ticket",
  effect: "write",
  input: z.object({ title: z.string(), priority: z.number().int() }),
  execute: () => TICKET,
});
const INPUT = { title: "Printer on fire", priority: 2 };
const INPUT_JSON = JSON.stringify(INPUT);
const RESULT_JSON = JSON.stringify(TICKET);

/** Runs jobs `from`..`to`-1 on `concurrency` async workers; returns the seconds it took. */
async function timed(from: number, to: number, concurrency: number, job: (i: number) => Promise<void>): Promise<number> {
  let next = from;
  const start = process.hrtime.bigint();
  await Promise.all(Array.from({ length: concurrency }, async () => {
    for (let i = next++; i < to; i = next++) await job(i);
  }));
  return Number(process.hrtime.bigint() - start) / 1e9;
}

/**
 * Warms both up, then alternates blocks of gated calls and raw pairs (BLOCKS of each), so a
 * slow moment of the disk or the server lands on both sides alike. Returns calls per second.
 */
async function compare(concurrency: number, gatedCall: (i: number) => Promise<void>, rawPair: (i: number) => Promise<void>) {
  await timed(-WARMUP, 0, concurrency, gatedCall);
  await timed(-WARMUP, 0, concurrency, rawPair);
  let gatedSeconds = 0;
  let rawSeconds = 0;
  const block = Math.ceil(CALLS / BLOCKS);
  for (let from = 0; from < CALLS; from += block) {
    const to = Math.min(CALLS, from + block);
    gatedSeconds += await timed(from, to, concurrency, gatedCall);
    rawSeconds += await timed(from, to, concurrency, rawPair);
  }
  return { gatedPerSecond: CALLS / gatedSeconds, rawPerSecond: CALLS / rawSeconds };
}

let run = 0;
/** A gate on `ledger` and a function making one gated write call of a fresh key. */
function gatedCalls(ledger: Stores) {
  const gate = createGate({ tools: [createTicket], ledger, onAlert: (a) => { throw new Error(`alert: ${a.message}`); } });
  const tag = `r${run++}`;
  const call = async (i: number) => {
    const block: ToolUseBlock = { type: "tool_use", id: `toolu_${tag}_${i}`, name: "create_ticket", input: INPUT };
    const [result] = await gate.runToolUses([block], SCOPE);
    if (!result || result.is_error) throw new Error(`gated call failed: ${result?.content ?? "no result"}`);
  };
  return { gate, call };
}

interface Row {
  readonly store: string;
  readonly durability: string;
  readonly concurrency: number;
  readonly connections: number | null;
  readonly gatedPerSecond: number;
  readonly rawPerSecond: number;
}

async function postgresRows(durability: "fsync" | "process", preparedStatements = true): Promise<Row[]> {
  const label = preparedStatements ? "postgres" : "postgres, unprepared";
  const schema = `eg_bench_${randomBytes(4).toString("hex")}`;
  const admin = new pg.Pool({ connectionString: url, max: 1 });
  const rows: Row[] = [];
  try {
    await migratePostgres(url, schema);
    // The raw statements write a copy of the ledger's table: same columns, same indexes.
    await admin.query(`CREATE TABLE "${schema}".raw_calls (LIKE "${schema}".calls INCLUDING ALL)`);
    for (const concurrency of CONCURRENCY) {
      const connections = poolSizeFor(concurrency);
      progress(`${label} ${durability} c=${concurrency}`);
      const ledger = postgresLedger({ connectionString: url, poolSize: connections }, { schema, durability, preparedStatements });
      const { gate, call } = gatedCalls(ledger);
      const pool = new pg.Pool({
        connectionString: url, max: connections,
        ...(durability === "process" ? { options: "-c synchronous_commit=off" } : {}),
      });
      const tag = `raw${run++}`;
      const pair = async (i: number) => {
        const key = `toolu_${tag}_${i}`;
        await pool.query(
          `INSERT INTO "${schema}".raw_calls (tenant, key, tool, effect, task, tool_use_id, fingerprint, input, input_redacted, state,
             owner, lease_expires_at, attempts, version, created_at, updated_at)
           VALUES ($1, $2, 'create_ticket', 'write', 'bench-task', $2, 'fp', $3::json, false, 'in_progress', 'w', $4, 1, 1, $5, $5)`,
          [SCOPE.tenant, key, INPUT_JSON, Date.now() + 30_000, Date.now()],
        );
        await pool.query(
          `UPDATE "${schema}".raw_calls SET state = 'completed', result = $3::json, owner = NULL, lease_expires_at = NULL,
             version = version + 1, updated_at = $4 WHERE tenant = $1 AND key = $2 AND version = 1`,
          [SCOPE.tenant, key, RESULT_JSON, Date.now()],
        );
      };
      const figures = await compare(concurrency, call, pair);
      await gate.close();
      await ledger.close();
      await pool.end();
      rows.push({ store: label, durability, concurrency, connections, ...figures });
    }
  } finally {
    await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await admin.end();
  }
  return rows;
}

async function sqliteRows(dir: string, durability: "fsync" | "process"): Promise<Row[]> {
  const rows: Row[] = [];
  const ledgerFile = join(dir, `ledger-${durability}.db`);
  const rawFile = join(dir, `raw-${durability}.db`);
  // The raw file gets the ledger's own schema by being opened once as a ledger.
  const schemaOnly = sqliteLedger(rawFile);
  await schemaOnly.calls.list();
  await schemaOnly.close();
  const raw = new Database(rawFile);
  raw.pragma("journal_mode = WAL");
  raw.pragma(`synchronous = ${durability === "process" ? "NORMAL" : "FULL"}`);
  const insert = raw.prepare(
    `INSERT INTO calls (tenant, key, tool, effect, task, tool_use_id, fingerprint, input, input_redacted, state,
       owner, lease_expires_at, attempts, version, created_at, updated_at)
     VALUES (?, ?, 'create_ticket', 'write', 'bench-task', ?, 'fp', ?, 0, 'in_progress', 'w', ?, 1, 1, ?, ?)`,
  );
  const update = raw.prepare(
    `UPDATE calls SET state = 'completed', result = ?, owner = NULL, lease_expires_at = NULL, version = version + 1, updated_at = ?
     WHERE tenant = ? AND key = ? AND version = 1`,
  );
  for (const concurrency of CONCURRENCY) {
    progress(`sqlite ${durability} c=${concurrency}`);
    const ledger = sqliteLedger(ledgerFile, { durability });
    const { gate, call } = gatedCalls(ledger);
    const tag = `raw${run++}`;
    const pair = async (i: number) => {
      const key = `toolu_${tag}_${i}`;
      const now = Date.now();
      insert.run(SCOPE.tenant, key, key, INPUT_JSON, now + 30_000, now, now);
      update.run(RESULT_JSON, Date.now(), SCOPE.tenant, key);
    };
    const figures = await compare(concurrency, call, pair);
    await gate.close();
    await ledger.close();
    rows.push({ store: "sqlite", durability, concurrency, connections: null, ...figures });
  }
  raw.close();
  return rows;
}

async function serverInfo(): Promise<string> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const settings = await client.query<{ name: string; setting: string }>(
      `SELECT name, setting FROM pg_settings WHERE name IN ('server_version', 'synchronous_commit', 'fsync', 'wal_sync_method', 'max_connections') ORDER BY name`,
    );
    return settings.rows.map((r) => `${r.name}=${r.setting}`).join(", ");
  } finally {
    await client.end();
  }
}

async function main() {
  const where = url.replace(/:[^:@/]*@/, "@");
  const dir = mkdtempSync(join(os.tmpdir(), "effectgate-bench-pg-"));
  const cpus = os.cpus();
  const header = [
    `date      ${new Date().toISOString()}`,
    `node      ${process.version}, ${process.platform} ${process.arch}, ${cpus[0]?.model.trim() ?? "?"} × ${cpus.length}`,
    `postgres  ${where} (${await serverInfo()}); pool: ${CONCURRENCY.map((c) => `c=${c} → ${poolSizeFor(c)}`).join(", ")} connections`,
    `sqlite    files in ${dir} (WAL)`,
    `calls     ${CALLS} gated calls and ${CALLS} raw pairs per row, alternating in ${BLOCKS} blocks each, after ${WARMUP} warm-up each; a gated write of a fresh key = 1 INSERT (claim) + 1 UPDATE (outcome)`,
  ].join("\n");
  const rows: Row[] = [];
  try {
    if (ONLY.has("postgres")) {
      for (const durability of ["fsync", "process"] as const) rows.push(...(await postgresRows(durability)));
      // The gate's statements planned afresh each time (preparedStatements: false, as behind PgBouncer in transaction mode).
      rows.push(...(await postgresRows("fsync", false)));
    }
    if (ONLY.has("sqlite")) for (const durability of ["fsync", "process"] as const) rows.push(...(await sqliteRows(dir, durability)));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  const fmt = (n: number) => n.toFixed(0);
  process.stdout.write(`${header}\n\n`);
  process.stdout.write(`${table(
    ["store", "durability", "concurrency", "gated calls/s", "raw INSERT+UPDATE/s", "gated / raw", "gated µs/call (c=1)"],
    rows.map((r) => [
      r.store, r.durability, String(r.concurrency), fmt(r.gatedPerSecond), fmt(r.rawPerSecond),
      `${((r.gatedPerSecond / r.rawPerSecond) * 100).toFixed(0)} %`, r.concurrency === 1 ? fmt(1e6 / r.gatedPerSecond) : "",
    ]),
  )}\n`);
  const out = arg("out");
  if (out !== undefined) writeFileSync(out, `${JSON.stringify({ header, rows }, null, 2)}\n`);
}

await main();
