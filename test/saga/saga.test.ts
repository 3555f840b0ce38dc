/**
 * Saga semantics in one process, on the memory ledger: forward steps, compensation in reverse
 * order, approvals of non-compensable steps, compensation failures, unknown outcomes settled by
 * probes (never re-run), re-driving a saga, tagged agent calls, and recovery.
 */
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { createGate, type GateOptions } from "../../src/root/create-gate.js";
import { defineTool } from "../../src/core/tool.js";
import { type ProbeResult } from "../../src/core/hooks.js";
import { fingerprint } from "../../src/core/keys.js";
import { memoryLedger } from "../../src/stores/memory/index.js";
import type { Stores } from "../../src/contracts/stores.js";
import type { Alert } from "../../src/gate/alerts.js";
import { SagaError } from "../../src/saga/errors.js";
import { stepKey } from "../../src/saga/keys.js";
import { ToolRejected } from "../../src/core/outcome.js";
import { ledgerCheckpoint } from "../../src/checkpoint/stored.js";
import { toolUse } from "../support/tools.js";
import { decideApproval } from "../../src/governance/approvals.js";

const scope = { tenant: "acme", task: "order-7" };

/** A downstream that applies each idempotency key once and remembers every effect. */
function world() {
  const applied = new Map<string, { op: string; arg: unknown }>();
  const log: string[] = [];
  const fail = new Set<string>();
  return {
    applied, log, fail,
    apply(op: string, key: string, arg: unknown) {
      if (fail.has(op)) throw new ToolRejected(`${op} refused by the downstream`);
      if (!applied.has(key)) {
        applied.set(key, { op, arg });
        log.push(op);
      }
      return { op, key, arg };
    },
    count(op: string) {
      return log.filter((o) => o === op).length;
    },
  };
}

type World = ReturnType<typeof world>;

function tools(w: World, options: { probe?: (key: string) => ProbeResult<unknown> } = {}) {
  const probe = options.probe
    ? { probe: async (_i: unknown, ctx: { idempotencyKey: string }) => options.probe!(ctx.idempotencyKey) }
    : { probe: async (_i: unknown, ctx: { idempotencyKey: string }): Promise<ProbeResult<unknown>> => {
        const found = w.applied.get(ctx.idempotencyKey);
        return found ? { status: "done", result: { op: found.op, key: ctx.idempotencyKey, arg: found.arg } } : { status: "absent" };
      } };
  // The world applies a request at once or never: its settle horizon is 0.
  const step = (name: string, extra: object = {}) => defineTool({
    name, effect: "write", input: z.object({ n: z.number() }), settleMs: 0,
    execute: (input, ctx) => w.apply(name, ctx.idempotencyKey, input.n),
    ...probe, ...extra,
  });
  return {
    reserve: step("reserve", { compensate: async (input: { n: number }, _r: unknown, ctx: { idempotencyKey: string }) => w.apply("unreserve", ctx.idempotencyKey, input.n) }),
    charge: step("charge"),
    refund: defineTool({
      name: "refund", effect: "write", input: z.object({ charge: z.string() }), settleMs: 0,
      execute: (input, ctx) => w.apply("refund", ctx.idempotencyKey, input.charge), ...probe,
    }),
    ship: step("ship", { compensate: async (input: { n: number }, _r: unknown, ctx: { idempotencyKey: string }) => w.apply("unship", ctx.idempotencyKey, input.n) }),
    mail: step("mail", { compensable: false }),
    look: defineTool({ name: "look", effect: "read", input: z.object({}), execute: () => ({ stock: 3 }) }),
  };
}

function gateFor(w: World, ledger: Stores, extra: Partial<GateOptions> = {}, toolOptions: Parameters<typeof tools>[1] = {}) {
  const t = tools(w, toolOptions);
  const alerts: Alert[] = [];
  const gate = createGate({
    tools: Object.values(t), ledger, onAlert: (a) => alerts.push(a), probe: { attempts: 1, initialDelayMs: 1 }, waitMs: 200, ...extra,
  });
  return { gate, t, alerts };
}

/** The order workflow: reserve → charge (refund) → ship → mail (non-compensable). */
async function order(g: ReturnType<typeof gateFor>, id = "o-1") {
  const saga = g.gate.saga(id, scope);
  await saga.step("reserve", g.t.reserve, { n: 1 });
  const charge = await saga.step("charge", g.t.charge, { n: 40 }, {
    compensate: { tool: g.t.refund, input: (r) => ({ charge: (r as { key: string }).key }) },
  });
  await saga.step("ship", g.t.ship, { n: 2 });
  await saga.step("mail", g.t.mail, { n: 3 });
  return { saga, charge };
}

