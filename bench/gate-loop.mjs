/**
 * A plain loop of gated writes at concurrency 1, for profilers (`npm run build` first):
 *
 *   node bench/gate-loop.mjs [fsync|process|memory] [calls]
 *   node --cpu-prof --cpu-prof-dir=/tmp/prof bench/gate-loop.mjs process 5000
 *   strace -f -c -e trace=pwrite64,fsync,fdatasync,fcntl,pread64 node bench/gate-loop.mjs fsync 2000
 *
 * It prints the median and mean per call, and nothing else runs in the process, so a CPU profile
 * or a syscall count is the gated writes' (and the 500 warm-up calls').
 */
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const { createGate, defineTool, memoryLedger } = await import(join(root, "dist/index.js"));
const { sqliteLedger } = await import(join(root, "dist/sqlite.js"));
const { z } = await import(join(root, "node_modules/zod/index.js"));

const kind = process.argv[2] ?? "fsync";
const calls = Number(process.argv[3] ?? 5000);
if (!["fsync", "process", "memory"].includes(kind) || !Number.isSafeInteger(calls) || calls < 1) {
  process.stderr.write("usage: node bench/gate-loop.mjs [fsync|process|memory] [calls]\n");
  process.exit(2);
}
const dir = mkdtempSync(join(os.tmpdir(), "effectgate-gate-loop-"));
const file = join(dir, "ledger.db");
const ledger = kind === "memory" ? memoryLedger() : sqliteLedger(file, { durability: kind });
const tool = defineTool({
  name: "create_ticket", effect: "write", input: z.object({ title: z.string(), priority: z.number().int() }),
  execute: () => ({ ticketId: "T-1001", status: "open" }),
});
const gate = createGate({ tools: [tool], ledger, onAlert: () => {} });
const scope = { tenant: "bench-tenant", task: "bench-task" };
const call = async (id) => {
  const [result] = await gate.runToolUses([{ type: "tool_use", id, name: "create_ticket", input: { title: "Printer on fire", priority: 2 } }], scope);
  if (result.is_error) throw new Error(result.content);
};
try {
  for (let i = 0; i < 500; i++) await call(`toolu_warm_${i}`);
  const times = new Float64Array(calls);
  for (let i = 0; i < calls; i++) {
    const t0 = process.hrtime.bigint();
    await call(`toolu_loop_${i}`);
    times[i] = Number(process.hrtime.bigint() - t0) / 1000;
  }
  const sorted = times.sort();
  const mean = sorted.reduce((a, b) => a + b, 0) / calls;
  process.stdout.write(`${kind}: ${calls} gated writes, median ${sorted[calls >> 1].toFixed(1)} µs, mean ${mean.toFixed(1)} µs\n`);
} finally {
  await gate.close();
  await ledger.close();
  rmSync(dir, { recursive: true, force: true });
}

