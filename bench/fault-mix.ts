/**
 * Effects doubled under the fault mix: the same 1,000 seeded charge calls against the
 * simulated payments service (cut connections, lost replies, completions slower than the
 * client timeout), once through a naive client that retries every error with a fresh
 * request, once through effectgate. Ground truth: the charges the service applied.
 *
 *   npx tsc -p tsconfig.bench.json && node dist-bench/bench/fault-mix.js [--seed N] [--calls N]
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createGate } from "../src/root/create-gate.js";
import { sqliteLedger } from "../src/stores/sqlite/index.js";
import { startPaymentService, type PaymentService } from "../demo/payment-service.js";
import { chargeCardTool } from "../demo/payment-tool.js";
import { seededRandom } from "../demo/random.js";

const arg = (name: string, fallback: number) => {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? Number(process.argv[i + 1]) : fallback;
};
const SEED = arg("seed", 20261130);
const CALLS = arg("calls", 1000);
const BATCH = 25;
const TIMEOUT_MS = 50;
const FAULTS = { drop: 0.05, lost: 0.08, slow: 0.04, latency: 0.2 };

interface Row { way: string; calls: number; applied: number; doubled: number; extra: number; missing: number; agentErrors: number; wallMs: number }

function workload() {
  const rng = seededRandom(SEED);
  return Array.from({ length: CALLS }, (_, i) => ({ id: `call_${i}`, customer: `cus_${i % 97}`, amount: 1 + Math.floor(rng() * 500) }));
}

/** Ground truth per call: how many charges the service applied for it. */
function tally(service: PaymentService, callOf: (key: string) => string): Map<string, number> {
  const perCall = new Map<string, number>();
  for (const c of service.charges) perCall.set(callOf(c.key), (perCall.get(callOf(c.key)) ?? 0) + 1);
  return perCall;
}

function row(way: string, service: PaymentService, callOf: (key: string) => string, successes: Set<string>, agentErrors: number, wallMs: number): Row {
  const perCall = tally(service, callOf);
  const counts = [...perCall.values()];
  return {
    way, calls: CALLS, applied: service.charges.length,
    doubled: counts.filter((n) => n > 1).length,
    extra: counts.reduce((s, n) => s + Math.max(0, n - 1), 0),
    // The agent was told "done" but nothing was applied.
    missing: [...successes].filter((id) => !perCall.has(id)).length,
    agentErrors, wallMs,
  };
}

/** The common agent-loop client: retry any failure up to 3 times, each try a new request (a new random key). */
async function naive(): Promise<Row> {
  const service = await startPaymentService({ seed: SEED, faults: FAULTS, slowMs: 120 });
  const started = Date.now();
  const successes = new Set<string>();
  let errors = 0;
  const one = async (call: ReturnType<typeof workload>[number]) => {
    for (let attempt = 1; attempt <= 3; attempt++) {
      try {
        const res = await fetch(`${service.url}/charges`, {
          method: "POST",
          headers: { "content-type": "application/json", "idempotency-key": `${call.id}#${attempt}-${Math.random()}` },
          body: JSON.stringify({ customer: call.customer, amount: call.amount }),
          signal: AbortSignal.timeout(TIMEOUT_MS),
        });
        if (res.ok) {
          successes.add(call.id);
          return;
        }
      } catch {
        // timed out or cut: try again
      }
    }
    errors++;
  };
  const calls = workload();
  for (let i = 0; i < calls.length; i += BATCH) await Promise.all(calls.slice(i, i + BATCH).map(one));
  const result = row("naive retry (fresh request each try)", service, (key) => key.split("#")[0] ?? key, successes, errors, Date.now() - started);
  await service.close();
  return result;
}

async function gated(): Promise<Row> {
  const service = await startPaymentService({ seed: SEED, faults: FAULTS, slowMs: 120 });
  const dir = mkdtempSync(join(tmpdir(), "effectgate-faultmix-"));
  const gate = createGate({
    ledger: sqliteLedger(join(dir, "ledger.db")),
    tools: [chargeCardTool(service.url)],
    timeoutMs: TIMEOUT_MS,
    probe: { attempts: 10, initialDelayMs: 10, maxDelayMs: 40 },
    random: seededRandom(SEED),
    onAlert: () => {},
  });
  const started = Date.now();
  const calls = workload().map((c) => ({ type: "tool_use", id: c.id, name: "charge_card", input: { customer: c.customer, amount: c.amount } }));
  const successes = new Set<string>();
  let errors = 0;
  for (let i = 0; i < calls.length; i += BATCH) {
    for (const r of await gate.runToolUses(calls.slice(i, i + BATCH), { tenant: "bench", task: "fault-mix" })) {
      if (r.is_error) errors++;
      else successes.add(r.tool_use_id);
    }
  }
  await gate.drain();
  const result = row("effectgate (claim, probe, same key)", service, (key) => key, successes, errors, Date.now() - started);
  await gate.ledger.close();
  await service.close();
  rmSync(dir, { recursive: true, force: true });
  return result;
}

const rows = [await naive(), await gated()];
console.log(`fault mix: seed ${SEED}, ${CALLS} calls, client timeout ${TIMEOUT_MS} ms, faults ${JSON.stringify(FAULTS)}, slow completions 120 ms\n`);
console.log("way                                     applied  calls doubled  extra effects  told done, not applied  agent saw error  wall ms");
for (const r of rows) {
  console.log(`${r.way.padEnd(40)}${String(r.applied).padStart(7)}${String(r.doubled).padStart(15)}${String(r.extra).padStart(15)}${String(r.missing).padStart(24)}${String(r.agentErrors).padStart(17)}${String(r.wallMs).padStart(9)}`);
}
