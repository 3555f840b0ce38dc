/**
 * The gate's own seams (issue 23, defects 4, 5 and 7, and the background writer): an answer kept
 * in memory, a call the ledger holds under a tool or schema that changed, a late reply after a
 * person's verdict, and outcomes still being written when the gate closes. Each test counts the
 * effects in the downstream (the tools' own counters) and failed before its fix.
 */
import { afterEach, describe, expect, it } from "vitest";
import { z } from "zod";
import type { Stores } from "../../src/contracts/stores.js";
import type { CallStore } from "../../src/contracts/calls.js";
import { defineTool } from "../../src/core/tool.js";
import { EffectgateError } from "../../src/core/errors.js";
import type { Alert } from "../../src/gate/alerts.js";
import { createGate, type Gate } from "../../src/root/create-gate.js";
import { resolveCall } from "../../src/reconcile/queue.js";
import { memoryLedger } from "../../src/stores/memory/index.js";
import { sqliteLedger } from "../../src/stores/sqlite/index.js";
import { seededRng } from "../../src/testing/explorer/rng.js";
import { World } from "../../src/testing/explorer/world.js";
import { tempDir } from "../support/tmp.js";
import { toolUse } from "../support/tools.js";
import { join } from "node:path";

const scope = { tenant: "acme", task: "t1" };
const dir = tempDir("effectgate-seams-");

/** The ledger with its call store's `update` failing while `failing.on` (a busy or unreachable ledger after the tool ran). */
function flakyUpdates(stores: Stores) {
  const failing = { on: false };
  const calls = new Proxy(stores.calls, {
    get(target, name, receiver) {
      const member: unknown = Reflect.get(target, name, receiver);
      if (name === "update") {
        return (...args: Parameters<CallStore["update"]>) => {
          if (failing.on) return Promise.reject(new EffectgateError("EG_LEDGER_UNAVAILABLE", "the ledger is unavailable (injected: update refused)"));
          return target.update(...args);
        };
      }
      return typeof member === "function" ? (member as (...a: unknown[]) => unknown).bind(target) : member;
    },
  });
  return { ledger: { ...stores, calls }, failing };
}

/** An e-mail tool whose downstream counts what it sent, by recipient. */
function mailer() {
  const sent: string[] = [];
  const tool = defineTool({
    name: "send_email", effect: "write", input: z.object({ to: z.string() }),
    execute: ({ to }) => {
      sent.push(to);
      return { sentTo: to, n: sent.length };
    },
  });
  return { sent, tool };
}

const gates: Gate[] = [];
afterEach(async () => {
  for (const gate of gates.splice(0)) await gate.close();
});
function gateOf(options: Parameters<typeof createGate>[0]): Gate {
  const gate = createGate({ onAlert: () => {}, closeDrainMs: 0, ...options });
  gates.push(gate);
  return gate;
}

describe("an outcome kept in memory (defect 4)", () => {
  it("does not answer a new turn that reuses the id for another input: EG_KEY_MISMATCH, nothing sent to bob, alice's answer not given", async () => {
    const { ledger, failing } = flakyUpdates(memoryLedger());
    const mail = mailer();
    const gate = gateOf({ ledger, tools: [mail.tool] });
    failing.on = true; // the ledger is busy when the first call's outcome is written: the outcome is kept in memory
    const [first] = await gate.runToolUses([toolUse("call_0", "send_email", { to: "alice" })], scope);
    expect(first).toMatchObject({ is_error: false, content: JSON.stringify({ sentTo: "alice", n: 1 }) });
    // A new turn numbers its calls from call_0 again, for an e-mail to bob.
    const [second] = await gate.runToolUses([toolUse("call_0", "send_email", { to: "bob" })], scope);
    expect(second!.is_error).toBe(true);
    expect(second!.content).toMatch(/^EG_KEY_MISMATCH\b/);
    expect(second!.content).not.toContain("alice");
    // The same call replayed still gets its true, kept answer.
    const [again] = await gate.runToolUses([toolUse("call_0", "send_email", { to: "alice" })], scope);
    expect(again).toEqual(first);
    expect(mail.sent).toEqual(["alice"]);
  });

  it("does not answer a call of another tool under the same id", async () => {
    const { ledger, failing } = flakyUpdates(memoryLedger());
    const mail = mailer();
    const tickets: string[] = [];
    const ticket = defineTool({ name: "open_ticket", effect: "write", input: z.object({ to: z.string() }), execute: ({ to }) => (tickets.push(to), { ticket: `T-${tickets.length}` }) });
    const gate = gateOf({ ledger, tools: [mail.tool, ticket] });
    failing.on = true;
    await gate.runToolUses([toolUse("call_0", "send_email", { to: "alice" })], scope);
    const [other] = await gate.runToolUses([toolUse("call_0", "open_ticket", { to: "alice" })], scope);
    expect(other!.content).toMatch(/^EG_KEY_MISMATCH\b/);
    expect(other!.content).not.toContain("sentTo");
    expect(tickets).toEqual([]);
  });
});

