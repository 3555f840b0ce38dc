/**
 * The connection to PostgreSQL dropped under a ledger transaction (issue 23, "the guarantee at the
 * seams"). A real TCP proxy (src/testing/explorer/pg-proxy.ts) sits between the gate and the real
 * PostgreSQL and cuts the connection at a chosen request: under a group-commit batch of several
 * concurrent calls, and under a claim-unless-repeated transaction (a tool with a `repeats` policy).
 *
 * node-postgres's pool takes its own 'error' listener off a client while it is checked out, so a
 * socket that ends under a batch emitted an unhandled 'error' and ended the process: effects
 * applied, no answer, no alert, records left in_progress. Here the process must stay up (no
 * uncaught exception while each scenario runs), every call gets an honest answer (never "nothing
 * was executed" once its tool ran), an alert names each outcome that could not be recorded, and
 * once the connection is good again a replay settles every call with one effect per key downstream.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import type { ProbeResult } from "../../src/core/hooks.js";
import type { RepeatPolicy } from "../../src/core/repeats.js";
import { defineTool } from "../../src/core/tool.js";
import type { Alert } from "../../src/gate/alerts.js";
import { createGate } from "../../src/root/create-gate.js";
import { postgresLedger } from "../../src/stores/postgres/index.js";
import { startPgProxy, type PgProxy, type ProxiedRequest, type ProxyFault } from "../../src/testing/explorer/pg-proxy.js";
import { usePostgres } from "../support/pg.js";

const db = usePostgres();
const scope = { tenant: "acme", task: "drop" };

/** Uncaught exceptions and unhandled rejections while a scenario runs: a store fault must never be one. */
function watchProcess() {
  const seen: unknown[] = [];
  const onError = (err: unknown) => void seen.push(err);
  process.on("uncaughtException", onError);
  process.on("unhandledRejection", onError);
  return {
    seen,
    stop() {
      process.off("uncaughtException", onError);
      process.off("unhandledRejection", onError);
    },
  };
}

/** A downstream that applies each key once (its own ledger of effects) and counts every request. */
function downstream() {
  const effects = new Map<string, number>();
  const requests = new Map<string, number>();
  return {
    effects,
    requests,
    apply(key: string) {
      requests.set(key, (requests.get(key) ?? 0) + 1);
      if (!effects.has(key)) effects.set(key, 1);
      return { ticket: `T-${key}` };
    },
    probe: (key: string): ProbeResult<{ ticket: string }> => (effects.has(key) ? { status: "done", result: { ticket: `T-${key}` } } : { status: "absent" }),
  };
}

function deferred() {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}

let proxy: PgProxy;
beforeAll(async () => {
  const target = new URL(db.url);
  proxy = await startPgProxy({ target: { host: target.hostname, port: Number(target.port || 5432) } });
});
afterAll(() => proxy?.close());
afterEach(() => proxy.setPlan(undefined));

/** A plan that meets the first request matching `when` with `fault`, once. */
function once(when: (r: ProxiedRequest) => boolean, fault: ProxyFault) {
  let done = false;
  return (r: ProxiedRequest) => {
    if (done || !when(r)) return undefined;
    done = true;
    return fault;
  };
}

const uses = (prefix: string, n: number) => Array.from({ length: n }, (_, i) => ({
  type: "tool_use" as const, id: `toolu_${prefix}_${i}`, name: "open_ticket", input: { title: `${prefix} ${i}` },
}));