describe("sagas: forward steps", () => {
  it("runs each step once as a keyed call and finishes completed", async () => {
    const w = world();
    const ledger = memoryLedger();
    const g = gateFor(w, ledger, { approveNonCompensable: () => true });
    const { saga, charge } = await order(g);
    expect(charge).toMatchObject({ op: "charge", key: stepKey("o-1", "charge"), arg: 40 });
    const status = await saga.finish();
    expect(status.state).toBe("completed");
    expect(status.steps.map((s) => [s.name, s.state, s.position])).toEqual([
      ["reserve", "completed", 0], ["charge", "completed", 1], ["ship", "completed", 2], ["mail", "completed", 3],
    ]);
    expect(status.steps[1]?.compensation).toEqual({ kind: "tool", tool: "refund", input: { charge: "saga:o-1:charge" } });
    expect(status.steps[0]?.compensation).toEqual({ kind: "hook" });
    expect(status.steps[3]).toMatchObject({ compensable: false, compensation: null, approval: "approved" });
    expect(w.log).toEqual(["reserve", "charge", "ship", "mail"]);
    expect(await ledger.calls.get("acme", "saga:o-1:charge")).toMatchObject({ state: "completed", tool: "charge" });
    expect((await saga.history()).map((e) => e.kind)).toEqual([
      "saga_started", "step_started", "step_completed", "step_started", "step_completed", "step_started", "step_completed",
      "step_approved", "step_completed", "saga_completed",
    ]);
  });

  it("re-driving the same saga (a fresh gate after a crash) returns stored results and runs nothing again", async () => {
    const w = world();
    const ledger = memoryLedger();
    await order(gateFor(w, ledger, { approveNonCompensable: () => true }));
    const again = gateFor(w, ledger, { approveNonCompensable: () => { throw new Error("must not be asked again"); } });
    const { saga, charge } = await order(again);
    expect(charge).toMatchObject({ op: "charge", arg: 40 });
    expect((await saga.finish()).state).toBe("completed");
    expect(w.log).toEqual(["reserve", "charge", "ship", "mail"]);
    expect(again.gate.stats.executed).toBe(0);
  });

  it("a step re-driven with different input is a key mismatch: nothing runs, the saga is unchanged", async () => {
    const w = world();
    const g = gateFor(w, memoryLedger());
    const saga = g.gate.saga("o-1", scope);
    await saga.step("reserve", g.t.reserve, { n: 1 });
    await expect(saga.step("reserve", g.t.reserve, { n: 2 })).rejects.toThrow(/EG_KEY_MISMATCH: saga o-1 step reserve: step reserve of saga o-1 was first run/);
    await expect(saga.step("x", g.t.reserve, { n: "two" } as never)).rejects.toThrow(/EG_INVALID_INPUT/);
    await expect(saga.step("x", "nope", {})).rejects.toThrow(/EG_UNKNOWN_TOOL/);
    expect(w.log).toEqual(["reserve"]);
    expect((await saga.status())?.state).toBe("running");
    expect((await saga.status())?.steps.map((s) => s.name)).toEqual(["reserve"]);
  });

  it("reads are steps with nothing to undo, and cost no ledger record", async () => {
    const w = world();
    const ledger = memoryLedger();
    const g = gateFor(w, ledger);
    const saga = g.gate.saga("o-1", scope);
    expect(await saga.step("look", g.t.look, {})).toEqual({ stock: 3 });
    await saga.step("reserve", g.t.reserve, { n: 1 });
    const status = await saga.compensate("changed my mind");
    expect(status.state).toBe("compensated");
    expect(status.steps.map((s) => s.state)).toEqual(["completed", "compensated"]);
    expect(await ledger.calls.get("acme", stepKey("o-1", "look"))).toBeUndefined();
  });
});