describe("a call the ledger holds, replayed after its tool or schema changed (defect 5)", () => {
  const refundInput = z.object({ order: z.string(), amount: z.number() });
  function refunds() {
    const made: string[] = [];
    const tool = (input: z.ZodType<{ order: string; amount: number }> = refundInput, name = "refund", key: "tool_use_id" | "derived" = "tool_use_id") => defineTool({
      name, effect: "write", input, key,
      execute: ({ order, amount }) => (made.push(order), { refund: `R-${made.length}`, order, amount }),
    });
    return { made, tool };
  }

  it("a schema that tightened since: the recorded answer, verbatim, never 'Nothing was executed'", async () => {
    const ledger = memoryLedger();
    const r = refunds();
    const block = toolUse("toolu_1", "refund", { order: "o-1", amount: 250 });
    const [first] = await gateOf({ ledger, tools: [r.tool()] }).runToolUses([block], scope);
    // The next release caps refunds at 100.
    const stricter = r.tool(z.object({ order: z.string(), amount: z.number().max(100) }));
    const [replayed] = await gateOf({ ledger, tools: [stricter] }).runToolUses([block], scope);
    expect(replayed).toEqual(first);
    expect(r.made).toEqual(["o-1"]);
    // A new call with that input is refused by the new schema, truthfully.
    const [fresh] = await gateOf({ ledger, tools: [stricter] }).runToolUses([toolUse("toolu_2", "refund", { order: "o-2", amount: 250 })], scope);
    expect(fresh!.content).toMatch(/^EG_INVALID_INPUT: .*Nothing was executed/);
  });

  it("a time-dependent check that now fails (a date now in the past): the recorded answer", async () => {
    const ledger = memoryLedger();
    const made: string[] = [];
    let today = "2026-12-01";
    const book = defineTool({
      name: "book_room", effect: "write",
      input: z.object({ day: z.string() }).refine((i) => i.day >= today, { message: "the day must not be in the past" }),
      execute: ({ day }) => (made.push(day), { booking: `B-${made.length}`, day }),
    });
    const gate = gateOf({ ledger, tools: [book] });
    const block = toolUse("toolu_1", "book_room", { day: "2026-12-02" });
    const [first] = await gate.runToolUses([block], scope);
    today = "2026-12-03";
    const [replayed] = await gate.runToolUses([block], scope);
    expect(replayed).toEqual(first);
    expect(replayed!.content).not.toMatch(/Nothing was executed/);
    expect(made).toEqual(["2026-12-02"]);
  });

  it("a tool renamed or removed since: the recorded answer, under its tool_use id or its derived key", async () => {
    const ledger = memoryLedger();
    const r = refunds();
    const byId = toolUse("toolu_1", "refund", { order: "o-1", amount: 10 });
    const derived = toolUse("toolu_x", "refund_derived", { order: "o-2", amount: 20 });
    const [first] = await gateOf({ ledger, tools: [r.tool(), r.tool(refundInput, "refund_derived", "derived")] }).runToolUses([byId, derived], scope);
    const renamed = gateOf({ ledger, tools: [r.tool(refundInput, "issue_refund")] });
    const [replayed, replayedDerived] = await renamed.runToolUses([byId, { ...derived, id: "toolu_y" }], scope);
    expect(replayed).toEqual(first);
    expect(replayedDerived).toMatchObject({ is_error: false, content: JSON.stringify({ refund: "R-2", order: "o-2", amount: 20 }) });
    expect(r.made).toEqual(["o-1", "o-2"]);
    // A call the ledger does not hold is still an unknown tool, and nothing ran.
    const [unknown] = await renamed.runToolUses([toolUse("toolu_3", "refund", { order: "o-3", amount: 1 })], scope);
    expect(unknown!.content).toMatch(/^EG_UNKNOWN_TOOL: .*Nothing was executed/);
    expect(r.made).toEqual(["o-1", "o-2"]);
  });

  it("an unsettled call the ledger holds is never called 'nothing executed' either", async () => {
    const ledger = memoryLedger();
    const r = refunds();
    await ledger.calls.claim({
      tenant: "acme", key: "toolu_1", tool: "refund", effect: "write", task: "t1", toolUseId: "toolu_1",
      fingerprint: (await import("../../src/core/keys.js")).fingerprint("refund", { order: "o-1", amount: 250 }),
      input: { order: "o-1", amount: 250 }, inputRedacted: false, owner: "a-dead-worker", leaseMs: 60_000,
    });
    const stricter = r.tool(z.object({ order: z.string(), amount: z.number().max(100) }));
    const [answer] = await gateOf({ ledger, tools: [stricter] }).runToolUses([toolUse("toolu_1", "refund", { order: "o-1", amount: 250 })], scope);
    expect(answer!.content).toMatch(/^EG_IN_PROGRESS\b/);
    expect(answer!.content).not.toMatch(/Nothing was executed/);
    expect(r.made).toEqual([]);
  });
});

