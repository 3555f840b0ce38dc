/**
 * Intent windows (ToolSpec.repeats): the same effect asked for again under a NEW tool_use id, the
 * way a model re-plans a payment after a timeout. Every effect is counted in the tool itself; the
 * ledger's clock is moved by hand, so "after the window" is exact, not slept for.
 */
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { defineTool, type ToolSpec } from "../../src/core/tool.js";
import type { RepeatPolicy } from "../../src/core/repeats.js";
import type { StandardSchemaV1 } from "../../src/core/standard-schema.js";
import { createGate } from "../../src/root/create-gate.js";
import { memoryLedger } from "../../src/stores/memory/index.js";
import { sqliteLedger } from "../../src/stores/sqlite/index.js";
import { tempDir } from "../support/tmp.js";
import { join } from "node:path";
import { decideApproval } from "../../src/governance/approvals.js";
import { awaitingApproval } from "../../src/governance/awaiting.js";
import type { Stores } from "../../src/contracts/stores.js";
import type { CallStore } from "../../src/contracts/calls.js";
import { effects, manualClock, use, type Effects } from "../governance/support.js";

const scope = { tenant: "acme", task: "order-7" };
const dir = tempDir("effectgate-repeats-");
const MINUTE = 60_000;
const payment = { customer: "cus_1", amount: 4200 };

function paymentTool(fx: Effects, extra: Partial<ToolSpec<StandardSchemaV1, unknown>> = {}, gateOpen?: Promise<void>) {
  return defineTool({
    name: "send_payment",
    effect: "write",
    input: z.object({ customer: z.string(), amount: z.number() }),
    async execute(input: { amount: number }, ctx: { idempotencyKey: string }) {
      fx.log.push(`send_payment:${ctx.idempotencyKey}`);
      await gateOpen;
      return { paymentId: `pay_${fx.count()}`, amount: input.amount };
    },
    ...extra,
  });
}

function deleteTool(fx: Effects, extra: Partial<ToolSpec<StandardSchemaV1, unknown>> = {}) {
  return defineTool({
    name: "delete_account",
    effect: "destructive",
    input: z.object({ account: z.string() }),
    async execute(input: { account: string }, ctx: { idempotencyKey: string }) {
      fx.log.push(`delete_account:${ctx.idempotencyKey}`);
      return { deleted: input.account };
    },
    dryRun: (input: { account: string }) => ({ effect: "would_delete", would_affect: { account: input.account }, reversible: false }),
    ...extra,
  });
}

function setup(tools: (fx: Effects) => ReturnType<typeof defineTool>[], ledgerOf: (clock: () => number) => Stores = (clock) => memoryLedger({ clock })) {
  const fx = effects();
  const clock = manualClock();
  const ledger = ledgerOf(clock.now);
  const gate = createGate({ ledger, tools: tools(fx), clock: clock.now, onAlert: () => {} });
  const run = async (id: string, name: string, input: unknown, s = scope) => (await gate.runToolUses([use(id, name, input)], s))[0]!;
  return { fx, clock, ledger, gate, run };
}

