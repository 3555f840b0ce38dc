/** Grants, kill switches, quotas and rate breakers in the pipeline, in one process (memory ledger, manual clock). */
import { describe, expect, it } from "vitest";
import { createGate } from "../../src/root/create-gate.js";
import { memoryLedger } from "../../src/stores/memory/index.js";
import type { Stores } from "../../src/contracts/stores.js";
import type { Policy } from "../../src/governance/policy.js";
import { alerts, chargeTool, deleteAccountTool, effects, emailTool, lookupTool, manualClock, use } from "./support.js";

const scope = { tenant: "acme", task: "t1", agent: "support-bot" };

describe("grants", () => {
  it("without a policy, the tools handed to the gate are the grant: a first run just works", async () => {
    const fx = effects();
    const gate = createGate({ ledger: memoryLedger(), tools: [emailTool(fx)] });
    const [r] = await gate.runToolUses([use("toolu_1", "send_email", { to: "a@x" })], scope);
    expect(r).toMatchObject({ is_error: false, content: '{"sent":"a@x"}' });
    expect(fx.count()).toBe(1);
  });

  it("an ungranted write tool never executes; a granted one does; reads are free", async () => {
    const fx = effects();
    const policy: Policy = { grants: [{ agent: "support-bot", tools: ["send_email"] }] };
    const gate = createGate({ ledger: memoryLedger(), tools: [emailTool(fx), chargeTool(fx), lookupTool(fx)], policy });
    const results = await gate.runToolUses([
      use("toolu_1", "send_email", { to: "a@x" }),
      use("toolu_2", "charge_card", { customer: "c1", amount: 5 }),
      use("toolu_3", "lookup_customer", { customer: "c1" }),
    ], scope);
    expect(results[0]).toMatchObject({ is_error: false });
    expect(results[1]!.is_error).toBe(true);
    expect(results[1]!.content).toBe(
      "EG_NOT_GRANTED: charge_card (a write tool) is not granted to agent support-bot in task t1 of tenant acme by the policy (policy object). " +
        "It was not executed. Do not retry it; tell the user this action needs a grant.",
    );
    expect(results[2]).toMatchObject({ is_error: false });
    expect(fx.log.sort()).toEqual(["lookup_customer:-", "send_email:toolu_1"]);
    // Nothing was recorded for the refused call: a later grant lets the same call run.
    expect(await gate.ledger.calls.get("acme", "toolu_2")).toBeUndefined();
  });

  it("grants match tenant, agent and task patterns, tool names or classes; `grants: []` grants nothing", async () => {
    const fx = effects();
    const tools = [emailTool(fx), chargeTool(fx), deleteAccountTool(fx)];
    const policy: Policy = {
      grants: [
        { tenant: "acme", task: "refund-*", tools: ["charge_card"] },
        { agent: "admin-*", classes: ["write", "destructive"] },
      ],
    };
    const gate = createGate({ ledger: memoryLedger(), tools, policy, approver: () => ({ approve: true, by: "test" }) });
    const run = async (id: string, name: string, input: unknown, s: { tenant: string; task: string; agent?: string }) =>
      (await gate.runToolUses([use(id, name, input)], s))[0]!;
    expect((await run("a", "charge_card", { customer: "c", amount: 1 }, { tenant: "acme", task: "refund-42" })).is_error).toBe(false);
    expect((await run("b", "charge_card", { customer: "c", amount: 1 }, { tenant: "acme", task: "chat-42" })).content).toMatch(/^EG_NOT_GRANTED/);
    expect((await run("c", "charge_card", { customer: "c", amount: 1 }, { tenant: "globex", task: "refund-42" })).content).toMatch(/^EG_NOT_GRANTED/);
    expect((await run("d", "send_email", { to: "x" }, { tenant: "acme", task: "refund-42" })).content).toMatch(/^EG_NOT_GRANTED/);
    expect((await run("e", "delete_account", { account: "acc" }, { tenant: "globex", task: "x", agent: "admin-eu" })).is_error).toBe(false);
    expect((await run("f", "delete_account", { account: "acc" }, { tenant: "globex", task: "x" })).content).toMatch(/^EG_NOT_GRANTED/);
    expect(fx.log).toEqual(["charge_card:a", "delete_account:e"]);

    const none = createGate({ ledger: memoryLedger(), tools: [emailTool(fx), lookupTool(fx)], policy: { grants: [] } });
    const [w, r] = await none.runToolUses([use("g", "send_email", { to: "x" }), use("h", "lookup_customer", { customer: "c" })], scope);
    expect(w!.content).toMatch(/^EG_NOT_GRANTED/);
    expect(r!.is_error).toBe(false);
  });

  it("a completed call is replayed from the ledger even after its grant is withdrawn (governance never re-judges it)", async () => {
    const fx = effects();
    const ledger = memoryLedger();
    await createGate({ ledger, tools: [emailTool(fx)] }).runToolUses([use("toolu_1", "send_email", { to: "a@x" })], scope);
    const strict = createGate({ ledger, tools: [emailTool(fx)], policy: { grants: [] } });
    const [r] = await strict.runToolUses([use("toolu_1", "send_email", { to: "a@x" })], scope);
    expect(r).toMatchObject({ is_error: false, content: '{"sent":"a@x"}' });
    expect(fx.count()).toBe(1);
  });
});

