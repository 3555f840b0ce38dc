/**
 * Intent windows across processes: two real worker processes ask for the same 60 payments, each
 * under tool_use ids of its own (one plan and its re-plan), on one SQLite file and on one
 * PostgreSQL schema. The downstream counts the charges it applied per payment (the amount names
 * it): each payment must be charged exactly once, and every call answered with that charge or told
 * which call it repeats.
 */
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startChargeService, type ChargeService } from "../support/charge-service.js";
import { requireBuild, startWorker } from "../support/processes.js";
import { usePostgres } from "../support/pg.js";
import { tempDir } from "../support/tmp.js";

const WORKER = fileURLToPath(new URL("./fixtures/repeat-worker.mjs", import.meta.url));
const PAYMENTS = 60;
const pg = usePostgres();

async function race(service: ChargeService, ledger: string) {
  const workers = [["a", "asc"], ["b", "desc"]].map(([name, order]) => startWorker(WORKER, [ledger, service.url, String(PAYMENTS), name!, order!]));
  await Promise.all(workers.map((w) => w.line((l) => l === "ready")));
  for (const w of workers) w.child.stdin.write("go\n");
  const outputs = await Promise.all(workers.map(async (w) => JSON.parse(await w.line((l) => l.startsWith("{"))) as { results: { tool_use_id: string; content: string; is_error: boolean }[]; executed: number }));
  const exits = await Promise.all(workers.map((w) => w.exited));
  expect(exits.map((e) => [e.code, e.stderr]).filter(([code]) => code !== 0)).toEqual([]);
  return outputs;
}

function checkOnePerPayment(service: ChargeService, outputs: Awaited<ReturnType<typeof race>>) {
  const perPayment = new Map<number, number>();
  for (const charge of service.charges) perPayment.set(charge.amount, (perPayment.get(charge.amount) ?? 0) + 1);
  expect(service.charges).toHaveLength(PAYMENTS);
  expect([...perPayment.entries()].filter(([, n]) => n !== 1)).toEqual([]);
  expect(outputs[0]!.executed + outputs[1]!.executed).toBe(PAYMENTS);
  for (const { results } of outputs) {
    for (const r of results) {
      const ran = /^\{"id":"ch_\d+"/.test(r.content);
      const repeat = /^(EG_REPEATED_CALL: |\[effectgate: )this send_payment call repeats call toolu_[ab]_\d+/.test(r.content);
      expect(ran || repeat, r.content).toBe(true);
    }
  }
}

describe("repeated payments from two processes at once", () => {
  let service: ChargeService;
  beforeAll(async () => {
    requireBuild();
    service = await startChargeService({ instant: true });
  });
  afterAll(() => service.close());

  it("on one SQLite ledger: each payment charged once", async () => {
    service.charges.length = 0;
    const outputs = await race(service, `sqlite:${join(tempDir(), "repeats.db")}`);
    checkOnePerPayment(service, outputs);
  });

  it("on one PostgreSQL schema: each payment charged once", async () => {
    service.charges.length = 0;
    const outputs = await race(service, `pg:${pg.freshSchema()}:${pg.url}`);
    checkOnePerPayment(service, outputs);
  });
});