describe("the connection to PostgreSQL dropped under a group-commit batch", () => {
  for (const fault of [{ kind: "drop_reply" }, { kind: "cut" }] as const) {
    it(`a batch of outcomes (${fault.kind === "cut" ? "cut before its COMMIT reached the server" : "committed, its reply dropped"}): honest answers, an alert each, one effect per key`, async () => {
      const N = 4;
      const service = downstream();
      const started = deferred();
      const release = deferred();
      let starts = 0;
      const tool = defineTool({
        name: "open_ticket", effect: "write", input: z.object({ title: z.string() }),
        async execute(_input, ctx) {
          if (++starts === N) started.resolve();
          await release.promise;
          return service.apply(ctx.idempotencyKey);
        },
        probe: async (_input, ctx) => service.probe(ctx.idempotencyKey),
      });
      const ledger = postgresLedger({ connectionString: proxy.through(db.url) }, { schema: db.freshSchema() });
      const alerts: Alert[] = [];
      const gate = createGate({ tools: [tool], ledger, onAlert: (a) => alerts.push(a) });
      const calls = uses(fault.kind, N);
      const watch = watchProcess();
      try {
        const running = gate.runToolUses(calls, scope);
        await started.promise;
        // The outcomes of the N calls go out together: one transaction, cut at its COMMIT.
        proxy.setPlan(once((r) => r.kind === "commit" && r.inTransaction > N, fault));
        release.resolve();
        const answers = await running;
        expect(proxy.injected.at(-1)?.fault).toEqual(fault);
        // Every tool ran: each answer is its true result, never "nothing was executed".
        expect(answers.map((a) => [a.is_error ?? false, JSON.parse(a.content)])).toEqual(calls.map((c) => [false, { ticket: `T-${c.id}` }]));
        expect(alerts.map((a) => [a.code, a.key]).sort()).toEqual(calls.map((c) => ["record_failed", c.id]).sort());
        for (const a of alerts) expect(a.message).toMatch(/could not be recorded: EG_LEDGER_UNAVAILABLE: .*Connection terminated/);
        // The connection is good again: the kept outcomes are written, and a replay answers from the ledger.
        await gate.drain();
        for (const c of calls) expect(await ledger.calls.get("acme", c.id)).toMatchObject({ state: "completed", owner: null });
        expect(await gate.runToolUses(calls, scope)).toEqual(answers);
        expect([...service.requests.values()]).toEqual(Array(N).fill(1));
        expect(watch.seen).toEqual([]);
      } finally {
        watch.stop();
        await gate.close();
        await ledger.close();
      }
    });
  }
});

/** A ticket tool whose runs are counted, probed against the downstream's own record of effects. */
function ticketTool(service: ReturnType<typeof downstream>, runs: string[], repeats?: RepeatPolicy) {
  return defineTool({
    name: "open_ticket", effect: "write", input: z.object({ title: z.string() }),
    execute: (_input, ctx) => {
      runs.push(ctx.idempotencyKey);
      return service.apply(ctx.idempotencyKey);
    },
    probe: async (_input, ctx) => service.probe(ctx.idempotencyKey),
    ...(repeats ? { repeats } : {}),
  });
}

const NOT_STARTED = /^EG_LEDGER_UNAVAILABLE: cannot reach the ledger database .*\(could not claim a call: Connection terminated unexpectedly\)\. The tool was not started by this request/;

