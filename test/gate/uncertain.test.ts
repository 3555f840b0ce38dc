/**
 * The three-state world: a call's outcome can be known-done, known-not-done, or unknown.
 * Each branch of the probe state machine, the late reply, and the retry rules per class.
 */
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { createGate } from "../../src/root/create-gate.js";
import { defineTool } from "../../src/core/tool.js";
import { type ProbeResult } from "../../src/core/hooks.js";
import { memoryLedger } from "../../src/stores/memory/index.js";
import { OutcomeUnknown, ToolRejected } from "../../src/core/outcome.js";
import type { Alert } from "../../src/gate/alerts.js";
import { toolUse } from "../support/tools.js";

const scope = { tenant: "acme", task: "t1" };
const fast = { timeoutMs: 20, probe: { attempts: 4, initialDelayMs: 1, maxDelayMs: 4 } } as const;

/** A downstream job that only finishes when the test says so, after the client has timed out. */
function slowJob() {
  let finish!: (value: { jobId: string }) => void;
  const done = new Promise<{ jobId: string }>((resolve) => (finish = resolve));
  return { done, finish };
}

/** A request that never gets an answer, and gives up when the gate cancels it (as fetch with ctx.signal does). */
function hangs(signal: AbortSignal): Promise<never> {
  return new Promise((_resolve, reject) => signal.addEventListener("abort", () => reject(signal.reason as Error)));
}

function bookTool(opts: {
  execute: (key: string, attempt: number, signal: AbortSignal) => Promise<unknown>;
  probe?: (key: string, round: number) => ProbeResult<unknown>;
  settleMs?: number;
}) {
  let round = 0;
  return defineTool({
    name: "book_room", effect: "write", input: z.object({ room: z.string() }),
    ...(opts.settleMs === undefined ? {} : { settleMs: opts.settleMs }),
    execute: (_i, ctx) => opts.execute(ctx.idempotencyKey, ctx.attempt, ctx.signal),
    ...(opts.probe ? { probe: async (_i: unknown, ctx: { idempotencyKey: string }) => opts.probe!(ctx.idempotencyKey, round++) } : {}),
  });
}

const book = (id = "toolu_b") => [toolUse(id, "book_room", { room: "101" })];

