import { describe, expect, it } from "vitest";
import { z } from "zod";
import { createGate } from "../../src/root/create-gate.js";
import { defineTool } from "../../src/core/tool.js";
import { memoryLedger } from "../../src/stores/memory/index.js";
import type { Alert } from "../../src/gate/alerts.js";
import { chargeTool, counter, toolUse } from "../support/tools.js";

const scope = { tenant: "acme", task: "refund-42" };

describe("runToolUses", () => {
  it("answers each tool_use with a tool_result in order, skipping other blocks", async () => {
    const c = counter();
    const gate = createGate({ tools: [chargeTool(c)], ledger: memoryLedger() });
    const results = await gate.runToolUses([
      { type: "text", text: "Charging now." },
      toolUse("toolu_a", "charge_card", { customer: "cus_1", amount: 10 }),
      { type: "thinking", thinking: "..." },
      toolUse("toolu_b", "charge_card", { customer: "cus_2", amount: 20 }),
    ], scope);
    expect(results.map((r) => r.tool_use_id)).toEqual(["toolu_a", "toolu_b"]);
    expect(results.every((r) => r.type === "tool_result" && r.is_error === false)).toBe(true);
    expect(JSON.parse(results[0]!.content)).toMatchObject({ customer: "cus_1", amount: 10 });
    expect(JSON.parse(results[1]!.content)).toMatchObject({ customer: "cus_2", amount: 20 });
  });

  it("replaying the same content executes nothing and returns the recorded results verbatim", async () => {
    const c = counter();
    const gate = createGate({ tools: [chargeTool(c)], ledger: memoryLedger() });
    const content = [toolUse("toolu_a", "charge_card", { customer: "cus_1", amount: 10 }), toolUse("toolu_b", "charge_card", { customer: "cus_2", amount: 5 })];
    const first = await gate.runToolUses(content, scope);
    const second = await gate.runToolUses(content, scope);
    const third = await gate.runToolUses(content, scope);
    expect(c.total).toBe(2);
    expect(second).toEqual(first);
    expect(third).toEqual(first);
    expect(gate.stats).toMatchObject({ executed: 2, replayed: 4 });
  });

  it("passes the idempotency key, tool_use id, scope, an AbortSignal and the attempt to the tool", async () => {
    let seen: unknown;
    const tool = defineTool({
      name: "send_email", effect: "write", input: z.object({ to: z.string() }),
      execute: (_input, ctx) => {
        seen = { key: ctx.idempotencyKey, id: ctx.toolUseId, scope: ctx.scope, aborted: ctx.signal.aborted, attempt: ctx.attempt };
        return "sent";
      },
    });
    const gate = createGate({ tools: [tool], ledger: memoryLedger() });
    await gate.runToolUses([toolUse("toolu_x", "send_email", { to: "a@b.c" })], scope);
    expect(seen).toEqual({ key: "toolu_x", id: "toolu_x", scope, aborted: false, attempt: 1 });
  });

  it("same key with different input is a clear mismatch: nothing runs and the record is untouched", async () => {
    const c = counter();
    const ledger = memoryLedger();
    const gate = createGate({ tools: [chargeTool(c)], ledger });
    await gate.runToolUses([toolUse("toolu_a", "charge_card", { customer: "cus_1", amount: 10 })], scope);
    const before = await ledger.calls.get("acme", "toolu_a");
    const [result] = await gate.runToolUses([toolUse("toolu_a", "charge_card", { customer: "cus_1", amount: 9999 })], scope);
    expect(result).toMatchObject({ tool_use_id: "toolu_a", is_error: true });
    expect(result!.content).toMatch(/^EG_KEY_MISMATCH: idempotency key toolu_a was first used by a call of charge_card with different input/);
    expect(c.total).toBe(1);
    expect(await ledger.calls.get("acme", "toolu_a")).toEqual(before);
  });

  it("key order in the input does not make a mismatch (canonical JSON)", async () => {
    const c = counter();
    const gate = createGate({ tools: [chargeTool(c)], ledger: memoryLedger() });
    const [a] = await gate.runToolUses([toolUse("toolu_a", "charge_card", { customer: "cus_1", amount: 10 })], scope);
    const [b] = await gate.runToolUses([toolUse("toolu_a", "charge_card", { amount: 10, customer: "cus_1" })], scope);
    expect(b).toEqual(a);
    expect(c.total).toBe(1);
  });

  it("a tool that throws leaves a failed record and an is_error result; a replay returns the same failure", async () => {
    let runs = 0;
    const tool = defineTool({
      name: "create_ticket", effect: "write", input: z.object({ title: z.string() }),
      execute: () => {
        runs++;
        throw new Error("ticketing said 503");
      },
    });
    const ledger = memoryLedger();
    const gate = createGate({ tools: [tool], ledger });
    const [first] = await gate.runToolUses([toolUse("toolu_t", "create_ticket", { title: "x" })], scope);
    expect(first).toEqual({ type: "tool_result", tool_use_id: "toolu_t", is_error: true, content: "EG_TOOL_FAILED: create_ticket failed: ticketing said 503" });
    expect(await ledger.calls.get("acme", "toolu_t")).toMatchObject({ state: "failed", error: first!.content, owner: null });
    const [again] = await gate.runToolUses([toolUse("toolu_t", "create_ticket", { title: "x" })], scope);
    expect(again).toEqual(first);
    expect(runs).toBe(1);
  });

  it("records are scoped by tenant: the same tool_use id in another tenant never sees the first tenant's result", async () => {
    const c = counter();
    const gate = createGate({ tools: [chargeTool(c)], ledger: memoryLedger() });
    const content = [toolUse("toolu_same", "charge_card", { customer: "cus_1", amount: 10 })];
    const [acme] = await gate.runToolUses(content, { tenant: "acme", task: "t" });
    const [globex] = await gate.runToolUses(content, { tenant: "globex", task: "t" });
    expect(c.total).toBe(2);
    expect(JSON.parse(acme!.content).chargeId).not.toBe(JSON.parse(globex!.content).chargeId);
  });

  it("a derived key collapses twins the model emitted under two ids into one effect", async () => {
    const c = counter();
    const gate = createGate({ tools: [chargeTool(c, { key: "derived" })], ledger: memoryLedger() });
    const results = await gate.runToolUses([
      toolUse("toolu_1", "charge_card", { customer: "cus_1", amount: 10 }),
      toolUse("toolu_2", "charge_card", { customer: "cus_1", amount: 10 }),
      toolUse("toolu_3", "charge_card", { customer: "cus_1", amount: 11 }),
    ], scope);
    expect(c.total).toBe(2);
    expect(results.map((r) => r.is_error)).toEqual([false, false, false]);
    expect(JSON.parse(results[0]!.content)).toEqual(JSON.parse(results[1]!.content));
    expect(results.map((r) => r.tool_use_id)).toEqual(["toolu_1", "toolu_2", "toolu_3"]);
  });

  it("a key function chooses the key", async () => {
    const keys: string[] = [];
    const tool = defineTool({
      name: "ship_order", effect: "write", input: z.object({ orderId: z.string() }),
      key: (input) => `ship:${input.orderId}`,
      execute: (_input, ctx) => {
        keys.push(ctx.idempotencyKey);
        return "shipped";
      },
    });
    const gate = createGate({ tools: [tool], ledger: memoryLedger() });
    await gate.runToolUses([toolUse("a", "ship_order", { orderId: "o-1" }), toolUse("b", "ship_order", { orderId: "o-1" })], scope);
    expect(keys).toEqual(["ship:o-1"]);
  });

  it("concurrent twins in one process: one executes, the other waits and gets the same result", async () => {
    const c = counter();
    let release!: () => void;
    const gateOpen = new Promise<void>((r) => (release = r));
    const slow = defineTool({
      name: "charge_card", effect: "write", input: z.object({ amount: z.number() }),
      async execute(input) {
        c.total++;
        await gateOpen;
        return { charged: input.amount };
      },
    });
    const gate = createGate({ tools: [slow], ledger: memoryLedger() });
    const content = [toolUse("toolu_twin", "charge_card", { amount: 5 })];
    const first = gate.runToolUses(content, scope);
    const second = gate.runToolUses(content, scope);
    release();
    const [a, b] = await Promise.all([first, second]);
    expect(c.total).toBe(1);
    expect(b).toEqual(a);
    expect(a[0]!.is_error).toBe(false);
  });

  it("stores redacted input in the ledger but still detects a mismatch on the redacted field", async () => {
    const ledger = memoryLedger();
    const tool = defineTool({
      name: "pay", effect: "write", input: z.object({ card: z.object({ number: z.string(), exp: z.string() }), amount: z.number() }),
      redact: ["card.number"],
      execute: () => "paid",
    });
    const gate = createGate({ tools: [tool], ledger });
    await gate.runToolUses([toolUse("toolu_p", "pay", { card: { number: "4242424242424242", exp: "12/30" }, amount: 3 })], scope);
    const record = await ledger.calls.get("acme", "toolu_p");
    expect(record).toMatchObject({ input: { card: { number: "[redacted]", exp: "12/30" }, amount: 3 }, inputRedacted: true });
    expect(JSON.stringify(record)).not.toContain("4242424242424242");
    const [mismatch] = await gate.runToolUses([toolUse("toolu_p", "pay", { card: { number: "5555555555554444", exp: "12/30" }, amount: 3 })], scope);
    expect(mismatch!.content).toMatch(/^EG_KEY_MISMATCH/);
  });

  it("read tools run without touching the ledger", async () => {
    const ledger = memoryLedger();
    let runs = 0;
    const lookup = defineTool({ name: "lookup_customer", effect: "read", input: z.object({ id: z.string() }), execute: (i) => ({ id: i.id, n: ++runs }) });
    const gate = createGate({ tools: [lookup], ledger });
    const content = [toolUse("toolu_r", "lookup_customer", { id: "c1" })];
    expect((await gate.runToolUses(content, scope))[0]!.content).toBe('{"id":"c1","n":1}');
    expect((await gate.runToolUses(content, scope))[0]!.content).toBe('{"id":"c1","n":2}');
    expect(await ledger.calls.list()).toEqual([]);
  });

  it("string results are returned as they are, other values as JSON, undefined as null", async () => {
    const tools = [
      defineTool({ name: "a", effect: "write", input: z.object({}), execute: () => "plain text" }),
      defineTool({ name: "b", effect: "write", input: z.object({}), execute: () => undefined }),
      defineTool({ name: "c", effect: "write", input: z.object({}), execute: () => [1, { x: "y" }] }),
    ];
    const gate = createGate({ tools, ledger: memoryLedger() });
    const results = await gate.runToolUses([toolUse("1", "a", {}), toolUse("2", "b", {}), toolUse("3", "c", {})], scope);
    expect(results.map((r) => r.content)).toEqual(["plain text", "null", '[1,{"x":"y"}]']);
  });
});

