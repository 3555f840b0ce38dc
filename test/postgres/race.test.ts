/**
 * A fleet of worker PROCESSES racing on the same keys against one PostgreSQL ledger. The
 * ticket service (a real HTTP server here, in the parent) counts every ticket it creates:
 * that count is the ground truth. The workers start together (each prints "ready", then all
 * get "go"), walk the keys from different offsets so they collide everywhere, and migrate the
 * new schema themselves at the same moment.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTicketService, type Ticket, type TicketService } from "../../demo/ticket-service.js";
import type { ToolResultBlock } from "../../src/core/blocks.js";
import { startWorker } from "../support/processes.js";
import { usePostgres } from "../support/pg.js";
import { requireFreshBuild, WORKER } from "./built.js";

const db = usePostgres();
const WORKERS = 8;
const KEYS = 500;

describe("a fleet of worker processes on one PostgreSQL ledger", () => {
  let service: TicketService;
  beforeAll(async () => {
    requireFreshBuild();
    service = await startTicketService();
  });
  afterAll(() => service?.close());

  it(`${WORKERS} processes racing on the same ${KEYS} keys: each tool runs once per key, every worker gets the same results`, { timeout: 90_000 }, async () => {
    const schema = db.freshSchema();
    const workers = Array.from({ length: WORKERS }, (_, i) =>
      startWorker(WORKER, [JSON.stringify({ mode: "race", url: db.url, schema, service: service.url, keys: KEYS, offset: Math.floor((i * KEYS) / WORKERS) })]));
    await Promise.all(workers.map((w) => w.line((l) => l === "ready")));
    for (const w of workers) w.child.stdin.write("go\n");
    const exits = await Promise.all(workers.map((w) => w.exited));
    for (const exit of exits) expect(exit, exit.stderr).toMatchObject({ code: 0, signal: null });
    const outputs = exits.map((e) => JSON.parse(e.stdout.trim().split("\n").at(-1)!) as { results: ToolResultBlock[]; executed: number });

    // Ground truth: one ticket per key, no more, no fewer.
    const perKey = new Map<string, number>();
    for (const t of service.tickets) perKey.set(t.idempotencyKey ?? "?", (perKey.get(t.idempotencyKey ?? "?") ?? 0) + 1);
    expect(service.tickets).toHaveLength(KEYS);
    expect(perKey.size).toBe(KEYS);
    expect([...perKey.values()].every((n) => n === 1)).toBe(true);

    // Every worker answered every call, without error, with the same content, naming that key's ticket.
    const byId = (results: ToolResultBlock[]) => Object.fromEntries(results.map((r) => [r.tool_use_id, r]));
    const first = byId(outputs[0]!.results);
    expect(Object.keys(first)).toHaveLength(KEYS);
    for (const output of outputs) {
      expect(output.results.filter((r) => r.is_error)).toEqual([]);
      expect(byId(output.results)).toEqual(first);
    }
    for (const [id, block] of Object.entries(first)) expect((JSON.parse(block.content) as Ticket).idempotencyKey).toBe(id);
    expect(outputs.reduce((n, o) => n + o.executed, 0)).toBe(KEYS);
    console.log(`pg race: executions per worker ${outputs.map((o) => o.executed).join(" + ")} = ${KEYS}`);
  });
});