describe("kill switch (in one process)", () => {
  it("stops every write and destructive call at once, not reads, not replays; off lets calls run again", async () => {
    const fx = effects();
    const ledger = memoryLedger();
    const gate = createGate({ ledger, tools: [emailTool(fx), lookupTool(fx)] });
    await gate.runToolUses([use("done", "send_email", { to: "a" })], scope);
    await ledger.governance!.setKillSwitch({ tenant: "acme" }, true, { by: "alice", reason: "runaway" }, Date.UTC(2026, 10, 30));
    const [w, r, replay] = await gate.runToolUses([
      use("toolu_2", "send_email", { to: "b" }), use("toolu_3", "lookup_customer", { customer: "c" }), use("done", "send_email", { to: "a" }),
    ], scope);
    expect(w!.content).toBe(
      "EG_KILL_SWITCH: an operator has stopped every write and destructive call for tenant acme with the kill switch " +
        "(since 2026-11-30T00:00:00.000Z, by alice: runaway). This send_email call was not executed. " +
        "Do not retry it or try another tool to get the same effect; tell the user that actions are paused.",
    );
    expect(r!.is_error).toBe(false);
    expect(replay).toMatchObject({ is_error: false, content: '{"sent":"a"}' });
    // Another tenant is not stopped.
    expect((await gate.runToolUses([use("toolu_4", "send_email", { to: "c" })], { tenant: "globex", task: "t" }))[0]!.is_error).toBe(false);
    await ledger.governance!.setKillSwitch({ tenant: "acme" }, false, { by: "alice" }, 0);
    expect((await gate.runToolUses([use("toolu_2", "send_email", { to: "b" })], scope))[0]!.is_error).toBe(false);
    expect(fx.log).toEqual(["send_email:done", "lookup_customer:-", "send_email:toolu_4", "send_email:toolu_2"]);
  });
});