describe("bad input gets a clear error and executes nothing", () => {
  const setup = () => {
    const c = counter();
    const ledger = memoryLedger();
    return { c, ledger, gate: createGate({ tools: [chargeTool(c)], ledger }) };
  };

  it("unknown tool", async () => {
    const { c, ledger, gate } = setup();
    const [r] = await gate.runToolUses([toolUse("toolu_u", "refund_everything", {})], scope);
    expect(r).toMatchObject({ tool_use_id: "toolu_u", is_error: true });
    expect(r!.content).toBe('EG_UNKNOWN_TOOL: there is no tool named "refund_everything". Available tools: charge_card. Nothing was executed.');
    expect(c.total).toBe(0);
    expect(await ledger.calls.list()).toEqual([]);
  });

  it("schema violation names the field", async () => {
    const { c, ledger, gate } = setup();
    const [r] = await gate.runToolUses([toolUse("toolu_v", "charge_card", { customer: "cus_1", amount: -5 })], scope);
    expect(r!.is_error).toBe(true);
    expect(r!.content).toMatch(/^EG_INVALID_INPUT: the input for charge_card does not match its schema: amount: .*Nothing was executed/);
    expect(c.total).toBe(0);
    expect(await ledger.calls.list()).toEqual([]);
  });

  it("malformed blocks: missing id, missing name, non-object input", async () => {
    const { c, ledger, gate } = setup();
    const results = await gate.runToolUses([
      { type: "tool_use", name: "charge_card", input: { customer: "c", amount: 1 } },
      { type: "tool_use", id: "toolu_n", input: {} },
      { type: "tool_use", id: "toolu_i", name: "charge_card", input: "customer=c" },
      { type: "tool_use", id: "toolu_ok", name: "charge_card", input: { customer: "c", amount: 1 } },
    ], scope);
    expect(results.map((r) => [r.tool_use_id, r.is_error])).toEqual([["", true], ["toolu_n", true], ["toolu_i", true], ["toolu_ok", false]]);
    expect(results[0]!.content).toBe("EG_MALFORMED_BLOCK: tool_use block 0 has no id (a string is required), so it cannot be answered or deduplicated. Nothing was executed.");
    expect(results[1]!.content).toMatch(/^EG_MALFORMED_BLOCK: tool_use block 1 \(toolu_n\) has no tool name/);
    expect(results[2]!.content).toMatch(/^EG_MALFORMED_BLOCK: tool_use block 2 \(toolu_i\) input must be a JSON object, got string/);
    expect(c.total).toBe(1);
    expect((await ledger.calls.list()).map((r) => r.key)).toEqual(["toolu_ok"]);
  });

  it("content that is not an array, or a missing scope, throws a usage error", async () => {
    const { gate } = setup();
    await expect(gate.runToolUses({ role: "assistant", content: [] } as never, scope)).rejects.toThrow(/EG_BAD_CONTENT: .*pass message\.content/);
    await expect(gate.runToolUses([], { tenant: "", task: "t" })).rejects.toThrow(/EG_BAD_CONTENT: runToolUses needs a scope/);
  });
});