describe("the connection to PostgreSQL dropped under the claims", () => {
  for (const fault of [{ kind: "drop_reply" }, { kind: "cut" }] as const) {
    it(`a batch of claims (${fault.kind === "cut" ? "cut before its COMMIT reached the server" : "committed, its reply dropped"}): no tool starts, each call is told so, and the replay runs each once`, async () => {
      const N = 4;
      const service = downstream();
      const runs: string[] = [];
      const ledger = postgresLedger({ connectionString: proxy.through(db.url) }, { schema: db.freshSchema() });
      const alerts: Alert[] = [];
      const gate = createGate({ tools: [ticketTool(service, runs)], ledger, onAlert: (a) => alerts.push(a) });
      const calls = uses(`claims_${fault.kind}`, N);
      // Opened (and migrated) first, so the batch is the claims' own.
      await ledger.calls.get("acme", "none");
      const watch = watchProcess();
      try {
        proxy.setPlan(once((r) => r.kind === "commit" && r.inTransaction > N, fault));
        const answers = await gate.runToolUses(calls, scope);
        expect(proxy.injected.at(-1)?.fault).toEqual(fault);
        for (const a of answers) expect(a.content).toMatch(NOT_STARTED);
        expect(runs).toEqual([]);
        const written = await ledger.calls.list({ tenant: "acme" });
        expect(written.map((r) => r.state)).toEqual(fault.kind === "cut" ? [] : Array(N).fill("in_progress"));
        // The replay runs each call once: its own unanswered claim, or a claim afresh.
        const replayed = await gate.runToolUses(calls, scope);
        expect(replayed.map((a) => JSON.parse(a.content))).toEqual(calls.map((c) => ({ ticket: `T-${c.id}` })));
        expect(runs.sort()).toEqual(calls.map((c) => c.id).sort());
        expect(await gate.runToolUses(calls, scope)).toEqual(replayed);
        expect([...service.requests.values()]).toEqual(Array(N).fill(1));
        expect(alerts).toEqual([]);
        expect(watch.seen).toEqual([]);
      } finally {
        watch.stop();
        await gate.close();
        await ledger.close();
      }
    });
  }

  for (const at of ["commit", "statement"] as const) {
    it(`a claim unless repeated (${at === "commit" ? "committed, its COMMIT's reply dropped" : "cut at its INSERT, rolled back"}): told it did not start, run once on replay, and a repeat is refused`, async () => {
      const service = downstream();
      const runs: string[] = [];
      const ledger = postgresLedger({ connectionString: proxy.through(db.url) }, { schema: db.freshSchema() });
      const gate = createGate({ tools: [ticketTool(service, runs, { action: "refuse" })], ledger, onAlert: () => {} });
      await ledger.calls.get("acme", "none");
      const [call] = uses(`repeat_${at}`, 1) as [ReturnType<typeof uses>[number]];
      const watch = watchProcess();
      try {
        // The claim's transaction: BEGIN, the advisory lock, the INSERT … WHERE NOT EXISTS, COMMIT.
        proxy.setPlan(once(
          (r) => (at === "commit" ? r.kind === "commit" : r.kind === "statement" && /INSERT INTO/.test(r.sql)) && r.inTransaction > 0,
          at === "commit" ? { kind: "drop_reply" } : { kind: "cut" },
        ));
        const [answer] = await gate.runToolUses([call], scope);
        expect(proxy.injected).not.toHaveLength(0);
        expect(answer!.content).toMatch(NOT_STARTED);
        expect(runs).toEqual([]);
        expect((await ledger.calls.get("acme", call.id))?.state).toBe(at === "commit" ? "in_progress" : undefined);
        const [replayed] = await gate.runToolUses([call], scope);
        expect(JSON.parse(replayed!.content)).toEqual({ ticket: `T-${call.id}` });
        // The same input under a new id repeats it: refused, not run.
        const [repeat] = await gate.runToolUses([{ ...call, id: `${call.id}_again` }], scope);
        expect(repeat!.content).toMatch(/^EG_REPEATED_CALL: /);
        expect(runs).toEqual([call.id]);
        expect(service.requests.get(call.id)).toBe(1);
        expect(watch.seen).toEqual([]);
      } finally {
        watch.stop();
        await gate.close();
        await ledger.close();
      }
    });
  }
});

describe("a borrowed pool", () => {
  it("without an 'error' listener of its own: idle connections cut under it end nothing, and the next call reconnects", async () => {
    const pg = (await import("pg")).default;
    const pool = new pg.Pool({ connectionString: proxy.through(db.url), max: 2 });
    const ledger = postgresLedger({ pool }, { schema: db.freshSchema() });
    const service = downstream();
    const runs: string[] = [];
    const gate = createGate({ tools: [ticketTool(service, runs)], ledger, onAlert: () => {} });
    const watch = watchProcess();
    try {
      const [first, second] = uses("borrowed", 2) as [ReturnType<typeof uses>[number], ReturnType<typeof uses>[number]];
      expect((await gate.runToolUses([first], scope))[0]!.is_error).toBe(false);
      expect(pool.idleCount).toBeGreaterThan(0);
      const removed = new Promise((resolve) => pool.once("remove", resolve));
      proxy.cutAll();
      // The pool drops the broken idle connection (and reports it as an 'error' of the pool's, which nobody but the ledger listens to).
      await removed;
      expect((await gate.runToolUses([second], scope))[0]!.is_error).toBe(false);
      expect(runs).toEqual([first.id, second.id]);
      expect(watch.seen).toEqual([]);
      // The ledger's listener goes with the ledger: the pool is yours again as you gave it.
      await gate.close();
      await ledger.close();
      expect(pool.listenerCount("error")).toBe(0);
    } finally {
      watch.stop();
      await pool.end();
    }
  });
});