describe("sagas: a step whose call is still running downstream", () => {
  it("times out, its probe says running: the step stays pending, step() rejects EG_IN_PROGRESS, nothing is undone; asked again once it landed, it completes once", async () => {
    const w = world();
    const ledger = memoryLedger();
    // The shipment is booked slowly: the request is accepted at once, applied when `land` is called.
    let land!: () => void;
    const landed = new Promise<void>((resolve) => (land = resolve));
    const booking: { key?: string } = {};
    const t = tools(w);
    const ship = defineTool({
      name: "ship", effect: "write", input: z.object({ n: z.number() }), timeoutMs: 20, settleMs: 60_000,
      execute: (input, ctx) => {
        booking.key = ctx.idempotencyKey;
        // The downstream keeps working whatever the client does with its signal.
        void landed.then(() => w.apply("ship", ctx.idempotencyKey, input.n));
        return new Promise(() => undefined);
      },
      probe: async (_i, ctx) => {
        const found = w.applied.get(ctx.idempotencyKey);
        if (found) return { status: "done", result: { op: found.op, key: ctx.idempotencyKey, arg: found.arg } };
        return booking.key === ctx.idempotencyKey ? { status: "running" } : { status: "absent" };
      },
      compensate: async (input, _r, ctx) => w.apply("unship", ctx.idempotencyKey, input.n),
    });
    const gate = createGate({ tools: [...Object.values(t).filter((x) => x.name !== "ship"), ship], ledger, onAlert: () => undefined, probe: { attempts: 1, initialDelayMs: 1 }, waitMs: 50 });
    const saga = gate.saga("o-run", scope);
    await saga.step("reserve", t.reserve, { n: 1 });
    await saga.step("charge", t.charge, { n: 40 }, { compensate: { tool: t.refund, input: (r) => ({ charge: (r as { key: string }).key }) } });

    await expect(saga.step("ship", ship, { n: 2 })).rejects.toThrow(/^EG_IN_PROGRESS: /);
    const paused = await saga.status();
    expect(paused?.state).toBe("running");
    expect(paused?.steps.map((s) => [s.name, s.state])).toEqual([["reserve", "completed"], ["charge", "completed"], ["ship", "pending"]]);
    expect(w.log).toEqual(["reserve", "charge"]);
    // Asking again while it is still being booked: the same answer, nothing re-sent, nothing undone.
    await expect(saga.step("ship", ship, { n: 2 })).rejects.toThrow(/^EG_IN_PROGRESS: /);
    expect(gate.stats.executed).toBe(3);

    land();
    await landed;
    const shipped = await saga.step("ship", ship, { n: 2 });
    expect(shipped).toMatchObject({ op: "ship", arg: 2 });
    expect((await saga.finish()).state).toBe("completed");
    expect(w.log).toEqual(["reserve", "charge", "ship"]);
    await gate.close();
  });
});

