/**
 * Memory per in-flight call (`npm run bench:burst`): a burst of 10,000 gated write calls, all in
 * flight at once (each tool waits on one shared gate that opens only when every call has started
 * its tool), on the SQLite ledger and on the memory ledger. The heap is measured after a full GC
 * before the burst, with all calls in flight, and after they all returned: (in flight − before) /
 * calls is what one in-flight call holds; after − before is what the finished burst left behind.
 * Done three times on one gate, to show the heap does not grow from burst to burst.
 *
 *   npm run bench:burst -- [--calls=N] [--out=FILE]      (node --expose-gc)
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const argv = process.argv.slice(2);
const arg = (name) => argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
const CALLS = Number(arg("calls") ?? 10_000);
if (typeof globalThis.gc !== "function") {
  process.stderr.write("run with node --expose-gc (npm run bench:burst does)\n");
  process.exit(2);
}
const { createGate, defineTool, memoryLedger } = await import(join(root, "dist/index.js"));
const { sqliteLedger } = await import(join(root, "dist/sqlite.js"));
const { z } = await import(join(root, "node_modules/zod/index.js"));
const dir = mkdtempSync(join(os.tmpdir(), "effectgate-burst-"));

const heap = async () => {
  for (let i = 0; i < 3; i++) {
    globalThis.gc();
    await new Promise((r) => setImmediate(r));
  }
  return process.memoryUsage().heapUsed;
};

async function bursts(name, ledger) {
  let started = 0;
  let open;
  let allStarted;
  const tool = defineTool({
    name: "create_ticket", effect: "write", input: z.object({ title: z.string(), n: z.number() }),
    async execute(input) {
      if (++started === CALLS) allStarted();
      await open;
      return { ticketId: `T-${input.n}` };
    },
  });
  const gate = createGate({ tools: [tool], ledger, leaseMs: 600_000 });
  const rows = [];
  for (let round = 0; round < 3; round++) {
    started = 0;
    let release;
    open = new Promise((r) => (release = r));
    const everyoneIn = new Promise((r) => (allStarted = r));
    const before = await heap();
    const calls = Array.from({ length: CALLS }, (_, i) =>
      gate.runToolUses([{ type: "tool_use", id: `toolu_${round}_${i}`, name: "create_ticket", input: { title: "Printer on fire", n: i } }], { tenant: "acme", task: "burst" }));
    await everyoneIn;
    const inFlight = await heap();
    release();
    const results = await Promise.all(calls);
    if (results.some(([r]) => r.is_error)) throw new Error(results.find(([r]) => r.is_error)[0].content);
    results.length = 0;
    const after = await heap();
    rows.push({ ledger: name, round: round + 1, calls: CALLS, beforeMiB: before / 2 ** 20, inFlightMiB: inFlight / 2 ** 20, afterMiB: after / 2 ** 20, bytesPerInFlightCall: (inFlight - before) / CALLS });
    process.stderr.write(`[burst] ${name} round ${round + 1}: ${((inFlight - before) / CALLS / 1024).toFixed(2)} KiB per in-flight call\n`);
  }
  await gate.close();
  await ledger.close();
  return rows;
}

try {
  const rows = [...(await bursts("memory", memoryLedger())), ...(await bursts("sqlite (fsync)", sqliteLedger(join(dir, "burst.db"))))];
  const env = { date: new Date().toISOString(), node: process.version, calls: CALLS, load: os.loadavg().map((l) => l.toFixed(2)).join(" / ") };
  process.stdout.write(`${JSON.stringify(env)}\n\n| ledger | burst | heap before | heap, ${CALLS.toLocaleString("en-US")} calls in flight | heap after | per in-flight call |\n|---|---:|---:|---:|---:|---:|\n`);
  for (const r of rows) {
    process.stdout.write(`| ${r.ledger} | ${r.round} | ${r.beforeMiB.toFixed(1)} MiB | ${r.inFlightMiB.toFixed(1)} MiB | ${r.afterMiB.toFixed(1)} MiB | ${(r.bytesPerInFlightCall / 1024).toFixed(1)} KiB |\n`);
  }
  const out = arg("out");
  if (out) writeFileSync(out, `${JSON.stringify({ env, rows }, null, 2)}\n`);
} finally {
  rmSync(dir, { recursive: true, force: true });
}