describe("a late reply that proves a person wrong (defect 7)", () => {
  it("is recorded as a finding on the call and raises an alert; the person's verdict stays until someone looks again", async () => {
    const ledger = sqliteLedger(join(dir, "late.db"));
    const alerts: Alert[] = [];
    let reply!: (value: unknown) => void;
    const sent: string[] = [];
    const notify = defineTool({
      name: "notify", effect: "write", input: z.object({ to: z.string() }), timeoutMs: 20,
      // Sends, then the reply takes its time and the tool ignores the abort.
      execute: ({ to }) => (sent.push(to), new Promise((resolve) => (reply = resolve))),
    });
    const gate = gateOf({ ledger, tools: [notify], onAlert: (a) => alerts.push(a) });
    const [answer] = await gate.runToolUses([toolUse("toolu_1", "notify", { to: "ops" })], scope);
    expect(answer!.content).toMatch(/^EG_NEEDS_HUMAN\b/);
    // A person decides it never went out.
    await resolveCall(ledger, "acme", "toolu_1", { failed: "no such message in the mail log", by: "sam" });
    reply({ messageId: "m-1" });
    await gate.drain();
    expect(await ledger.calls.get("acme", "toolu_1")).toMatchObject({ state: "failed" });
    const findings = await ledger.reconcile!.listFindings({ tenant: "acme", key: "toolu_1" });
    expect(findings).toHaveLength(1);
    expect(findings[0]).toMatchObject({ kind: "orphan_downstream", source: "late_reply", status: "open", tool: "notify" });
    expect(findings[0]!.summary).toContain("m-1");
    expect(alerts.filter((a) => a.code === "late_reply_contradicts")).toHaveLength(1);
    expect(sent).toEqual(["ops"]);
    await gate.close();
    await ledger.close();
  });

  it("a late reply that agrees with the verdict changes nothing and alerts nobody", async () => {
    const ledger = memoryLedger();
    const alerts: Alert[] = [];
    let reply!: (value: unknown) => void;
    const notify = defineTool({
      name: "notify", effect: "write", input: z.object({ to: z.string() }), timeoutMs: 20,
      execute: () => new Promise((resolve) => (reply = resolve)),
    });
    const gate = gateOf({ ledger, tools: [notify], onAlert: (a) => alerts.push(a) });
    await gate.runToolUses([toolUse("toolu_1", "notify", { to: "ops" })], scope);
    await resolveCall(ledger, "acme", "toolu_1", { completedWith: { messageId: "m-1" }, by: "sam" });
    reply({ messageId: "m-1" });
    await gate.drain();
    expect(await ledger.reconcile!.listFindings({ tenant: "acme" })).toEqual([]);
    expect(alerts.map((a) => a.code)).not.toContain("late_reply_contradicts");
  });
});

describe("outcomes still being written when the gate closes", () => {
  it("close() gives them its drain time, then stops them with a record_gave_up alert that carries the outcome", async () => {
    const { ledger, failing } = flakyUpdates(memoryLedger());
    const alerts: Alert[] = [];
    const mail = mailer();
    const gate = createGate({ ledger, tools: [mail.tool], onAlert: (a) => alerts.push(a), closeDrainMs: 30 });
    failing.on = true;
    const [answer] = await gate.runToolUses([toolUse("call_0", "send_email", { to: "alice" })], scope);
    expect(answer!.is_error).toBe(false);
    await gate.close();
    const gaveUp = alerts.filter((a) => a.code === "record_gave_up");
    expect(gaveUp).toHaveLength(1);
    expect(gaveUp[0]!.message).toContain(JSON.stringify({ sentTo: "alice", n: 1 }));
    expect(await ledger.calls.get("acme", "call_0")).toMatchObject({ state: "in_progress" });
  });

  it("an outcome whose write succeeds within the drain time is recorded, and nothing gives up", async () => {
    const { ledger, failing } = flakyUpdates(memoryLedger());
    const alerts: Alert[] = [];
    const mail = mailer();
    const gate = createGate({ ledger, tools: [mail.tool], onAlert: (a) => alerts.push(a), closeDrainMs: 5_000 });
    failing.on = true;
    await gate.runToolUses([toolUse("call_0", "send_email", { to: "alice" })], scope);
    setTimeout(() => (failing.on = false), 20);
    await gate.close();
    expect(alerts.map((a) => a.code)).not.toContain("record_gave_up");
    expect(await ledger.calls.get("acme", "call_0")).toMatchObject({ state: "completed", result: { sentTo: "alice", n: 1 } });
  });
});

