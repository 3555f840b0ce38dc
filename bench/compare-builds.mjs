/**
 * Before and after in ONE run: two builds of effectgate (a `dist/` each) measured side by side,
 * block by block, so machine load lands on both alike and the ratios mean something on a shared VM.
 *
 *   npm run build                                   # the "after" build, in dist/
 *   git worktree add /tmp/eg-base <commit> && (cd /tmp/eg-base && npm ci && npm run build)
 *   node bench/compare-builds.mjs --base=/tmp/eg-base/dist [--new=dist] [--calls=N] [--pg=URL] [--only=postgres,sqlite,memory] [--out=FILE]
 *
 * Per build: a gated write (a constant-returning `write` tool through gate.runToolUses, a fresh
 * tool_use id per call) on SQLite (durability fsync and process) and on the memory ledger, p50 per
 * call at concurrency 1 and calls/s at 16; on PostgreSQL (--pg, else EFFECTGATE_TEST_PG_URL) p50
 * at 1 and calls/s at 16 and 64, next to bare INSERT + UPDATE pairs at 64 on the same server. The
 * disk floor (two appends + fdatasync) is measured in the same blocks. Never part of the tests.
 */
import { closeSync, fdatasyncSync, mkdtempSync, openSync, rmSync, writeFileSync, writeSync } from "node:fs";
import os from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const argv = process.argv.slice(2);
const arg = (name) => argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
const BASE = arg("base");
if (!BASE) {
  process.stderr.write("usage: node bench/compare-builds.mjs --base=DIST_DIR [--new=DIST_DIR] [--calls=N] [--pg=URL] [--only=postgres,sqlite,memory]\n");
  process.exit(2);
}
const NEW = resolve(arg("new") ?? join(root, "dist"));
const CALLS = Number(arg("calls") ?? 1000);
const BLOCKS = 10;
const ONLY = new Set((arg("only") ?? "sqlite,memory,postgres").split(","));
const PG_URL = ONLY.has("postgres") ? arg("pg") ?? process.env.EFFECTGATE_TEST_PG_URL : undefined;
const progress = (m) => process.stderr.write(`[compare ${(performance.now() / 1000).toFixed(1)}s] ${m}\n`);
const { z } = await import(join(root, "node_modules/zod/index.js"));
const pg = PG_URL ? (await import(join(root, "node_modules/pg/lib/index.js"))).default : undefined;
const dir = mkdtempSync(join(os.tmpdir(), "effectgate-compare-"));
const SCOPE = { tenant: "bench-tenant", task: "bench-task" };
const INPUT = { title: "Printer on fire", priority: 2 };

async function loadBuild(label, dist) {
  const index = await import(join(resolve(dist), "index.js"));
  const sqlite = await import(join(resolve(dist), "sqlite.js"));
  const postgres = PG_URL ? await import(join(resolve(dist), "postgres.js")) : undefined;
  const tool = index.defineTool({ name: "create_ticket", effect: "write", input: z.object({ title: z.string(), priority: z.number().int() }), execute: () => ({ ticketId: "T-1001", status: "open" }) });
  let n = 0;
  const gated = (ledger) => {
    const gate = index.createGate({ tools: [tool], ledger, onAlert: (a) => { throw new Error(a.message); } });
    const tag = `${label}${n++}`;
    let i = 0;
    return {
      call: async () => {
        const [r] = await gate.runToolUses([{ type: "tool_use", id: `toolu_${tag}_${i++}`, name: "create_ticket", input: INPUT }], SCOPE);
        if (r.is_error) throw new Error(r.content);
      },
      close: async () => {
        await gate.close();
        await ledger.close();
      },
    };
  };
  const targets = {
    "sqlite fsync": gated(sqlite.sqliteLedger(join(dir, `${label}-fsync.db`))),
    "sqlite process": gated(sqlite.sqliteLedger(join(dir, `${label}-process.db`), { durability: "process" })),
    memory: gated(index.memoryLedger()),
  };
  if (postgres) {
    const schema = `eg_compare_${label}_${process.pid}`;
    await postgres.migratePostgres(PG_URL, schema);
    targets.postgres = gated(postgres.postgresLedger({ connectionString: PG_URL, poolSize: 16 }, { schema }));
    targets.postgres.schema = schema;
  }
  return { label, dist, targets };
}

/** `count` calls on `lanes` async workers; returns per-call ns (lanes = 1) and the elapsed seconds. */
async function run(call, count, lanes) {
  const times = [];
  let left = count;
  const t0 = process.hrtime.bigint();
  await Promise.all(Array.from({ length: lanes }, async () => {
    while (left-- > 0) {
      const s = process.hrtime.bigint();
      await call();
      if (lanes === 1) times.push(Number(process.hrtime.bigint() - s));
    }
  }));
  return { times, seconds: Number(process.hrtime.bigint() - t0) / 1e9 };
}

const p50 = (ns) => {
  const s = [...ns].sort((a, b) => a - b);
  return s[Math.ceil(s.length / 2) - 1] / 1000;
};