describe("defineTool and createGate refuse bad definitions up front", () => {
  const input = z.object({});
  const one = () => 1;
  it.each<[string, unknown, RegExp]>([
    ["no effect class", { name: "x", input, execute: one }, /effect must be one of read, write, destructive \(there is no default\)/],
    ["a bad name", { name: "has space", effect: "write", input, execute: one }, /name must be 1–64 characters/],
    ["no schema", { name: "x", effect: "write", input: {}, execute: one }, /input must be a Standard Schema/],
    ["no execute", { name: "x", effect: "write", input }, /execute must be a function/],
    ["a bad key", { name: "x", effect: "write", input, execute: one, key: "random" }, /key must be "tool_use_id", "derived"/],
  ])("%s", (_what, spec, message) => {
    expect(() => defineTool(spec as never)).toThrow(message);
  });

  it("two tools with one name", () => {
    const t = defineTool({ name: "x", effect: "write", input, execute: () => 1 });
    expect(() => createGate({ tools: [t, t], ledger: memoryLedger() })).toThrow(/two tools are named "x"/);
  });
});

describe("recording failures", () => {
  it("the effect happened but recording failed: the agent gets the true result and an alert is raised", async () => {
    const inner = memoryLedger();
    let failUpdates = true;
    // A ledger whose outcome writes fail, as a full disk or a dropped connection would make them.
    const ledger = { ...inner, calls: { ...inner.calls, update: (...args: Parameters<typeof inner.calls.update>) => (failUpdates ? Promise.reject(new Error("disk I/O error")) : inner.calls.update(...args)) } };
    const alerts: Alert[] = [];
    const c = counter();
    const gate = createGate({ tools: [chargeTool(c, { probe: () => ({ status: "done", result: { chargeId: "ch_1", probed: true } }) })], ledger, onAlert: (a) => alerts.push(a) });
    const content = [toolUse("toolu_a", "charge_card", { customer: "cus_1", amount: 10 })];
    const [r] = await gate.runToolUses(content, scope);
    expect(r!.is_error).toBe(false);
    expect(JSON.parse(r!.content)).toMatchObject({ chargeId: "ch_1", customer: "cus_1" });
    expect(alerts).toHaveLength(1);
    expect(alerts[0]).toMatchObject({ code: "record_failed", tenant: "acme", key: "toolu_a", tool: "charge_card" });
    expect(alerts[0]!.message).toMatch(/completed but its result could not be recorded: disk I\/O error/);
    expect(gate.stats.alerts).toBe(1);
    expect((await inner.calls.get("acme", "toolu_a"))?.state).toBe("in_progress");
    // Once the ledger works again, a replay gets the very first answer (the gate kept it) and records it: no second charge.
    failUpdates = false;
    const [again] = await gate.runToolUses(content, scope);
    expect(c.total).toBe(1);
    expect(again!.content).toBe(r!.content);
    expect(await inner.calls.get("acme", "toolu_a")).toMatchObject({ state: "completed", result: JSON.parse(r!.content) });
  });

  it("a ledger that cannot take the claim means nothing executes", async () => {
    const inner = memoryLedger();
    // Both ways of claiming fail (claimUnlessHalted is the claim with the kill switch checked inside it).
    const refused = () => Promise.reject(new Error("connection refused"));
    const ledger = { ...inner, calls: { ...inner.calls, claim: refused, claimUnlessHalted: refused } };
    const c = counter();
    const gate = createGate({ tools: [chargeTool(c)], ledger });
    const [r] = await gate.runToolUses([toolUse("toolu_a", "charge_card", { customer: "cus_1", amount: 10 })], scope);
    expect(r).toMatchObject({ is_error: true });
    expect(r!.content).toMatch(/^EG_LEDGER_UNAVAILABLE: connection refused\. The tool was not started by this request; replay this same call/);
    expect(c.total).toBe(0);
  });
});
