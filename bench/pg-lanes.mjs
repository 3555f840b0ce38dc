/**
 * Gated write calls on the PostgreSQL ledger at one concurrency, for profiling (`node --cpu-prof`):
 * a constant-returning `write` tool through gate.runToolUses, a fresh tool_use id per call, on the
 * ledger's own pool (16 connections), in a schema created and dropped here. Prints calls/s and this
 * process's CPU time per call. Never part of the tests.
 *
 *   npm run build && node --cpu-prof bench/pg-lanes.mjs [--concurrency=64] [--calls=4000] [--pg=URL] [--dist=dist]
 */
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const argv = process.argv.slice(2);
const arg = (name) => argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
const CONCURRENCY = Number(arg("concurrency") ?? 64);
const CALLS = Number(arg("calls") ?? 4000);
const URL = arg("pg") ?? process.env.EFFECTGATE_TEST_PG_URL ?? "postgres://postgres@127.0.0.1:5432/test";
const dist = resolve(arg("dist") ?? join(root, "dist"));
const { z } = await import(join(root, "node_modules/zod/index.js"));
const pg = (await import(join(root, "node_modules/pg/lib/index.js"))).default;
const { createGate, defineTool } = await import(join(dist, "index.js"));
const { migratePostgres, postgresLedger } = await import(join(dist, "postgres.js"));

const schema = `eg_lanes_${process.pid}`;
await migratePostgres(URL, schema);
const tool = defineTool({ name: "create_ticket", effect: "write", input: z.object({ title: z.string() }), execute: () => ({ ticketId: "T-1001" }) });
const ledger = postgresLedger({ connectionString: URL, poolSize: 16 }, { schema });
const gate = createGate({ tools: [tool], ledger, onAlert: (a) => { throw new Error(a.message); } });
let n = 0;
const call = async () => {
  const [r] = await gate.runToolUses([{ type: "tool_use", id: `toolu_${n++}`, name: "create_ticket", input: { title: "Printer on fire" } }], { tenant: "bench", task: "lanes" });
  if (r.is_error) throw new Error(r.content);
};
const lanes = async (count) => {
  let left = count;
  await Promise.all(Array.from({ length: CONCURRENCY }, async () => {
    while (left-- > 0) await call();
  }));
};
try {
  await lanes(200);
  const cpu = process.cpuUsage();
  const t0 = performance.now();
  await lanes(CALLS);
  const seconds = (performance.now() - t0) / 1000;
  const used = process.cpuUsage(cpu);
  process.stdout.write(`c=${CONCURRENCY}: ${(CALLS / seconds).toFixed(0)} calls/s, this process ${((used.user + used.system) / CALLS).toFixed(0)} µs CPU per call\n`);
} finally {
  await gate.close();
  await ledger.close();
  const admin = new pg.Client({ connectionString: URL });
  await admin.connect();
  await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  await admin.end();
}