async function main() {
  const builds = [await loadBuild("base", BASE), await loadBuild("new", NEW)];
  const fd = openSync(join(dir, "floor.dat"), "a");
  const line = Buffer.alloc(128, 0x61);
  const floor = async () => {
    writeSync(fd, line);
    fdatasyncSync(fd);
    writeSync(fd, line);
    fdatasyncSync(fd);
  };
  let rawPool;
  let rawPair;
  if (pg) {
    const schema = builds[1].targets.postgres.schema;
    rawPool = new pg.Pool({ connectionString: PG_URL, max: 16 });
    await rawPool.query(`CREATE TABLE "${schema}".raw_calls (LIKE "${schema}".calls INCLUDING ALL)`);
    let k = 0;
    rawPair = async () => {
      const key = `raw_${k++}`;
      await rawPool.query(`INSERT INTO "${schema}".raw_calls (tenant, key, tool, effect, task, tool_use_id, fingerprint, input, input_redacted, state, owner, lease_expires_at, attempts, version, created_at, updated_at)
        VALUES ($1, $2, 'create_ticket', 'write', 'bench-task', $2, 'fp', $3::json, false, 'in_progress', 'w', $4, 1, 1, $5, $5)`, [SCOPE.tenant, key, JSON.stringify(INPUT), Date.now() + 30000, Date.now()]);
      await rawPool.query(`UPDATE "${schema}".raw_calls SET state = 'completed', result = $3::json, owner = NULL, lease_expires_at = NULL, version = version + 1, updated_at = $4
        WHERE tenant = $1 AND key = $2 AND version = 1`, [SCOPE.tenant, key, JSON.stringify({ ticketId: "T-1001" }), Date.now()]);
    };
  }
  // Every series: [name, lanes, function per build (or one shared), calls per block].
  const per = Math.ceil(CALLS / BLOCKS);
  const series = [["2 × (append 128 B + fdatasync), bare", 1, () => floor, per]];
  const targets = [...(ONLY.has("sqlite") ? ["sqlite fsync", "sqlite process"] : []), ...(ONLY.has("memory") ? ["memory"] : []), ...(pg ? ["postgres"] : [])];
  for (const target of targets) {
    const factor = target === "memory" ? 10 : target === "sqlite process" ? 3 : 1;
    series.push([`${target} c=1`, 1, (b) => b.targets[target].call, per * factor]);
    series.push([`${target} c=16`, 16, (b) => b.targets[target].call, per * factor * 2]);
    if (target === "postgres") series.push([`${target} c=64`, 64, (b) => b.targets[target].call, per * 2]);
  }
  if (pg) series.push(["postgres bare INSERT+UPDATE c=64", 64, () => rawPair, per * 2]);
  const acc = new Map();
  const key = (s, b) => `${s}|${b}`;
  for (const [name, lanes, fnOf, count] of series) {
    const shared = fnOf(builds[0]) === fnOf(builds[1]);
    for (const b of shared ? [builds[0]] : builds) {
      await run(fnOf(b), Math.min(100, count), lanes); // warm-up
      acc.set(key(name, b.label), { times: [], seconds: 0, calls: 0, lanes, shared });
    }
  }
  for (let block = 0; block < BLOCKS; block++) {
    progress(`block ${block + 1}/${BLOCKS}`);
    for (const [name, lanes, fnOf, count] of series) {
      const shared = fnOf(builds[0]) === fnOf(builds[1]);
      const order = shared ? [builds[0]] : block % 2 === 0 ? builds : [...builds].reverse();
      for (const b of order) {
        const r = await run(fnOf(b), count, lanes);
        const a = acc.get(key(name, b.label));
        a.times.push(...r.times);
        a.seconds += r.seconds;
        a.calls += count;
      }
    }
  }
  const fmt = (n) => (n >= 100 ? n.toFixed(0) : n.toFixed(1));
  const floorP50 = p50(acc.get(key(series[0][0], "base")).times);
  const rows = [];
  for (const [name, lanes, fnOf] of series) {
    const shared = fnOf(builds[0]) === fnOf(builds[1]);
    const figure = (label) => {
      const a = acc.get(key(name, label));
      return lanes === 1 ? p50(a.times) : a.calls / a.seconds;
    };
    const before = figure("base");
    const after = shared ? before : figure("new");
    rows.push({ series: name, unit: lanes === 1 ? "p50 µs per call" : "calls/s", before, after, improvement: lanes === 1 ? before / after : after / before, afterOverFloor: lanes === 1 ? after / floorP50 : null });
  }
  const env = { date: new Date().toISOString(), node: process.version, cpus: `${os.cpus()[0]?.model.trim()} × ${os.cpus().length}`, load: os.loadavg().map((l) => l.toFixed(2)).join(" / "), base: resolve(BASE), new: NEW, calls: CALLS, blocks: BLOCKS, postgres: PG_URL ? PG_URL.replace(/:[^:@/]*@/, "@") : "not measured" };
  process.stdout.write(`${Object.entries(env).map(([k, v]) => `${k.padEnd(8)} ${v}`).join("\n")}\n\n`);
  process.stdout.write(`| series | unit | before | after | after vs before | after ÷ 2 fdatasyncs |\n|---|---|---:|---:|---:|---:|\n`);
  for (const r of rows) process.stdout.write(`| ${r.series} | ${r.unit} | ${fmt(r.before)} | ${fmt(r.after)} | ${r.improvement.toFixed(2)}× | ${r.afterOverFloor === null ? "" : `${r.afterOverFloor.toFixed(2)}×`} |\n`);
  const out = arg("out");
  if (out) writeFileSync(out, `${JSON.stringify({ env, rows }, null, 2)}\n`);
  closeSync(fd);
  for (const b of builds) {
    for (const t of Object.values(b.targets)) await t.close();
  }
  if (rawPool) {
    for (const b of builds) if (b.targets.postgres) await rawPool.query(`DROP SCHEMA IF EXISTS "${b.targets.postgres.schema}" CASCADE`);
    await rawPool.end();
  }
}

try {
  await main();
} finally {
  rmSync(dir, { recursive: true, force: true });
}