describe("a timeout is not a failure", () => {
  it("timeout → probe says done → completed with the probed result", async () => {
    const ledger = memoryLedger();
    const job = slowJob();
    const gate = createGate({ ...fast, ledger, tools: [bookTool({ execute: () => job.done, probe: () => ({ status: "done", result: { jobId: "J-1", via: "probe" } }) })] });
    const [r] = await gate.runToolUses(book(), scope);
    expect(r).toMatchObject({ is_error: false, content: '{"jobId":"J-1","via":"probe"}' });
    expect(await ledger.calls.get("acme", "toolu_b")).toMatchObject({ state: "completed", attempts: 1 });
    job.finish({ jobId: "J-1" });
  });

  it("timeout → probe says absent after the settle horizon → re-executed once with the same key", async () => {
    const ledger = memoryLedger();
    const runs: string[] = [];
    const gate = createGate({
      ...fast, ledger,
      tools: [bookTool({
        execute: (key, attempt, signal) => {
          runs.push(`${key}#${attempt}`);
          return attempt === 1 ? hangs(signal) : Promise.resolve({ booked: key, attempt });
        },
        probe: () => ({ status: "absent" }),
        settleMs: 5,
      })],
    });
    const [r] = await gate.runToolUses(book(), scope);
    expect(r).toMatchObject({ is_error: false, content: '{"booked":"toolu_b","attempt":2}' });
    expect(runs).toEqual(["toolu_b#1", "toolu_b#2"]);
    expect(await ledger.calls.get("acme", "toolu_b")).toMatchObject({ state: "completed", attempts: 2 });
  });

  it("timeout → running, running, done → keeps waiting within the budget", async () => {
    const ledger = memoryLedger();
    const answers: ProbeResult<unknown>[] = [{ status: "running" }, { status: "running" }, { status: "done", result: "booked late" }];
    const gate = createGate({ ...fast, ledger, tools: [bookTool({ execute: () => new Promise(() => {}), probe: (_k, round) => answers[round]! })] });
    const [r] = await gate.runToolUses(book(), scope);
    expect(r).toMatchObject({ is_error: false, content: "booked late" });
  });

  it("the probe says running all along → the call stays uncertain (the downstream has it), EG_IN_PROGRESS, no person asked", async () => {
    const ledger = memoryLedger();
    const alerts: Alert[] = [];
    let probes = 0;
    let runs = 0;
    const gate = createGate({
      ...fast, ledger, onAlert: (a) => alerts.push(a),
      tools: [bookTool({ execute: (_k, _a, signal) => (runs++, hangs(signal)), probe: () => (probes++, { status: "running" }) })],
    });
    const [r] = await gate.runToolUses(book(), scope);
    expect(probes).toBe(4);
    expect(r!.is_error).toBe(true);
    expect(r!.content).toMatch(/^EG_IN_PROGRESS: this book_room call is still being worked on downstream \(no reply within 20 ms; the probe still says the downstream is working on it \(asked 4 times\)\)\. .*Do not retry it under a new id/);
    expect(await ledger.calls.get("acme", "toolu_b")).toMatchObject({ state: "uncertain", owner: null });
    expect(alerts).toEqual([]);
    // A replay asks the probe again; it never runs the tool again.
    const [again] = await gate.runToolUses(book(), scope);
    expect(again!.content).toMatch(/^EG_IN_PROGRESS/);
    expect(runs).toBe(1);
  });

  it("no probe → needs_human at once after the timeout", async () => {
    const ledger = memoryLedger();
    let runs = 0;
    const gate = createGate({ ...fast, ledger, tools: [bookTool({ execute: () => (runs++, new Promise(() => {})) })] });
    const [r] = await gate.runToolUses(book(), scope);
    expect(r!.content).toMatch(/^EG_NEEDS_HUMAN: .*book_room has no probe/);
    expect(runs).toBe(1);
  });

  it("absent twice → one re-run only, then needs_human", async () => {
    const ledger = memoryLedger();
    let runs = 0;
    const gate = createGate({ ...fast, ledger, tools: [bookTool({ execute: (_k, _a, signal) => (runs++, hangs(signal)), probe: () => ({ status: "absent" }), settleMs: 5 })] });
    const [r] = await gate.runToolUses(book(), scope);
    expect(runs).toBe(2);
    expect(r!.content).toMatch(/^EG_NEEDS_HUMAN: .*the probe said absent again after a re-run/);
  });

  it("an 'absent' while the first request may still arrive is checked again after cancelling it: no second effect", async () => {
    const ledger = memoryLedger();
    const applied: string[] = [];
    const tool = defineTool({
      name: "book_room", effect: "write", input: z.object({ room: z.string() }), settleMs: 30,
      // A downstream that ignores keys; the first request reaches it only as the client gives up on it.
      execute: (_i, ctx) => new Promise((_resolve, reject) => {
        if (ctx.attempt > 1) return void (applied.push(`${ctx.idempotencyKey}#${ctx.attempt}`), _resolve({ booked: ctx.attempt }));
        ctx.signal.addEventListener("abort", () => {
          applied.push(`${ctx.idempotencyKey}#${ctx.attempt}`);
          reject(new Error("aborted by the client"));
        });
      }),
      probe: async (_i, ctx) => (applied.some((a) => a.startsWith(`${ctx.idempotencyKey}#`)) ? { status: "done", result: { booked: "found by probe" } } : { status: "absent" }),
    });
    const gate = createGate({ ...fast, ledger, tools: [tool] });
    const [r] = await gate.runToolUses(book(), scope);
    expect(applied).toEqual(["toolu_b#1"]);
    expect(r).toMatchObject({ is_error: false, content: '{"booked":"found by probe"}' });
  });

  it("a late reply during the probe loop is taken as the answer", async () => {
    const ledger = memoryLedger();
    const job = slowJob();
    const gate = createGate({
      ...fast, ledger,
      tools: [bookTool({
        execute: () => job.done,
        probe: (_k, round) => {
          if (round === 0) job.finish({ jobId: "J-late" }); // the downstream answers while we probe
          return { status: "running" };
        },
      })],
    });
    const [r] = await gate.runToolUses(book(), scope);
    expect(r).toMatchObject({ is_error: false, content: '{"jobId":"J-late"}' });
    expect((await ledger.calls.get("acme", "toolu_b"))?.state).toBe("completed");
  });

  it("a late reply after the call went to a human is still recorded, not dropped", async () => {
    const ledger = memoryLedger();
    const job = slowJob();
    const gate = createGate({ ...fast, ledger, tools: [bookTool({ execute: () => job.done })] });
    const [r] = await gate.runToolUses(book(), scope);
    expect(r!.content).toMatch(/^EG_NEEDS_HUMAN/);
    job.finish({ jobId: "J-35s" });
    await job.done;
    await gate.drain();
    expect(await ledger.calls.get("acme", "toolu_b")).toMatchObject({ state: "completed", result: { jobId: "J-35s" } });
    const [replay] = await gate.runToolUses(book(), scope);
    expect(replay).toMatchObject({ is_error: false, content: '{"jobId":"J-35s"}' });
  });

  it("a connection dropped mid-request (OutcomeUnknown) is probed, not failed", async () => {
    const ledger = memoryLedger();
    const gate = createGate({
      ...fast, ledger,
      tools: [bookTool({ execute: () => Promise.reject(new OutcomeUnknown("socket hang up")), probe: () => ({ status: "done", result: "was booked" }) })],
    });
    const [r] = await gate.runToolUses(book(), scope);
    expect(r).toMatchObject({ is_error: false, content: "was booked" });
  });
});

