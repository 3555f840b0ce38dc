import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTicketService, type TicketService } from "../../demo/ticket-service.js";
import { requireBuild, startWorker } from "../support/processes.js";
import { tempDir } from "../support/tmp.js";

const WORKER = fileURLToPath(new URL("./fixtures/race-worker.mjs", import.meta.url));
const KEYS = 200;

describe("concurrent twins across processes", () => {
  let service: TicketService;
  beforeAll(async () => {
    requireBuild();
    service = await startTicketService();
  });
  afterAll(() => service.close());

  it("two processes racing on the same 200 keys on one SQLite ledger: each tool runs once per key, both get the same results", async () => {
    const ledger = join(tempDir(), "race.db");
    const workers = ["asc", "desc"].map((order) => startWorker(WORKER, [ledger, service.url, String(KEYS), order]));
    await Promise.all(workers.map((w) => w.line((l) => l === "ready")));
    for (const w of workers) w.child.stdin.write("go\n");
    const outputs = await Promise.all(workers.map(async (w) => JSON.parse(await w.line((l) => l.startsWith("{")))));
    const exits = await Promise.all(workers.map((w) => w.exited));
    expect(exits.map((e) => e.code)).toEqual([0, 0]);

    const perKey = new Map<string, number>();
    for (const t of service.tickets) perKey.set(t.idempotencyKey ?? "?", (perKey.get(t.idempotencyKey ?? "?") ?? 0) + 1);
    expect(service.tickets).toHaveLength(KEYS);
    expect([...perKey.values()].every((n) => n === 1)).toBe(true);
    // Every call answered, without error, identically in both processes.
    const [a, b] = outputs as { results: { tool_use_id: string; content: string; is_error: boolean }[]; executed: number }[];
    expect(a!.results.filter((r) => r.is_error)).toEqual([]);
    const byId = (o: typeof a) => Object.fromEntries(o!.results.map((r) => [r.tool_use_id, r]));
    expect(Object.keys(byId(a))).toHaveLength(KEYS);
    expect(byId(b)).toEqual(byId(a));
    expect(a!.executed + b!.executed).toBe(KEYS);
    console.log(`race: worker executions ${a!.executed} + ${b!.executed} = ${KEYS}`);
  });
});