describe("quotas", () => {
  it("counts calls per task: the call past the limit is refused with the limit, and nothing executes", async () => {
    const fx = effects();
    const gate = createGate({ ledger: memoryLedger(), tools: [emailTool(fx)], policy: { quotas: [{ per: "task", tool: "send_email", limit: 3 }] } });
    const results = await gate.runToolUses([1, 2, 3, 4, 5].map((i) => use(`e${i}`, "send_email", { to: `u${i}` })), scope);
    expect(results.filter((r) => !r.is_error)).toHaveLength(3);
    expect(fx.count()).toBe(3);
    const refused = results.find((r) => r.is_error)!;
    expect(refused.content).toBe(
      "EG_QUOTA_EXCEEDED: send_email would pass its quota (at most 3 calls of send_email per task): task t1 has used 3 of 3, " +
        "and this call would be one more. It was not executed. Do not retry it; tell the user the limit was reached.",
    );
    // Another task has its own count; replays of counted calls do not count again.
    expect((await gate.runToolUses([use("e9", "send_email", { to: "x" })], { ...scope, task: "t2" }))[0]!.is_error).toBe(false);
    const replays = await gate.runToolUses([1, 2, 3].map((i) => use(`e${i}`, "send_email", { to: `u${i}` })), scope);
    expect(replays.every((r) => !r.is_error)).toBe(true);
    expect(fx.count()).toBe(4);
  });

  it("sums a numeric input field per session (the task when the scope names no session)", async () => {
    const fx = effects();
    const policy: Policy = { quotas: [{ per: "session", tool: "charge_card", sum: "amount", limit: 500 }] };
    const gate = createGate({ ledger: memoryLedger(), tools: [chargeTool(fx)], policy });
    const s1 = { ...scope, task: "a", session: "sess-1" };
    const s2 = { ...scope, task: "b", session: "sess-1" };
    expect((await gate.runToolUses([use("c1", "charge_card", { customer: "x", amount: 300 })], s1))[0]!.is_error).toBe(false);
    const [over] = await gate.runToolUses([use("c2", "charge_card", { customer: "x", amount: 250 })], s2);
    expect(over!.content).toBe(
      "EG_QUOTA_EXCEEDED: charge_card would pass its quota (at most a total amount of 500 for charge_card per session): " +
        "session sess-1 has used 300 of 500, and this call asks 250 more amount. It was not executed. Do not retry it; tell the user the limit was reached.",
    );
    expect((await gate.runToolUses([use("c3", "charge_card", { customer: "x", amount: 200 })], s2))[0]!.is_error).toBe(false);
    expect((await gate.runToolUses([use("c4", "charge_card", { customer: "x", amount: 0.5 })], s2))[0]!.content).toMatch(/has used 500 of 500/);
    expect(fx.log).toEqual(["charge_card:c1", "charge_card:c3"]);
  });

  it("a failed call keeps its quota (a failure does not prove nothing happened downstream)", async () => {
    let runs = 0;
    const { defineTool } = await import("../../src/core/tool.js");
    const { z } = await import("zod");
    const flaky = defineTool({
      name: "send_sms", effect: "write", input: z.object({ n: z.number() }),
      execute: async () => {
        runs++;
        throw Object.assign(new Error("rejected by carrier"), { status: 400 });
      },
    });
    const gate = createGate({ ledger: memoryLedger(), tools: [flaky], policy: { quotas: [{ per: "task", class: "write", limit: 2 }] } });
    const results = await gate.runToolUses([1, 2, 3].map((n) => use(`s${n}`, "send_sms", { n })), scope);
    expect(results.map((r) => r.content.slice(0, 20))).toEqual(["EG_TOOL_FAILED: send", "EG_TOOL_FAILED: send", "EG_QUOTA_EXCEEDED: s"]);
    expect(runs).toBe(2);
  });
});

