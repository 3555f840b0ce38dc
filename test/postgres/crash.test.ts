/**
 * A worker process SIGKILLed while it holds leases on a shared PostgreSQL ledger, and two
 * fresh workers recovering after it at the same moment. The crashing worker answers 40 calls
 * at once with killAt("after_execute"): the first tool to return kills it, so one call's
 * effect happened without its outcome being recorded, and the others are left claimed,
 * mid-request or not yet started. The ticket service's own count is the ground truth.
 *
 * No lease waiting: a claim's owner id names its host and pid, so a worker on the same host
 * sees at once that the holder is dead (src/gate/owner.ts).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTicketService, type Ticket, type TicketService } from "../../demo/ticket-service.js";
import type { ToolResultBlock } from "../../src/core/blocks.js";
import type { RecoverySummary } from "../../src/root/create-gate.js";
import { postgresLedger } from "../../src/stores/postgres/index.js";
import { startWorker } from "../support/processes.js";
import { usePostgres } from "../support/pg.js";
import { requireFreshBuild, WORKER } from "./built.js";

const db = usePostgres();
const KEYS = 40;

describe("a worker killed while holding leases on PostgreSQL", () => {
  let service: TicketService;
  beforeAll(async () => {
    requireFreshBuild();
    service = await startTicketService();
  });
  afterAll(() => service?.close());

  it("two other workers recover its calls through probes: exactly one effect per key, the same answers everywhere", async () => {
    const schema = db.freshSchema();
    const job = { url: db.url, schema, service: service.url, keys: KEYS };

    const crashing = startWorker(WORKER, [JSON.stringify({ ...job, mode: "crash" })]);
    const started = (JSON.parse(await crashing.line((l) => l.includes('"started"'))) as { started: { owner: string } }).started;
    const death = await crashing.exited;
    expect(death.stdout, "killAt did not kill the worker").not.toContain('"survived"');
    expect(death, death.stderr).toMatchObject({ signal: "SIGKILL" });

    // What the dead worker left: claims it still holds, one of them with its effect done downstream.
    const ledger = postgresLedger({ connectionString: db.url }, { schema });
    const held = (await ledger.calls.list({ tenant: "acme", state: "in_progress", limit: 1000 })).filter((r) => r.owner === started.owner);
    await ledger.close();
    const ticketed = new Set(service.tickets.map((t) => t.idempotencyKey));
    expect(held.length).toBeGreaterThanOrEqual(1);
    expect(held.filter((r) => ticketed.has(r.key)).length, "the call killed after its effect is still in_progress").toBeGreaterThanOrEqual(1);
    const lease = held[0]!.leaseExpiresAt!;
    expect(lease).toBeGreaterThan(held[0]!.updatedAt); // a live lease: only the dead-pid check lets another worker in now

    const recoverers = [0, KEYS / 2].map((offset) => startWorker(WORKER, [JSON.stringify({ ...job, mode: "recover", offset })]));
    await Promise.all(recoverers.map((w) => w.line((l) => l === "ready")));
    for (const w of recoverers) w.child.stdin.write("go\n");
    const exits = await Promise.all(recoverers.map((w) => w.exited));
    for (const exit of exits) expect(exit, exit.stderr).toMatchObject({ code: 0, signal: null });
    const outputs = exits.map((e) =>
      JSON.parse(e.stdout.trim().split("\n").at(-1)!) as { summary: RecoverySummary; results: ToolResultBlock[]; executed: number });

    // Ground truth: every key has exactly one ticket.
    const perKey = new Map<string, number>();
    for (const t of service.tickets) perKey.set(t.idempotencyKey ?? "?", (perKey.get(t.idempotencyKey ?? "?") ?? 0) + 1);
    expect(perKey.size).toBe(KEYS);
    expect([...perKey.entries()].filter(([, n]) => n !== 1)).toEqual([]);

    // Both recoverers answer every call with that key's one ticket.
    const byId = (results: ToolResultBlock[]) => Object.fromEntries(results.map((r) => [r.tool_use_id, r]));
    for (const output of outputs) {
      expect(output.results.filter((r) => r.is_error)).toEqual([]);
      expect(byId(output.results)).toEqual(byId(outputs[0]!.results));
    }
    for (const block of outputs[0]!.results) {
      const ticket = JSON.parse(block.content) as Ticket;
      expect(ticket.idempotencyKey).toBe(block.tool_use_id);
      expect(service.tickets.find((t) => t.idempotencyKey === block.tool_use_id)).toEqual(ticket);
    }
    // The killed call was settled by a probe, not re-run.
    expect(outputs.reduce((n, o) => n + o.summary.completed, 0)).toBeGreaterThanOrEqual(1);
    console.log(`pg crash: dead worker held ${held.length} claims (${held.filter((r) => ticketed.has(r.key)).length} with the effect done); ` +
      `recovery: ${outputs.map((o) => JSON.stringify({ ...o.summary, notes: o.summary.notes.length, executed: o.executed })).join(" / ")}`);
  });
});