describe("retries by effect class", () => {
  const seeded = () => {
    let x = 42;
    return () => ((x = (x * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
  };
  const connRefused = () => Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:9"), { code: "ECONNREFUSED" });
  const reset = () => Object.assign(new Error("read ECONNRESET"), { code: "ECONNRESET" });
  const opts = { random: seeded(), retry: { read: { initialDelayMs: 1 }, write: { initialDelayMs: 1 } } } as const;

  it("read: retried with backoff on transient errors, then succeeds", async () => {
    let tries = 0;
    const lookup = defineTool({ name: "lookup", effect: "read", input: z.object({}), execute: () => (++tries < 3 ? Promise.reject(reset()) : Promise.resolve("found")) });
    const gate = createGate({ ...opts, ledger: memoryLedger(), tools: [lookup] });
    const [r] = await gate.runToolUses([toolUse("r1", "lookup", {})], scope);
    expect(r).toMatchObject({ is_error: false, content: "found" });
    expect(tries).toBe(3);
  });

  it("read: gives up after its attempts with the last error", async () => {
    let tries = 0;
    const lookup = defineTool({ name: "lookup", effect: "read", input: z.object({}), execute: () => (tries++, Promise.reject(reset())) });
    const gate = createGate({ ...opts, ledger: memoryLedger(), tools: [lookup] });
    const [r] = await gate.runToolUses([toolUse("r1", "lookup", {})], scope);
    expect(r!.content).toBe("EG_TOOL_FAILED: lookup failed (after 3 tries): read ECONNRESET");
    expect(tries).toBe(3);
  });

  it("write to a downstream that honours keys: an unknown outcome is retried with the same key", async () => {
    const keys: string[] = [];
    const tool = defineTool({
      name: "charge", effect: "write", downstreamIdempotent: true, input: z.object({}),
      execute: (_i, ctx) => (keys.push(ctx.idempotencyKey), keys.length < 2 ? Promise.reject(reset()) : Promise.resolve("charged")),
    });
    const ledger = memoryLedger();
    const gate = createGate({ ...opts, ledger, tools: [tool] });
    const [r] = await gate.runToolUses([toolUse("w1", "charge", {})], scope);
    expect(r!.content).toBe("charged");
    expect(keys).toEqual(["w1", "w1"]);
    expect((await ledger.calls.get("acme", "w1"))?.attempts).toBe(2);
  });

  it("write without downstreamIdempotent: an unknown outcome is never resent blindly (probe or human)", async () => {
    let tries = 0;
    const tool = defineTool({ name: "charge", effect: "write", input: z.object({}), execute: () => (tries++, Promise.reject(reset())) });
    const gate = createGate({ ...opts, ...fast, ledger: memoryLedger(), tools: [tool] });
    const [r] = await gate.runToolUses([toolUse("w1", "charge", {})], scope);
    expect(tries).toBe(1);
    expect(r!.content).toMatch(/^EG_NEEDS_HUMAN: .*read ECONNRESET; charge has no probe/);
  });

  it("write: a request that never left (connection refused) is resent, since nothing happened", async () => {
    let tries = 0;
    const tool = defineTool({ name: "charge", effect: "write", input: z.object({}), execute: () => (++tries < 2 ? Promise.reject(connRefused()) : Promise.resolve("ok")) });
    const gate = createGate({ ...opts, ledger: memoryLedger(), tools: [tool] });
    const [r] = await gate.runToolUses([toolUse("w1", "charge", {})], scope);
    expect(r!.content).toBe("ok");
    expect(tries).toBe(2);
  });

  it("destructive: no automatic retry even when the request never left", async () => {
    let tries = 0;
    const tool = defineTool({
      name: "delete_account", effect: "destructive", input: z.object({}), execute: () => (tries++, Promise.reject(connRefused())),
      dryRun: () => ({ effect: "would_delete", would_affect: { account: "acc_1" }, reversible: false }),
    });
    const ledger = memoryLedger();
    // Destructive calls need approval: an approver callback gives it, so the call runs now.
    const gate = createGate({ ...opts, ledger, tools: [tool], approver: () => ({ approve: true, by: "test" }) });
    const [r] = await gate.runToolUses([toolUse("d1", "delete_account", {})], scope);
    expect(tries).toBe(1);
    expect(r!.content).toMatch(/^EG_TOOL_FAILED: delete_account failed: connect ECONNREFUSED .*never reached the downstream; nothing happened/);
    expect((await ledger.calls.get("acme", "d1"))?.state).toBe("failed");
  });

  it("a definite rejection (4xx, ToolRejected) is failed at once, never retried or probed", async () => {
    let tries = 0;
    let probes = 0;
    const tool = defineTool({
      name: "charge", effect: "write", downstreamIdempotent: true, input: z.object({}),
      execute: () => (tries++, Promise.reject(Object.assign(new Error("card declined"), { status: 402 }))),
      probe: async () => (probes++, { status: "absent" as const }),
    });
    const other = defineTool({ name: "refund", effect: "write", input: z.object({}), execute: () => Promise.reject(new ToolRejected("amount exceeds charge")) });
    const gate = createGate({ ...opts, ledger: memoryLedger(), tools: [tool, other] });
    const [a, b] = await gate.runToolUses([toolUse("w1", "charge", {}), toolUse("w2", "refund", {})], scope);
    expect(a!.content).toBe("EG_TOOL_FAILED: charge failed: card declined");
    expect(b!.content).toBe("EG_TOOL_FAILED: refund failed: amount exceeds charge");
    expect([tries, probes]).toEqual([1, 0]);
  });

  it("defineTool refuses retries on a destructive tool", () => {
    const dryRun = () => ({ effect: "would_delete", would_affect: {}, reversible: false });
    expect(() => defineTool({ name: "x", effect: "destructive", input: z.object({}), execute: () => 1, dryRun, retry: { attempts: 3 } }))
      .toThrow(/destructive tools are never retried automatically/);
  });
});