describe("on simulated time (the explorer's world: no real waits)", () => {
  function world() {
    const w = new World(seededRng(3), true);
    const run = async <T>(main: Promise<T>): Promise<T> => {
      expect(await w.run(main), w.trace.join("\n")).toBe("done");
      return main;
    };
    return { w, run };
  }

  it("the background writer that spends its 40 tries says so with a record_gave_up alert carrying the outcome", async () => {
    const { w, run } = world();
    const { ledger, failing } = flakyUpdates(memoryLedger({ clock: w.wall }));
    const alerts: Alert[] = [];
    const mail = mailer();
    const gate = createGate({ ledger, tools: [mail.tool], onAlert: (a) => alerts.push(a), time: w.timeFor(w.process("worker")) });
    failing.on = true;
    const [answer] = await run(gate.runToolUses([toolUse("call_0", "send_email", { to: "alice" })], scope));
    expect(answer!.is_error).toBe(false);
    await run(gate.drain());
    expect(alerts.map((a) => a.code)).toEqual(["record_failed", "record_gave_up"]);
    expect(alerts[1]!.message).toMatch(/stopped trying to record it \(40 writes failed\)/);
    expect(alerts[1]!.message).toContain(JSON.stringify({ sentTo: "alice", n: 1 }));
    expect(mail.sent).toEqual(["alice"]);
  });

  it("a lease renewal that loses the race with the holder's own write is not a lost lease: the probe's 'absent' past the horizon still gets its one re-send", async () => {
    const { w, run } = world();
    const base = memoryLedger({ clock: w.wall });
    // The renewal sent at 100 ms reaches the store only after the holder's next write (its "uncertain" at 150 ms) committed.
    let written!: () => void;
    const holderWrote = new Promise<void>((resolve) => (written = resolve));
    const calls = new Proxy(base.calls, {
      get(target, name, receiver) {
        if (name === "renewLease") {
          return async (...args: Parameters<CallStore["renewLease"]>) => {
            await holderWrote;
            return target.renewLease(...args);
          };
        }
        if (name === "update") {
          return async (...args: Parameters<CallStore["update"]>) => {
            const out = await target.update(...args);
            written();
            return out;
          };
        }
        const member: unknown = Reflect.get(target, name, receiver);
        return typeof member === "function" ? (member as (...a: unknown[]) => unknown).bind(target) : member;
      },
    });
    const applied: string[] = [];
    const alerts: Alert[] = [];
    const charge = defineTool({
      name: "charge", effect: "write", input: z.object({ id: z.string() }), timeoutMs: 150, settleMs: 0,
      // The first request is lost on the way (never applied, no reply; the run ends when aborted); the re-send goes through.
      execute: ({ id }, ctx) => ctx.attempt === 1
        ? new Promise((_resolve, reject) => ctx.signal.addEventListener("abort", () => reject(new Error("aborted"))))
        : (applied.push(id), { charged: id }),
      probe: async ({ id }) => (applied.includes(id) ? { status: "done", result: { charged: id } } : { status: "absent" }),
    });
    const gate = createGate({
      ledger: { ...base, calls }, tools: [charge], leaseMs: 300, onAlert: (a) => alerts.push(a),
      probe: { attempts: 3, initialDelayMs: 10, maxDelayMs: 10 }, time: w.timeFor(w.process("worker")),
    });
    const [answer] = await run(gate.runToolUses([toolUse("toolu_1", "charge", { id: "c-1" })], scope));
    expect(answer).toMatchObject({ is_error: false, content: JSON.stringify({ charged: "c-1" }) });
    expect(alerts.map((a) => a.code)).not.toContain("record_lost_race");
    expect(await base.calls.get("acme", "toolu_1")).toMatchObject({ state: "completed" });
    expect(applied).toEqual(["c-1"]);
  });
});