describe("sagas: failure and compensation", () => {
  it("a failing step compensates the completed steps in reverse order, each once, and rejects with the saga's end", async () => {
    const w = world();
    const ledger = memoryLedger();
    const g = gateFor(w, ledger, { approveNonCompensable: () => true });
    w.fail.add("ship");
    const err = await order(g).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(SagaError);
    const sagaErr = err as SagaError;
    expect(sagaErr.code).toBe("EG_SAGA_FAILED");
    expect(sagaErr.message).toMatch(/step ship \(ship\): .*ship refused by the downstream.*was rolled back/);
    expect(sagaErr.status.state).toBe("compensated");
    expect(sagaErr.status.steps.map((s) => [s.name, s.state])).toEqual([["reserve", "compensated"], ["charge", "compensated"], ["ship", "failed"]]);
    expect(w.log).toEqual(["reserve", "charge", "refund", "unreserve"]);
    expect(await ledger.calls.get("acme", "saga:o-1:charge")).toMatchObject({ state: "compensated" });
    expect(await ledger.calls.get("acme", "saga:o-1:charge:compensate")).toMatchObject({ state: "completed", tool: "refund" });
    expect(await ledger.calls.get("acme", "saga:o-1:reserve:compensate")).toMatchObject({ state: "completed", tool: "reserve:compensate" });
    expect(await ledger.calls.get("acme", "saga:o-1:ship")).toMatchObject({ state: "failed" });
    // Later steps are refused, and the mail was never sent.
    await expect(g.gate.saga("o-1", scope).step("mail", g.t.mail, { n: 3 })).rejects.toThrow(/EG_SAGA_CLOSED: saga o-1 is compensated/);
    expect(w.count("mail")).toBe(0);
  });

  it("a non-compensable step is refused without a policy: it does not run and the saga compensates", async () => {
    const w = world();
    const g = gateFor(w, memoryLedger());
    const err = (await order(g).catch((e: unknown) => e)) as SagaError;
    expect(err.code).toBe("EG_SAGA_FAILED");
    expect(err.status.steps.at(-1)).toMatchObject({
      name: "mail", state: "refused", approval: "refused",
      error: expect.stringMatching(/mail is marked compensable: false, and neither an approveNonCompensable policy .* nor a governance approval rule covers it/),
    });
    expect(w.count("mail")).toBe(0);
    expect(w.log).toEqual(["reserve", "charge", "ship", "unship", "refund", "unreserve"]);
  });

  it("a non-compensable step the governance policy lists waits for a durable approval, then runs once", async () => {
    const w = world();
    const ledger = memoryLedger();
    const g = gateFor(w, ledger, { policy: { nonCompensable: ["mail"] } });
    const saga = g.gate.saga("o-9", scope);
    await saga.step("reserve", g.t.reserve, { n: 1 });
    await expect(saga.step("mail", g.t.mail, { n: 1 })).rejects.toThrow(/EG_AWAITING_APPROVAL/);
    expect(w.count("mail")).toBe(0);
    expect((await saga.status())?.state).toBe("running");
    const [request] = await ledger.governance!.listApprovals({ state: "pending" });
    expect(request).toMatchObject({ tool: "mail" });
    await decideApproval(ledger.governance!, request!.id, { approve: true, by: "alice" }, Date.now());
    await saga.step("mail", g.t.mail, { n: 1 });
    await saga.step("mail", g.t.mail, { n: 1 });
    expect(w.count("mail")).toBe(1);
    await saga.finish();
    expect((await saga.status())?.state).toBe("completed");
  });

  it("the saga's own policy overrides the gate's; it sees the step; a throwing policy refuses", async () => {
    const w = world();
    const asked: unknown[] = [];
    const g = gateFor(w, memoryLedger(), { approveNonCompensable: () => true });
    const saga = g.gate.saga("o-2", scope, { approveNonCompensable: (s) => { asked.push(s); throw new Error("policy down"); } });
    await expect(saga.step("mail", g.t.mail, { n: 3 })).rejects.toThrow(/approveNonCompensable failed \(policy down\), so it was refused/);
    expect(asked).toEqual([{ tenant: "acme", sagaId: "o-2", task: "order-7", step: "mail", tool: "mail", effect: "write", input: { n: 3 }, reason: "mail is marked compensable: false" }]);
    // A write step with nothing to undo it counts as non-compensable too.
    const approved: string[] = [];
    const s3 = g.gate.saga("o-3", scope, { approveNonCompensable: (s) => (approved.push(s.reason), true) });
    await s3.step("charge", g.t.charge, { n: 1 });
    expect(approved).toEqual(["nothing undoes charge (no compensate hook or compensateWith, no compensation given)"]);
  });

  it("an approved non-compensable step is kept when the saga compensates later", async () => {
    const w = world();
    const g = gateFor(w, memoryLedger(), { approveNonCompensable: () => true });
    const { saga } = await order(g);
    const status = await saga.compensate("customer cancelled");
    expect(status.state).toBe("compensated");
    expect(status.steps.map((s) => s.state)).toEqual(["compensated", "compensated", "compensated", "completed"]);
    expect(w.log).toEqual(["reserve", "charge", "ship", "mail", "unship", "refund", "unreserve"]);
    expect((await saga.history()).filter((e) => e.kind === "step_kept").map((e) => e.step)).toEqual(["mail"]);
  });

  it("a compensation that fails ends the saga compensation_failed, puts the step before a person, and still undoes the rest", async () => {
    const w = world();
    const ledger = memoryLedger();
    const g = gateFor(w, ledger, { approveNonCompensable: () => true });
    w.fail.add("mail");
    w.fail.add("refund");
    const err = (await order(g).catch((e: unknown) => e)) as SagaError;
    expect(err.status.state).toBe("compensation_failed");
    expect(err.status.reason).toMatch(/a person must settle step charge: its compensation refund failed: .*refund refused by the downstream/);
    expect(err.status.steps.map((s) => [s.name, s.state])).toEqual([
      ["reserve", "compensated"], ["charge", "compensation_failed"], ["ship", "compensated"], ["mail", "failed"],
    ]);
    expect(w.log).toEqual(["reserve", "charge", "ship", "unship", "unreserve"]);
    expect(await ledger.calls.get("acme", "saga:o-1:charge")).toMatchObject({ state: "compensation_failed", error: expect.stringMatching(/refund failed/) });
    expect(g.alerts.map((a) => [a.code, a.key])).toEqual([["needs_human", "saga:o-1:charge"], ["needs_human", "saga:o-1"]]);
    const kinds = (await g.gate.saga("o-1", scope).history()).map((e) => e.kind);
    expect(kinds.slice(-4)).toEqual(["step_compensation_failed", "compensation_started", "step_compensated", "saga_compensation_failed"]);
  });

  it("a compensation whose first try times out is retried with the same key and happens once", async () => {
    const w = world();
    let first = true;
    const slowRefund = defineTool({
      name: "refund", effect: "write", input: z.object({ charge: z.string() }), timeoutMs: 40, downstreamIdempotent: true,
      retry: { attempts: 3, initialDelayMs: 1, maxDelayMs: 1 },
      async execute(input, ctx) {
        const effect = w.apply("refund", ctx.idempotencyKey, input.charge);
        if (first) {
          first = false;
          // The downstream applied it, but the reply never comes back in time.
          await new Promise<void>((resolve) => ctx.signal.addEventListener("abort", () => resolve()));
          throw new Error("aborted");
        }
        return effect;
      },
    });
    const t = tools(w);
    const gate = createGate({ tools: [t.charge, slowRefund], ledger: memoryLedger(), onAlert: () => undefined });
    const saga = gate.saga("o-9", scope);
    await saga.step("charge", t.charge, { n: 5 }, { compensate: { tool: "refund", input: (r) => ({ charge: (r as { key: string }).key }) } });
    const status = await saga.compensate();
    expect(status.state).toBe("compensated");
    expect(w.count("refund")).toBe(1);
    expect(await gate.ledger.calls.get("acme", "saga:o-9:charge:compensate")).toMatchObject({ state: "completed", attempts: 2 });
  });
});

