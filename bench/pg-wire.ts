/**
 * What one gated write sends to PostgreSQL, counted on the wire: the ledger talks to the server
 * through the explorer's TCP proxy (src/testing/explorer/pg-proxy.ts) with a plan that injects
 * nothing and only records each request (startup, BEGIN, COMMIT, each statement a Sync closes).
 * After a warm-up, N fresh-key write calls run one after another (concurrency 1) and then N in 16
 * lanes; it prints requests and connections per call by kind and statement, the figure issue 25
 * asks for to tell round trips from JavaScript.
 *
 *   npm run bench:pg-wire [-- --calls N]
 *
 * URL: EFFECTGATE_BENCH_PG_URL, else EFFECTGATE_TEST_PG_URL, else postgres://postgres@127.0.0.1:5432/test.
 * A random schema is created and dropped.
 */
import { randomBytes } from "node:crypto";
import pg from "pg";
import { z } from "zod";
import { createGate, defineTool, type Scope } from "../src/index.js";
import { migratePostgres, postgresLedger } from "../src/postgres.js";
import { startPgProxy, type ProxiedRequest } from "../src/testing.js";

const argv = process.argv.slice(2);
const CALLS = Number(argv[argv.indexOf("--calls") + 1] ?? 300) || 300;
const url = process.env.EFFECTGATE_BENCH_PG_URL ?? process.env.EFFECTGATE_TEST_PG_URL ?? "postgres://postgres@127.0.0.1:5432/test";
const SCOPE: Scope = { tenant: "wire", task: "wire" };
const tool = defineTool({
  name: "create_ticket",
  effect: "write",
  input: z.object({ title: z.string() }),
  execute: () => ({ ticketId: "T-1" }),
});

/** A statement's shape: its first words, with literals and parameters left out. */
const shape = (r: ProxiedRequest) => (r.kind === "statement" ? r.sql.replace(/\s+/g, " ").trim().slice(0, 70) : r.kind.toUpperCase());

async function main(): Promise<void> {
  const target = new URL(url);
  const seen: ProxiedRequest[] = [];
  let recording = false;
  const proxy = await startPgProxy({
    target: { host: target.hostname || "127.0.0.1", port: Number(target.port || 5432) },
    plan: (r) => void (recording && seen.push(r)),
  });
  const schema = `eg_wire_${randomBytes(4).toString("hex")}`;
  await migratePostgres(url, schema);
  const ledger = postgresLedger({ connectionString: proxy.through(url), poolSize: 16 }, { schema });
  const gate = createGate({ ledger, tools: [tool] });
  let n = 0;
  const call = () => gate.runTool({ id: `w${n}`, name: "create_ticket", input: { title: `t${n++}` } }, SCOPE);
  try {
    for (let i = 0; i < 50; i++) await call();
    for (const concurrency of [1, 16]) {
      seen.length = 0;
      recording = true;
      const started = performance.now();
      let next = 0;
      await Promise.all(Array.from({ length: concurrency }, async () => {
        while (next++ < CALLS) await call();
      }));
      const ms = performance.now() - started;
      recording = false;
      const byShape = new Map<string, number>();
      for (const r of seen) byShape.set(shape(r), (byShape.get(shape(r)) ?? 0) + 1);
      const connections = new Set(seen.map((r) => r.connection)).size;
      console.log(`\nconcurrency ${concurrency}: ${CALLS} gated writes, ${seen.length} requests = ${(seen.length / CALLS).toFixed(2)} per call, ` +
        `${connections} connections, ${(ms * 1000 / CALLS).toFixed(0)} µs per call through the proxy`);
      for (const [s, count] of [...byShape].sort((a, b) => b[1] - a[1])) console.log(`  ${(count / CALLS).toFixed(2).padStart(6)} × ${s}`);
    }
  } finally {
    await gate.close();
    await ledger.close();
    await proxy.close();
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await client.end();
  }
}

await main();