describe("collapse: the repeat is answered with the first call's result", () => {
  const tools = (fx: Effects) => [paymentTool(fx, { repeats: { action: "collapse", windowMs: 10 * MINUTE } })];

  it("a re-planned payment under a new id runs nothing and gets the first payment's result, saying so; the agent's value is the same", async () => {
    const { fx, gate, run } = setup(tools);
    const first = await run("toolu_1", "send_payment", payment);
    expect(first).toMatchObject({ is_error: false, content: '{"paymentId":"pay_1","amount":4200}' });
    const again = await run("toolu_2", "send_payment", payment);
    expect(again.is_error).toBe(false);
    expect(again.content).toMatch(/^\[effectgate: this send_payment call repeats call toolu_1 \(same input, completed .*\); it was not executed again\. That call's result:\]\n\{"paymentId":"pay_1","amount":4200\}$/);
    expect(fx.log).toEqual(["send_payment:toolu_1"]);
    // Through runTool (what the SDK adapters use) the value is the first call's.
    const viaAdapter = await gate.runTool({ id: "toolu_3", name: "send_payment", input: payment }, scope);
    expect(viaAdapter).toMatchObject({ ok: true, result: { paymentId: "pay_1", amount: 4200 } });
    expect(fx.count()).toBe(1);
  });

  it("the collapse is recorded under the new id: replayed after the window it still runs nothing", async () => {
    const { fx, clock, ledger, run } = setup(tools);
    await run("toolu_1", "send_payment", payment);
    await run("toolu_2", "send_payment", payment);
    expect(await ledger.calls.get("acme", "toolu_2")).toMatchObject({ state: "completed", result: { paymentId: "pay_1" }, attempts: 0, owner: null });
    clock.advance(60 * MINUTE);
    expect(await run("toolu_2", "send_payment", payment)).toMatchObject({ is_error: false, content: '{"paymentId":"pay_1","amount":4200}' });
    expect(fx.count()).toBe(1);
  });

  it("after the window, the same input under a new id is a new payment; another task, another input or another tenant is never a repeat", async () => {
    const { fx, clock, run } = setup(tools);
    await run("toolu_1", "send_payment", payment);
    await run("toolu_o", "send_payment", payment, { tenant: "acme", task: "order-8" });
    await run("toolu_i", "send_payment", { ...payment, amount: 4300 });
    await run("toolu_t", "send_payment", payment, { tenant: "globex", task: "order-7" });
    expect(fx.count()).toBe(4);
    clock.advance(10 * MINUTE + 1);
    await run("toolu_late", "send_payment", payment);
    expect(fx.log.at(-1)).toBe("send_payment:toolu_late");
    expect(fx.count()).toBe(5);
  });

  it("while the first is still running, the repeat is not executed and not recorded; repeated once the first completed, it is collapsed", async () => {
    let release!: () => void;
    const open = new Promise<void>((resolve) => (release = resolve));
    const { fx, ledger, gate } = setup((fx) => [paymentTool(fx, { repeats: { action: "collapse" } }, open)]);
    const firstCall = gate.runToolUses([use("toolu_1", "send_payment", payment)], scope);
    while (fx.count() === 0) await new Promise((resolve) => setImmediate(resolve));
    const [during] = await gate.runToolUses([use("toolu_2", "send_payment", payment)], scope);
    expect(during).toMatchObject({ is_error: true });
    expect(during!.content).toMatch(/^EG_REPEATED_CALL: this send_payment call repeats call toolu_1 of this task \(same input, key toolu_1\), which is still running/);
    expect(await ledger.calls.get("acme", "toolu_2")).toBeUndefined();
    release();
    await firstCall;
    const [after] = await gate.runToolUses([use("toolu_2", "send_payment", payment)], scope);
    expect(after!.content).toMatch(/repeats call toolu_1 .*\n\{"paymentId":"pay_1","amount":4200\}$/);
    expect(fx.count()).toBe(1);
  });

  it("a first payment that failed (nothing happened) is no reason to hold the second: it runs", async () => {
    const fx = effects();
    let fail = true;
    const tool = defineTool({
      name: "send_payment", effect: "write", input: z.object({ customer: z.string(), amount: z.number() }), repeats: { action: "collapse" },
      async execute(_input, ctx) {
        fx.log.push(`send_payment:${ctx.idempotencyKey}`);
        if (fail) throw Object.assign(new Error("card declined"), { status: 402 });
        return { paid: true };
      },
    });
    const gate = createGate({ ledger: memoryLedger(), tools: [tool], onAlert: () => {} });
    const [first] = await gate.runToolUses([use("toolu_1", "send_payment", payment)], scope);
    expect(first).toMatchObject({ is_error: true });
    fail = false;
    const [second] = await gate.runToolUses([use("toolu_2", "send_payment", payment)], scope);
    expect(second).toMatchObject({ is_error: false, content: '{"paid":true}' });
    expect(fx.log).toEqual(["send_payment:toolu_1", "send_payment:toolu_2"]);
  });
});

describe("refuse: the default for destructive tools", () => {
  it("a destructive call approved and run once is refused when asked again under a new id, naming the first; the refusal is kept for every replay", async () => {
    const { fx, clock, ledger, gate, run } = setup((fx) => [deleteTool(fx)]);
    const pending = await run("toolu_1", "delete_account", { account: "acc_9" });
    const id = awaitingApproval(pending)!;
    await decideApproval(ledger.governance!, id, { approve: true, by: "alice" }, clock.now());
    expect(await run("toolu_1", "delete_account", { account: "acc_9" })).toMatchObject({ is_error: false, content: '{"deleted":"acc_9"}' });

    const again = await run("toolu_2", "delete_account", { account: "acc_9" });
    expect(again.is_error).toBe(true);
    expect(again.content).toMatch(/^EG_REPEATED_CALL: this delete_account call repeats call toolu_1 of this task \(same input, key toolu_1\), which completed at .* with the result \{"deleted":"acc_9"\}\. It was not executed again: the effect already happened once\./);
    // Refused before governance: no approval request was filed for the repeat.
    expect((await ledger.governance!.listApprovals()).map((a) => a.key)).toEqual(["toolu_1"]);
    clock.advance(24 * 60 * MINUTE);
    expect((await run("toolu_2", "delete_account", { account: "acc_9" })).content).toBe(again.content);
    expect(fx.log).toEqual(["delete_account:toolu_1"]);
    void gate;
  });

  it("repeats: false turns the window off (a second deletion under a new id goes to approval like any other)", async () => {
    const { fx, clock, ledger, run } = setup((fx) => [deleteTool(fx, { repeats: false })]);
    for (const id of ["toolu_1", "toolu_2"]) {
      const pending = await run(id, "delete_account", { account: "acc_9" });
      await decideApproval(ledger.governance!, awaitingApproval(pending)!, { approve: true, by: "alice" }, clock.now());
      await run(id, "delete_account", { account: "acc_9" });
    }
    expect(fx.log).toEqual(["delete_account:toolu_1", "delete_account:toolu_2"]);
  });
});

describe("approve: a person decides about the repeat", () => {
  const tools = (fx: Effects) => [paymentTool(fx, { repeats: { action: "approve", windowMs: 10 * MINUTE } })];

  it("the repeat waits for an approval that names the first call; approved, it runs once", async () => {
    const { fx, clock, ledger, run } = setup(tools);
    await run("toolu_1", "send_payment", payment);
    const waiting = await run("toolu_2", "send_payment", payment);
    expect(waiting.content).toMatch(/^EG_AWAITING_APPROVAL: this send_payment call needs a person's approval before it runs \(it repeats call toolu_1 of this task/);
    const [request] = await ledger.governance!.listApprovals({ state: "pending" });
    expect(request).toMatchObject({ key: "toolu_2", reasons: [expect.stringMatching(/^it repeats call toolu_1 of this task/)] });
    expect(fx.count()).toBe(1);
    await decideApproval(ledger.governance!, request!.id, { approve: true, by: "alice", note: "customer asked for two" }, clock.now());
    expect(await run("toolu_2", "send_payment", payment)).toMatchObject({ is_error: false, content: '{"paymentId":"pay_2","amount":4200}' });
    expect(await run("toolu_2", "send_payment", payment)).toMatchObject({ content: '{"paymentId":"pay_2","amount":4200}' });
    expect(fx.log).toEqual(["send_payment:toolu_1", "send_payment:toolu_2"]);
  });

  it("denied, it never runs, even replayed long after the first call left the window", async () => {
    const { fx, clock, ledger, run } = setup(tools);
    await run("toolu_1", "send_payment", payment);
    const waiting = await run("toolu_2", "send_payment", payment);
    await decideApproval(ledger.governance!, awaitingApproval(waiting)!, { approve: false, by: "bob", note: "duplicate" }, clock.now());
    expect((await run("toolu_2", "send_payment", payment)).content).toMatch(/^EG_APPROVAL_DENIED/);
    clock.advance(60 * MINUTE);
    expect((await run("toolu_2", "send_payment", payment)).content).toMatch(/^EG_APPROVAL_DENIED/);
    expect(fx.count()).toBe(1);
  });

  it("still pending when the first call leaves the window, it keeps waiting for the person", async () => {
    const { fx, clock, run } = setup(tools);
    await run("toolu_1", "send_payment", payment);
    await run("toolu_2", "send_payment", payment);
    clock.advance(60 * MINUTE);
    expect((await run("toolu_2", "send_payment", payment)).content).toMatch(/^EG_AWAITING_APPROVAL: .*Its approval request apr_/);
    expect(fx.count()).toBe(1);
  });
});

describe("concurrent repeats in one process", () => {
  it("ten calls with one input under ten ids at once: one payment, every other call told which call it repeats or given its result", async () => {
    const { fx, gate } = setup((fx) => [paymentTool(fx, { repeats: { action: "collapse" } })]);
    const blocks = await gate.runToolUses(Array.from({ length: 10 }, (_, i) => use(`toolu_${i}`, "send_payment", payment)), scope);
    expect(fx.count()).toBe(1);
    const ran = blocks.filter((b) => b.content === '{"paymentId":"pay_1","amount":4200}');
    expect(ran).toHaveLength(1);
    for (const b of blocks.filter((x) => x !== ran[0])) expect(b.content).toMatch(/^(EG_REPEATED_CALL: |\[effectgate: )this send_payment call repeats call /);
  });
});

describe("definitions", () => {
  it("a bad repeats option is refused when the tool is defined, by name", () => {
    const fx = effects();
    expect(() => paymentTool(fx, { repeats: { action: "merge" as never } })).toThrow(/repeats\.action must be one of collapse, refuse, approve \(got "merge"\)/);
    expect(() => paymentTool(fx, { repeats: { action: "refuse", windowMs: -1 } })).toThrow(/repeats\.windowMs must be a number of milliseconds, 0 or more/);
    expect(() => defineTool({ name: "look", effect: "read", input: z.object({}), repeats: { action: "refuse" }, execute: () => 1 }))
      .toThrow(/repeats applies to write and destructive tools/);
  });

  it("a ledger whose call store cannot enforce a repeats policy is refused by createGate, naming the tools", () => {
    const fx = effects();
    const base = memoryLedger();
    // A call store as a third party might write it: everything but the three repeat methods.
    const calls: CallStore = { ...base.calls };
    delete calls.findRepeat;
    delete calls.claimUnlessRepeated;
    delete calls.claimAnswered;
    const ledger: Stores = { ...base, calls };
    expect(() => createGate({ ledger, tools: [paymentTool(fx, { repeats: { action: "collapse" } })] }))
      .toThrow(/EG_BAD_OPTION: the tools send_payment set a repeats policy, but the ledger memory cannot enforce one/);
    // The destructive default needs no option: such a ledger still runs destructive tools.
    expect(() => createGate({ ledger, tools: [deleteTool(fx)] })).not.toThrow();
  });
});

/** What an SDK's approval surface is told (gate.approvalFor): the same judgement the pipeline makes when the call runs. */
describe("approvalFor asks the repeats policy as the pipeline will", () => {
  const approvalPolicy = { approvals: { rules: [{ tool: "send_payment", reason: "payments are checked" }] } };
  function gateWith(repeats: RepeatPolicy, policy?: object) {
    const fx = effects();
    const clock = manualClock();
    const ledger = memoryLedger({ clock: clock.now });
    const gate = createGate({ ledger, tools: [paymentTool(fx, { repeats })], clock: clock.now, onAlert: () => {}, ...(policy ? { policy } : {}) });
    const call = (id: string) => ({ id, name: "send_payment", input: payment });
    return { fx, clock, ledger, gate, call };
  }

  it("approve: the repeat is pending with a request that names the first call; the first call and another task need nobody", async () => {
    const { fx, clock, gate, call } = gateWith({ action: "approve" });
    expect(await gate.approvalFor(call("toolu_1"), scope)).toEqual({ state: "not_needed" });
    await gate.runToolUses([use("toolu_1", "send_payment", payment)], scope);
    const status = await gate.approvalFor(call("toolu_2"), scope);
    expect(status.state).toBe("pending");
    expect("record" in status && status.record.reasons).toEqual([expect.stringMatching(/^it repeats call toolu_1 of this task/)]);
    expect(await gate.approvalFor(call("toolu_3"), { tenant: "acme", task: "order-8" })).toEqual({ state: "not_needed" });
    // The request the surface filed is the one the pipeline waits on: approved there, the call runs once.
    await decideApproval(gate.ledger.governance!, "record" in status ? status.id : "", { approve: true, by: "alice" }, clock.now());
    expect((await gate.runToolUses([use("toolu_2", "send_payment", payment)], scope))[0]).toMatchObject({ is_error: false });
    expect(fx.log).toEqual(["send_payment:toolu_1", "send_payment:toolu_2"]);
  });

  it.each(["collapse", "refuse"] as const)("%s: a repeat a rule would put before a person needs nobody, since it is answered without running", async (action) => {
    const { fx, clock, gate, call } = gateWith({ action }, approvalPolicy);
    const first = await gate.approvalFor(call("toolu_1"), scope);
    expect(first.state).toBe("pending");
    await decideApproval(gate.ledger.governance!, "id" in first ? first.id : "", { approve: true, by: "alice" }, clock.now());
    await gate.runToolUses([use("toolu_1", "send_payment", payment)], scope);
    expect(await gate.approvalFor(call("toolu_2"), scope)).toEqual({ state: "not_needed" });
    expect(await gate.ledger.governance!.listApprovals({ state: "pending" })).toEqual([]);
    expect(fx.count()).toBe(1);
  });
});

describe("the intent is what the tool runs with, not what the model sent (issue 23, defect 6)", () => {
  // currency has a default and the schema strips fields it does not know: three spellings, one payment.
  const refund = (fx: Effects) => defineTool({
    name: "refund", effect: "write",
    input: z.object({ order: z.string(), amount: z.number(), currency: z.string().default("EUR") }),
    repeats: { action: "collapse" },
    async execute(input: { order: string; amount: number; currency: string }, ctx: { idempotencyKey: string }) {
      fx.log.push(`refund:${ctx.idempotencyKey}`);
      return { refundId: `re_${fx.count()}`, ...input };
    },
  });
  const ledgers: [string, (clock: () => number) => Stores][] = [
    ["memory", (clock) => memoryLedger({ clock })],
    ["SQLite", (clock) => sqliteLedger(join(dir, `intent-${Math.random().toString(36).slice(2)}.db`), { clock })],
  ];
  for (const [name, ledgerOf] of ledgers) {
    it(`${name}: a re-plan that spells out a default or adds a field the schema strips is collapsed, not paid again`, async () => {
      const { fx, ledger, run } = setup((f) => [refund(f) as unknown as ReturnType<typeof defineTool>], ledgerOf);
      const first = await run("toolu_1", "refund", { order: "o-1", amount: 30 });
      expect(first.is_error).toBe(false);
      const spelledOut = await run("toolu_2", "refund", { amount: 30, currency: "EUR", order: "o-1" });
      const extraField = await run("toolu_3", "refund", { order: "o-1", amount: 30, reason: "customer asked again" });
      for (const again of [spelledOut, extraField]) {
        expect(again.content).toMatch(/^\[effectgate: this refund call repeats call toolu_1 /);
        expect(again.content).toContain('"refundId":"re_1"');
      }
      expect(fx.log).toEqual(["refund:toolu_1"]);
      // What was sent is still what the key-mismatch check compares: the same id with another spelling is a mismatch.
      expect((await run("toolu_1", "refund", { order: "o-1", amount: 30, currency: "EUR" })).content).toMatch(/^EG_KEY_MISMATCH\b/);
      // Another currency is another refund.
      await run("toolu_4", "refund", { order: "o-1", amount: 30, currency: "USD" });
      expect(fx.count()).toBe(2);
      await ledger.close();
    });
  }
});