describe("sagas: steps whose outcome the log does not know", () => {
  /** A step logged pending whose call a dead worker on another host left in_progress (lease over). */
  async function orphan(ledger: Stores, w: World, name: string, applied: boolean) {
    const g = gateFor(w, ledger, {}, {});
    const saga = g.gate.saga("o-5", scope);
    await saga.step("reserve", g.t.reserve, { n: 1 });
    await ledger.sagas!.addStep({
      tenant: "acme", sagaId: "o-5", name, tool: "ship", effect: "write", key: stepKey("o-5", name), input: { n: 2 },
      inputRedacted: false, fingerprint: fingerprint("ship", { n: 2 }), compensable: true, compensation: { kind: "hook" },
      approval: "not_needed", state: "pending",
    });
    await ledger.calls.claim({
      tenant: "acme", key: stepKey("o-5", name), tool: "ship", effect: "write", task: scope.task, toolUseId: stepKey("o-5", name),
      fingerprint: fingerprint("ship", { n: 2 }), input: { n: 2 }, inputRedacted: false, owner: "other-host/1/dead", leaseMs: -1,
    });
    if (applied) w.apply("ship", stepKey("o-5", name), 2);
    return saga;
  }

  it("probe says done: the step is compensated", async () => {
    const w = world();
    const ledger = memoryLedger();
    const saga = await orphan(ledger, w, "ship", true);
    const status = await saga.compensate();
    expect(status.state).toBe("compensated");
    expect(status.steps.map((s) => s.state)).toEqual(["compensated", "compensated"]);
    expect(w.log).toEqual(["reserve", "ship", "unship", "unreserve"]);
  });

  it("probe says absent: the step is skipped and its call failed, never re-run", async () => {
    const w = world();
    const ledger = memoryLedger();
    const saga = await orphan(ledger, w, "ship", false);
    const status = await saga.compensate();
    expect(status.steps.map((s) => s.state)).toEqual(["compensated", "skipped"]);
    expect(w.log).toEqual(["reserve", "unreserve"]);
    expect(await ledger.calls.get("acme", stepKey("o-5", "ship"))).toMatchObject({ state: "failed", error: expect.stringMatching(/not re-run: its probe found no effect/) });
    // The generic recovery finds nothing to re-run.
    const g = gateFor(w, ledger);
    expect((await g.gate.recover()).examined).toBe(0);
    expect(w.count("ship")).toBe(0);
  });

  it("no probe: the step goes to a person and the saga ends compensation_failed, the others undone", async () => {
    const w = world();
    const ledger = memoryLedger();
    await orphan(ledger, w, "ship", true);
    const g = gateFor(w, ledger, {}, { probe: () => ({ status: "running" }) });
    const noProbe = createGate({
      tools: [g.t.reserve, defineTool({ name: "ship", effect: "write", input: z.object({ n: z.number() }), execute: () => ({}), compensate: async () => ({}) })],
      ledger, onAlert: () => undefined,
    });
    const status = await noProbe.saga("o-5", scope).compensate();
    expect(status.state).toBe("compensation_failed");
    expect(status.steps.map((s) => s.state)).toEqual(["compensated", "unknown"]);
    expect(await ledger.calls.get("acme", stepKey("o-5", "ship"))).toMatchObject({ state: "needs_human" });
    expect(w.log).toEqual(["reserve", "ship", "unreserve"]);
  });

  it("probe says still running: the compensation pauses in order (nothing before it is undone) and resumes later", async () => {
    const w = world();
    const ledger = memoryLedger();
    await orphan(ledger, w, "ship", false);
    let answer: ProbeResult<unknown> = { status: "running" };
    const g = gateFor(w, ledger, {}, { probe: () => answer });
    const paused = await g.gate.saga("o-5", scope).compensate();
    expect(paused.state).toBe("compensating");
    expect(paused.reason).toMatch(/paused at step ship: its outcome is not known yet/);
    expect(w.log).toEqual(["reserve"]);
    answer = { status: "absent" };
    const summary = await g.gate.recover();
    expect(summary.sagas).toMatchObject({ examined: 1, compensated: 1 });
    expect(w.log).toEqual(["reserve", "unreserve"]);
  });

  it("a step logged but never claimed is closed for good: its driver, arriving late, cannot run it", async () => {
    const w = world();
    const ledger = memoryLedger();
    const g = gateFor(w, ledger);
    const saga = g.gate.saga("o-6", scope);
    await saga.step("reserve", g.t.reserve, { n: 1 });
    await ledger.sagas!.addStep({
      tenant: "acme", sagaId: "o-6", name: "ship", tool: "ship", effect: "write", key: stepKey("o-6", "ship"), input: { n: 2 },
      inputRedacted: false, fingerprint: fingerprint("ship", { n: 2 }), compensable: true, compensation: { kind: "hook" },
      approval: "not_needed", state: "pending",
    });
    const status = await g.gate.saga("o-6", scope).compensate();
    expect(status.steps.map((s) => s.state)).toEqual(["compensated", "skipped"]);
    // The late driver's own call (same key) replays the failure instead of running.
    const [late] = await g.gate.runToolUses([toolUse(stepKey("o-6", "ship"), "ship", { n: 2 })], scope);
    expect(late).toMatchObject({ is_error: true, content: expect.stringMatching(/^EG_SAGA_CLOSED: not executed: saga o-6 was being compensated/) });
    await expect(g.gate.saga("o-6", scope).step("ship", g.t.ship, { n: 2 })).rejects.toThrow(/EG_SAGA_CLOSED/);
    expect(w.count("ship")).toBe(0);
  });
});

