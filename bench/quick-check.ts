/**
 * What `verify` costs (the operator commands check a ledger file whole before they touch it):
 * opening a SQLite ledger read-only with and without `PRAGMA quick_check`, on ledgers of
 * 10,000 and 100,000 calls the gate recorded, and `PRAGMA integrity_check` for comparison.
 *
 *   npm run bench:check        (or, after a build: npx tsc -p tsconfig.bench.json && node dist-bench/bench/quick-check.js [--calls 10000,100000] [--runs 15])
 */
import { mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { z } from "zod";
import { createGate } from "../src/root/create-gate.js";
import { defineTool } from "../src/core/tool.js";
import { sqliteLedger } from "../src/stores/sqlite/index.js";
import { summarize } from "./lib/stats.js";

const arg = (name: string, fallback: string) => {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? (process.argv[i + 1] ?? fallback) : fallback;
};
const SIZES = arg("calls", "10000,100000").split(",").map(Number);
const RUNS = Number(arg("runs", "15"));

/** A ticket tool with an input and a result about the size of a real one (~150 bytes of JSON each). */
const openTicket = defineTool({
  name: "open_ticket",
  effect: "write",
  input: z.object({ customer: z.string(), title: z.string(), body: z.string() }),
  execute: (input, ctx) => ({ id: `T-${ctx.idempotencyKey.slice(-8)}`, customer: input.customer, status: "open", url: `https://tickets.example/T-${ctx.idempotencyKey.slice(-8)}` }),
});

async function fill(path: string, calls: number): Promise<void> {
  const ledger = sqliteLedger(path, { durability: "process" });
  const gate = createGate({ tools: [openTicket], ledger });
  for (let i = 0; i < calls; i += 200) {
    const uses = Array.from({ length: Math.min(200, calls - i) }, (_, j) => ({
      type: "tool_use", id: `toolu_01${String(i + j).padStart(22, "0")}`, name: "open_ticket",
      input: { customer: `cus_${(i + j) % 977}`, title: `Order ${i + j} arrived damaged`, body: "The parcel was crushed; the customer asks for a replacement." },
    }));
    await gate.runToolUses(uses, { tenant: `tenant-${i % 7}`, task: `task-${Math.floor(i / 200)}` });
  }
  await gate.close();
  await ledger.close();
}

async function timeOpen(path: string, verify: boolean): Promise<number> {
  const started = process.hrtime.bigint();
  const ledger = sqliteLedger(path, { readOnly: true, verify });
  await ledger.calls.list({ limit: 1 });
  await ledger.close();
  return Number(process.hrtime.bigint() - started) / 1e6;
}

function timePragma(path: string, pragma: string): number {
  const db = new Database(path, { readonly: true });
  const started = process.hrtime.bigint();
  db.pragma(pragma);
  const ms = Number(process.hrtime.bigint() - started) / 1e6;
  db.close();
  return ms;
}

const dir = mkdtempSync(join(tmpdir(), "effectgate-bench-check-"));
try {
  process.stdout.write(`| calls | file | open + list, no check | open + quick_check + list | quick_check alone | integrity_check alone |\n|---:|---:|---:|---:|---:|---:|\n`);
  for (const calls of SIZES) {
    const path = join(dir, `ledger-${calls}.db`);
    process.stderr.write(`filling a ledger with ${calls} calls…\n`);
    await fill(path, calls);
    const plain: number[] = [];
    const checked: number[] = [];
    const quick: number[] = [];
    const full: number[] = [];
    await timeOpen(path, true); // warm the page cache: every run below reads a file the OS holds in memory
    for (let run = 0; run < RUNS; run++) {
      plain.push(await timeOpen(path, false));
      checked.push(await timeOpen(path, true));
      quick.push(timePragma(path, "quick_check"));
      full.push(timePragma(path, "integrity_check"));
    }
    const ms = (values: number[]) => `${summarize(Float64Array.from(values)).median.toFixed(1)} ms`;
    const size = `${(statSync(path).size / 1024 / 1024).toFixed(1)} MiB`;
    process.stdout.write(`| ${calls.toLocaleString("en")} | ${size} | ${ms(plain)} | ${ms(checked)} | ${ms(quick)} | ${ms(full)} |\n`);
  }
  process.stdout.write(`\nMedians of ${RUNS} runs each, warm page cache. Node ${process.version}, ${process.platform}.\n`);
} finally {
  rmSync(dir, { recursive: true, force: true });
}