describe("rate breakers", () => {
  function setup(extra: Partial<Policy> = {}) {
    const fx = effects();
    const clock = manualClock();
    const seen = alerts();
    const ledger: Stores = memoryLedger();
    const policy: Policy = { rateLimits: [{ per: "task", class: "write", limit: 3, windowMs: 60_000 }], ...extra };
    const gate = createGate({ ledger, tools: [emailTool(fx), chargeTool(fx), lookupTool(fx)], policy, clock: clock.now, onAlert: seen.onAlert });
    return { fx, clock, seen, ledger, gate };
  }

  it("too many calls in the window opens the breaker for the task: refused, one alert, every write in the task stopped until an operator closes it", async () => {
    const { fx, clock, seen, ledger, gate } = setup();
    for (let i = 0; i < 3; i++) {
      clock.advance(1000);
      expect((await gate.runToolUses([use(`e${i}`, "send_email", { to: "x" })], scope))[0]!.is_error).toBe(false);
    }
    clock.advance(1000);
    const [tripped] = await gate.runToolUses([use("e3", "send_email", { to: "x" })], scope);
    expect(tripped!.content).toMatch(
      /^EG_BREAKER_OPEN: too many write and destructive calls: the rate breaker task\/write\/60000ms@task:acme\/t1 is open \(more than 3 calls within 60000 ms; opened .*Z\) and an operator has been alerted\. This send_email call was not executed\./,
    );
    expect(seen.list.map((a) => a.code)).toEqual(["breaker_open"]);
    expect(seen.list[0]!.message).toMatch(/effectgate breaker close task\/write\/60000ms@task:acme\/t1/);
    // Still open later (long after the window), for any write tool of the task; reads still run; no second alert.
    clock.advance(600_000);
    const later = await gate.runToolUses([use("c1", "charge_card", { customer: "x", amount: 1 }), use("l1", "lookup_customer", { customer: "x" })], scope);
    expect(later[0]!.content).toMatch(/^EG_BREAKER_OPEN/);
    expect(later[1]!.is_error).toBe(false);
    expect(seen.list).toHaveLength(1);
    // Another task is not stopped.
    expect((await gate.runToolUses([use("o1", "send_email", { to: "x" })], { ...scope, task: "t2" }))[0]!.is_error).toBe(false);
    const [open] = await ledger.governance!.listBreakers();
    await ledger.governance!.closeBreaker(open!.id, "alice", clock.now());
    expect((await gate.runToolUses([use("c1", "charge_card", { customer: "x", amount: 1 })], scope))[0]!.is_error).toBe(false);
    expect(fx.count("send_email")).toBe(4);
    expect(fx.count("charge_card")).toBe(1);
  });

  it("the window slides on the injected clock: calls spread out never open it", async () => {
    const { fx, clock, seen, gate } = setup();
    for (let i = 0; i < 12; i++) {
      clock.advance(25_000); // at most 3 calls in any 60 s
      expect((await gate.runToolUses([use(`e${i}`, "send_email", { to: "x" })], scope))[0]!.is_error).toBe(false);
    }
    expect(fx.count()).toBe(12);
    expect(seen.list).toEqual([]);
  });

  it("per agent: one agent's loop is stopped in every task, others go on", async () => {
    const { fx, gate } = setup({ rateLimits: [{ per: "agent", limit: 2, windowMs: 60_000 }] });
    const runs = [];
    for (let i = 0; i < 4; i++) runs.push((await gate.runToolUses([use(`b${i}`, "send_email", { to: "x" })], { ...scope, task: `task-${i}` }))[0]!);
    expect(runs.map((r) => r.is_error)).toEqual([false, false, true, true]);
    expect((await gate.runToolUses([use("z", "send_email", { to: "x" })], { ...scope, agent: "other-bot" }))[0]!.is_error).toBe(false);
    expect(fx.count()).toBe(3);
  });
});

describe("a ledger that keeps no governance state", () => {
  const bare = (): Stores => {
    const { governance: _governance, ...rest } = memoryLedger();
    return rest;
  };

  it("still enforces grants, and refuses up front what would need state", async () => {
    const fx = effects();
    const gate = createGate({ ledger: bare(), tools: [emailTool(fx), chargeTool(fx)], policy: { grants: [{ tools: ["send_email"] }] } });
    const [ok, refused] = await gate.runToolUses([use("e1", "send_email", { to: "a" }), use("c1", "charge_card", { customer: "x", amount: 1 })], scope);
    expect(ok!.is_error).toBe(false);
    expect(refused!.content).toMatch(/^EG_NOT_GRANTED/);
    expect(() => createGate({ ledger: bare(), tools: [deleteAccountTool(fx)] }))
      .toThrow(/EG_BAD_POLICY: the ledger memory keeps no governance state .*but this gate needs approvals for the destructive tools delete_account/);
    expect(() => createGate({ ledger: bare(), tools: [emailTool(fx)], policy: { quotas: [{ per: "task", limit: 1 }] } })).toThrow(/needs quota counters/);
    expect(() => createGate({ ledger: bare(), tools: [emailTool(fx)], policy: { nonCompensable: ["send_email"] } })).toThrow(/needs approvals for the policy's approval rules/);
  });
});