describe("sagas: tagged agent calls", () => {
  it("tool calls tagged scope.saga form a saga; a failure rolls back and closes it; replays run nothing", async () => {
    const w = world();
    const ledger = memoryLedger();
    const g = gateFor(w, ledger);
    const tagged = { ...scope, saga: "chat-1" };
    const [a, b] = await g.gate.runToolUses([toolUse("toolu_1", "reserve", { n: 1 }), toolUse("toolu_2", "look", {})], tagged);
    expect(a).toMatchObject({ is_error: false });
    expect(JSON.parse(a!.content)).toMatchObject({ op: "reserve", key: "saga:chat-1:toolu_1" });
    expect(b).toMatchObject({ is_error: false, content: JSON.stringify({ stock: 3 }) });
    await g.gate.runToolUses([toolUse("toolu_3", "ship", { n: 2 })], tagged);
    w.fail.add("reserve");
    const [c] = await g.gate.runToolUses([toolUse("toolu_4", "reserve", { n: 9 })], tagged);
    expect(c!.is_error).toBe(true);
    expect(c!.content).toMatch(/^EG_SAGA_FAILED: reserve .*reserve refused by the downstream.*Saga chat-1 was rolled back/);
    expect(w.log).toEqual(["reserve", "ship", "unship", "unreserve"]);
    const [d] = await g.gate.runToolUses([toolUse("toolu_5", "reserve", { n: 1 })], tagged);
    expect(d!.content).toMatch(/^EG_SAGA_CLOSED: saga chat-1 is compensated .*not executed/);
    w.fail.delete("reserve");
    const [replay] = await g.gate.runToolUses([toolUse("toolu_4", "reserve", { n: 9 })], tagged);
    expect(replay!.content).toMatch(/^EG_SAGA_FAILED/);
    expect(w.log).toEqual(["reserve", "ship", "unship", "unreserve"]);
    const status = await g.gate.saga("chat-1", scope).status();
    expect(status?.steps.map((s) => [s.name, s.state])).toEqual([["toolu_1", "compensated"], ["toolu_3", "compensated"], ["toolu_4", "failed"]]);
  });

  it("a checkpoint keeps the saga tag: resume answers the pending call as a step of its saga, once", async () => {
    const w = world();
    const ledger = memoryLedger();
    const g = gateFor(w, ledger);
    const store = ledgerCheckpoint(ledger, { tenant: "acme", id: "run-1" });
    const pending = [toolUse("toolu_9", "ship", { n: 4 })];
    await store.save({ scope: { ...scope, saga: "chat-3" }, messages: [], counters: {}, pendingToolUse: pending });
    const first = await g.gate.resume(store);
    expect(first.checkpoint?.scope).toEqual({ ...scope, saga: "chat-3" });
    expect(first.toolResults[0]).toMatchObject({ is_error: false });
    const again = await gateFor(w, ledger).gate.resume(store);
    expect(again.toolResults[0]?.content).toBe(first.toolResults[0]?.content);
    expect(w.log).toEqual(["ship"]);
    expect((await g.gate.saga("chat-3", scope).status())?.steps.map((s) => [s.name, s.key])).toEqual([["toolu_9", "saga:chat-3:toolu_9"]]);
  });

  it("a tool's compensateWith undoes tagged calls with another tool, its input computed from the result", async () => {
    const w = world();
    const t = tools(w);
    const charge = defineTool({
      name: "charge", effect: "write", input: z.object({ n: z.number() }),
      execute: (input, ctx) => w.apply("charge", ctx.idempotencyKey, input.n),
      compensateWith: { tool: "refund", input: (_input, result) => ({ charge: result.key }) },
    });
    expect(() => defineTool({ name: "x", effect: "write", input: z.object({}), execute: () => 1, compensable: false, compensateWith: { tool: "refund", input: () => ({}) } }))
      .toThrow(/EG_BAD_TOOL_DEFINITION: .*compensable: false contradicts its compensation/);
    const gate = createGate({ tools: [charge, t.refund, t.ship], ledger: memoryLedger(), onAlert: () => undefined });
    const tagged = { ...scope, saga: "chat-4" };
    await gate.runToolUses([toolUse("toolu_1", "charge", { n: 7 })], tagged);
    w.fail.add("ship");
    const [r] = await gate.runToolUses([toolUse("toolu_2", "ship", { n: 1 })], tagged);
    expect(r!.content).toMatch(/^EG_SAGA_FAILED/);
    expect(w.log).toEqual(["charge", "refund"]);
    expect(w.applied.get("saga:chat-4:toolu_1:compensate")).toEqual({ op: "refund", arg: "saga:chat-4:toolu_1" });
  });

  it("a non-compensable tagged call without approval is answered EG_SAGA_FAILED and never runs", async () => {
    const w = world();
    const g = gateFor(w, memoryLedger());
    const tagged = { ...scope, saga: "chat-2" };
    await g.gate.runToolUses([toolUse("toolu_1", "reserve", { n: 1 })], tagged);
    const [r] = await g.gate.runToolUses([toolUse("toolu_2", "mail", { n: 1 })], tagged);
    expect(r!.content).toMatch(/^EG_SAGA_FAILED: mail .*neither an approveNonCompensable policy .* nor a governance approval rule covers it/);
    expect(w.log).toEqual(["reserve", "unreserve"]);
  });
});

