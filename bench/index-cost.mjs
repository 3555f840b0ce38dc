/**
 * What the ledger-search indexes (migration 7) cost each write, in figures machine load cannot
 * move: bytes and write syscalls a SQLite ledger's process issues per gated write call, and the
 * WAL records and bytes PostgreSQL writes for one claim and one outcome update (EXPLAIN (ANALYZE,
 * WAL): that statement's own WAL, whatever else the server is doing). Two builds side by side:
 *
 *   npm run build                                   # the "after" build, in dist/
 *   git worktree add /tmp/eg-base <commit> && (cd /tmp/eg-base && npm ci && npm run build)
 *   node bench/index-cost.mjs --base=/tmp/eg-base/dist [--new=dist] [--calls=N] [--pg=URL]
 *
 * Time per call is bench/compare-builds.mjs's job. Never part of the tests.
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import os from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const argv = process.argv.slice(2);
const arg = (name) => argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
const BASE = arg("base");
if (!BASE) {
  process.stderr.write("usage: node bench/index-cost.mjs --base=DIST_DIR [--new=DIST_DIR] [--calls=N] [--pg=URL]\n");
  process.exit(2);
}
const NEW = resolve(arg("new") ?? join(root, "dist"));
const CALLS = Number(arg("calls") ?? 2000);
const PG_URL = arg("pg") ?? process.env.EFFECTGATE_TEST_PG_URL;
const { z } = await import(join(root, "node_modules/zod/index.js"));
const dir = mkdtempSync(join(os.tmpdir(), "effectgate-index-cost-"));
const SCOPE = { tenant: "bench-tenant", task: "bench-task" };

/** This process's write syscalls and the bytes they passed (Linux /proc/self/io: deterministic, unlike disk timings). */
function written() {
  const io = Object.fromEntries(readFileSync("/proc/self/io", "utf8").trim().split("\n").map((l) => l.split(": ")).map(([k, v]) => [k, Number(v)]));
  return { bytes: io.wchar, syscalls: io.syscw };
}

async function sqliteCost(label, dist, durability) {
  const index = await import(join(resolve(dist), "index.js"));
  const sqlite = await import(join(resolve(dist), "sqlite.js"));
  const tool = index.defineTool({ name: "create_ticket", effect: "write", input: z.object({ title: z.string() }), execute: () => ({ ticketId: "T-1001" }) });
  const ledger = sqlite.sqliteLedger(join(dir, `${label}-${durability}.db`), { durability });
  const gate = index.createGate({ tools: [tool], ledger, onAlert: (a) => { throw new Error(a.message); } });
  const run = async (from, to) => {
    for (let i = from; i < to; i++) {
      const [r] = await gate.runToolUses([{ type: "tool_use", id: `toolu_${i}`, name: "create_ticket", input: { title: "Printer on fire" } }], SCOPE);
      if (r.is_error) throw new Error(r.content);
    }
  };
  await run(0, 200); // warm-up: the file, its first pages and the first WAL checkpoint
  const before = written();
  await run(200, 200 + CALLS);
  const after = written();
  await gate.close();
  await ledger.close();
  return { bytes: (after.bytes - before.bytes) / CALLS, syscalls: (after.syscalls - before.syscalls) / CALLS };
}

/** The WAL of one claim and one outcome update, each through EXPLAIN (ANALYZE, WAL), on a schema migrated by `dist`. */
async function postgresCost(label, dist, pg) {
  const postgres = await import(join(resolve(dist), "postgres.js"));
  const { callStatements, updateValues } = await import(join(resolve(dist), "stores/sql/call-statements.js"));
  const { postgresDialect } = await import(join(resolve(dist), "stores/postgres/statements.js"));
  const { positional } = await import(join(resolve(dist), "stores/sql/dialect.js"));
  const schema = `eg_index_cost_${label}_${process.pid}`;
  await postgres.migratePostgres(PG_URL, schema);
  const sql = callStatements(postgresDialect(`"${schema}"`, "fsync"));
  const client = new pg.Client({ connectionString: PG_URL });
  await client.connect();
  const wal = async (compiled, values) => {
    const { rows } = await client.query(`EXPLAIN (ANALYZE, WAL, FORMAT JSON) ${compiled.text}`, positional(compiled, values));
    const plan = rows[0]["QUERY PLAN"][0].Plan;
    return { records: plan["WAL Records"], bytes: plan["WAL Bytes"] };
  };
  const totals = { claim: { records: 0, bytes: 0 }, update: { records: 0, bytes: 0 } };
  const n = 200;
  try {
    for (let i = 0; i < 50 + n; i++) {
      const key = `toolu_${i}`;
      const claim = await wal(sql.claim, {
        tenant: SCOPE.tenant, key, tool: "create_ticket", effect: "write", task: SCOPE.task, tool_use_id: key, fingerprint: "fp",
        input: JSON.stringify({ title: "Printer on fire" }), input_redacted: false, owner: "bench", lease_ms: 60_000, fence: null, claim_token: `t${i}`,
      });
      const update = await wal(sql.update.completed, updateValues(SCOPE.tenant, key, 1, { state: "completed", result: { ticketId: "T-1001" }, owner: null }));
      if (i < 50) continue; // warm-up: first pages of the table and each index
      for (const [k, v] of [["claim", claim], ["update", update]]) {
        totals[k].records += v.records / n;
        totals[k].bytes += v.bytes / n;
      }
    }
  } finally {
    await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await client.end();
  }
  return totals;
}

const lines = [
  `date     ${new Date().toISOString()}`,
  `node     ${process.version}`,
  `base     ${resolve(BASE)}`,
  `new      ${NEW}`,
  `calls    ${CALLS} (SQLite, after 200 warm-up calls); 200 claim + update pairs (PostgreSQL, after 50)`,
  "",
  "| series | unit | before | after | after − before |",
  "|---|---|---:|---:|---:|",
];
const row = (series, unit, before, after, digits = 1) =>
  lines.push(`| ${series} | ${unit} | ${before.toFixed(digits)} | ${after.toFixed(digits)} | ${(after - before >= 0 ? "+" : "")}${(after - before).toFixed(digits)} |`);
for (const durability of ["fsync", "process"]) {
  const before = await sqliteCost("base", BASE, durability);
  const after = await sqliteCost("new", NEW, durability);
  row(`sqlite ${durability}: bytes written per gated call`, "bytes", before.bytes, after.bytes, 0);
  row(`sqlite ${durability}: write syscalls per gated call`, "syscalls", before.syscalls, after.syscalls, 2);
}
if (PG_URL) {
  const pg = (await import(join(root, "node_modules/pg/lib/index.js"))).default;
  const before = await postgresCost("base", BASE, pg);
  const after = await postgresCost("new", NEW, pg);
  for (const k of ["claim", "update"]) {
    row(`postgres ${k}: WAL records`, "records", before[k].records, after[k].records, 2);
    row(`postgres ${k}: WAL bytes`, "bytes", before[k].bytes, after[k].bytes, 0);
  }
}
rmSync(dir, { recursive: true, force: true });
process.stdout.write(`${lines.join("\n")}\n`);