describe("sagas: recovery", () => {
  async function abandoned(ledger: Stores, state: "running" | "compensating", onAbandon: "hold" | "compensate" = "hold") {
    const w = world();
    const g = gateFor(w, ledger);
    const saga = g.gate.saga("o-8", scope, { onAbandon });
    await saga.step("reserve", g.t.reserve, { n: 1 });
    await saga.step("ship", g.t.ship, { n: 2 });
    // Its driver vanished (another host, lease over) while running or compensating.
    const s = (await ledger.sagas!.get("acme", "o-8"))!;
    await ledger.sagas!.update("acme", "o-8", s.version, { state, owner: "other-host/1/dead", leaseMs: -1 });
    return { w, g };
  }

  it("a compensating saga whose driver died is compensated by recover()", async () => {
    const ledger = memoryLedger();
    const { w, g } = await abandoned(ledger, "compensating");
    const summary = await g.gate.recover();
    expect(summary.sagas).toMatchObject({ examined: 1, compensated: 1, stalled: 0 });
    expect(w.log).toEqual(["reserve", "ship", "unship", "unreserve"]);
    const kinds = (await ledger.sagas!.history("acme", "o-8")).map((e) => e.kind);
    expect(kinds).toContain("driver_resumed");
  });

  it("a running saga whose driver died is marked stalled, not continued; its driver resumes it by running it again", async () => {
    const ledger = memoryLedger();
    const { w, g } = await abandoned(ledger, "running");
    const alerts: Alert[] = [];
    const fresh = gateFor(w, ledger, { onAlert: (a) => alerts.push(a) });
    const summary = await fresh.gate.recover();
    expect(summary.sagas).toMatchObject({ examined: 1, stalled: 1, compensated: 0 });
    expect(await ledger.sagas!.get("acme", "o-8")).toMatchObject({ state: "stalled", owner: null, reason: expect.stringMatching(/effectgate saga compensate o-8/) });
    expect(alerts[0]?.message).toMatch(/saga o-8 stalled/);
    expect((await fresh.gate.recover()).sagas).toBeUndefined();
    const saga = fresh.gate.saga("o-8", scope);
    await saga.step("reserve", g.t.reserve, { n: 1 });
    await saga.step("ship", g.t.ship, { n: 2 });
    expect((await saga.finish()).state).toBe("completed");
    expect(w.log).toEqual(["reserve", "ship"]);
  });

  it("onAbandon: compensate → recover() rolls the dead driver's saga back", async () => {
    const ledger = memoryLedger();
    const { w, g } = await abandoned(ledger, "running", "compensate");
    const summary = await g.gate.recover();
    expect(summary.sagas).toMatchObject({ compensated: 1 });
    expect(w.log).toEqual(["reserve", "ship", "unship", "unreserve"]);
  });

  it("a step-level compensation input that was never logged (driver died mid-step) goes to a person under recovery alone", async () => {
    const w = world();
    const ledger = memoryLedger();
    const g = gateFor(w, ledger);
    const saga = g.gate.saga("o-4", scope, { onAbandon: "compensate" });
    await saga.step("reserve", g.t.reserve, { n: 1 });
    // The driver logged the step and ran its call, then died before logging the outcome.
    await ledger.sagas!.addStep({
      tenant: "acme", sagaId: "o-4", name: "charge", tool: "charge", effect: "write", key: stepKey("o-4", "charge"), input: { n: 5 },
      inputRedacted: false, fingerprint: fingerprint("charge", { n: 5 }), compensable: true, compensation: { kind: "tool", tool: "refund", input: null },
      approval: "not_needed", state: "pending",
    });
    await g.gate.runToolUses([toolUse(stepKey("o-4", "charge"), "charge", { n: 5 })], { ...scope, task: "elsewhere" }); // its call completed
    const s = (await ledger.sagas!.get("acme", "o-4"))!;
    await ledger.sagas!.update("acme", "o-4", s.version, { state: "running", owner: "other-host/1/dead", leaseMs: -1 });
    const fresh = gateFor(w, ledger);
    expect((await fresh.gate.recover()).sagas).toMatchObject({ compensationFailed: 1 });
    const status = await fresh.gate.saga("o-4", scope).status();
    expect(status?.steps.map((x) => [x.name, x.state])).toEqual([["reserve", "compensated"], ["charge", "compensation_failed"]]);
    expect(status?.steps[1]?.error).toMatch(/its compensation input \(for refund\) was never recorded/);
    expect(w.log).toEqual(["reserve", "charge", "unreserve"]);
  });

  it("a saga held by a live driver is left alone", async () => {
    const w = world();
    const ledger = memoryLedger();
    const g = gateFor(w, ledger);
    const saga = g.gate.saga("o-1", scope);
    await saga.step("reserve", g.t.reserve, { n: 1 });
    const other = gateFor(w, ledger);
    const summary = await other.gate.recover();
    expect(summary.sagas).toMatchObject({ examined: 1, leftForLater: 1 });
    expect(summary.sagas?.notes[0]?.note).toMatch(/driven by a live worker/);
    expect((await saga.status())?.state).toBe("running");
  });
});
