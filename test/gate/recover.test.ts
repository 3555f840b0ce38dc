import { describe, expect, it } from "vitest";
import { z } from "zod";
import { createGate } from "../../src/root/create-gate.js";
import { defineTool } from "../../src/core/tool.js";
import { type ProbeResult } from "../../src/core/hooks.js";
import { fingerprint } from "../../src/core/keys.js";
import { memoryLedger } from "../../src/stores/memory/index.js";
import type { Stores } from "../../src/contracts/stores.js";
import { toolUse } from "../support/tools.js";

const scope = { tenant: "acme", task: "t1" };
const input = { to: "ops@example.com" };

/** A claim left behind by a worker on another machine whose lease has run out. */
async function abandoned(ledger: Stores, key: string, tool = "notify", leaseMs = -1) {
  await ledger.calls.claim({
    tenant: "acme", key, tool, effect: tool === "lookup" ? "read" : "write", task: "t1", toolUseId: key,
    fingerprint: fingerprint(tool, input), input, inputRedacted: false, owner: "other-host/4242/dead", leaseMs,
  });
}

/** `settleMs`: how long a sent request may take to land (a re-send needs the probe's "absent" after it). */
function notifyTool(runs: string[], probe?: (key: string) => ProbeResult<unknown>, settleMs?: number) {
  return defineTool({
    name: "notify", effect: "write", input: z.object({ to: z.string() }),
    ...(settleMs === undefined ? {} : { settleMs }),
    execute: (_i, ctx) => {
      runs.push(`${ctx.idempotencyKey}#${ctx.attempt}`);
      return { sent: ctx.idempotencyKey, attempt: ctx.attempt };
    },
    ...(probe ? { probe: async (_i: unknown, ctx: { idempotencyKey: string }) => probe(ctx.idempotencyKey) } : {}),
  });
}

describe("gate.recover()", () => {
  it("probe done → completed with the probed result, nothing re-run", async () => {
    const ledger = memoryLedger();
    const runs: string[] = [];
    await abandoned(ledger, "k1");
    const gate = createGate({ tools: [notifyTool(runs, () => ({ status: "done", result: { sent: "k1", via: "probe" } }))], ledger });
    const summary = await gate.recover();
    expect(summary).toMatchObject({ examined: 1, completed: 1, reexecuted: 0, needsHuman: 0, leftForLater: 0 });
    expect(runs).toEqual([]);
    expect(await ledger.calls.get("acme", "k1")).toMatchObject({ state: "completed", result: { sent: "k1", via: "probe" }, owner: null });
  });

  it("probe absent → re-executed once with the same key, attempt counted", async () => {
    const ledger = memoryLedger();
    const runs: string[] = [];
    await abandoned(ledger, "k1");
    const gate = createGate({ tools: [notifyTool(runs, () => ({ status: "absent" }), 0)], ledger });
    const summary = await gate.recover();
    expect(summary).toMatchObject({ examined: 1, reexecuted: 1 });
    expect(runs).toEqual(["k1#2"]);
    expect(await ledger.calls.get("acme", "k1")).toMatchObject({ state: "completed", attempts: 2, result: { sent: "k1", attempt: 2 } });
  });

  it("probe absent, but the tool declares no settle horizon → a person, never a re-send (the request may still land)", async () => {
    const ledger = memoryLedger();
    const runs: string[] = [];
    await abandoned(ledger, "k1");
    const gate = createGate({ tools: [notifyTool(runs, () => ({ status: "absent" }))], ledger, onAlert: () => {} });
    expect(await gate.recover()).toMatchObject({ examined: 1, needsHuman: 1, reexecuted: 0 });
    expect(runs).toEqual([]);
    expect(await ledger.calls.get("acme", "k1")).toMatchObject({ state: "needs_human" });
    expect((await ledger.calls.get("acme", "k1"))?.error).toMatch(/declares no settleMs and its downstream does not honour keys, so a request already sent may still land/);
  });

  it("probe absent before the settle horizon → left uncertain; after it, re-run once", async () => {
    let now = 1_000_000;
    const ledger = memoryLedger({ clock: () => now });
    const runs: string[] = [];
    await abandoned(ledger, "k1", "notify", 10);
    now += 20; // the dead holder's lease has run out; its request may land until its lease's end + 60 s
    const gate = createGate({ tools: [notifyTool(runs, () => ({ status: "absent" }), 60_000)], ledger });
    const first = await gate.recover();
    expect(first).toMatchObject({ examined: 1, reexecuted: 0, leftForLater: 1 });
    expect(first.notes[0]!.note).toMatch(/probe says absent so far, but the request sent at .* may still land until .* \(settleMs\)/);
    expect(runs).toEqual([]);
    now += 60_000;
    expect(await gate.recover()).toMatchObject({ examined: 1, reexecuted: 1 });
    expect(runs).toEqual(["k1#2"]);
  });

  it("probe running → left uncertain for later, nothing run", async () => {
    const ledger = memoryLedger();
    const runs: string[] = [];
    await abandoned(ledger, "k1");
    const gate = createGate({ tools: [notifyTool(runs, () => ({ status: "running" }))], ledger });
    const summary = await gate.recover();
    expect(summary).toMatchObject({ examined: 1, leftForLater: 1 });
    expect(summary.notes[0]).toMatchObject({ key: "k1", note: "left uncertain: the probe still says the downstream is working on it (asked 1 time)" });
    expect(runs).toEqual([]);
    expect(await ledger.calls.get("acme", "k1")).toMatchObject({ state: "uncertain", owner: null });
  });

  it("no probe → needs_human, never a blind re-run; a replay then says a person was asked", async () => {
    const ledger = memoryLedger();
    const runs: string[] = [];
    await abandoned(ledger, "k1");
    const gate = createGate({ tools: [notifyTool(runs)], ledger });
    expect(await gate.recover()).toMatchObject({ examined: 1, needsHuman: 1 });
    expect(runs).toEqual([]);
    expect((await ledger.calls.get("acme", "k1"))?.state).toBe("needs_human");
    const [r] = await gate.runToolUses([toolUse("k1", "notify", input)], scope);
    expect(r!.is_error).toBe(true);
    expect(r!.content).toMatch(/^EG_NEEDS_HUMAN: the outcome of this notify call is unknown .*Do not retry it under a new id/);
    expect(runs).toEqual([]);
  });

  it("a probe that throws leaves the call uncertain with the reason", async () => {
    const ledger = memoryLedger();
    await abandoned(ledger, "k1");
    const gate = createGate({ tools: [notifyTool([], () => { throw new Error("lookup API down"); })], ledger });
    const summary = await gate.recover();
    expect(summary.leftForLater).toBe(1);
    expect(await ledger.calls.get("acme", "k1")).toMatchObject({ state: "uncertain", error: "probe failed: lookup API down (asked 1 time)" });
  });

  it("leaves live claims of other workers alone", async () => {
    const ledger = memoryLedger();
    const runs: string[] = [];
    await abandoned(ledger, "k1", "notify", 60_000);
    const gate = createGate({ tools: [notifyTool(runs, () => ({ status: "absent" }))], ledger });
    const summary = await gate.recover();
    expect(summary).toMatchObject({ examined: 1, leftForLater: 1 });
    expect(summary.notes[0]!.note).toMatch(/held by a live worker \(other-host\/4242\/dead\)/);
    expect(runs).toEqual([]);
  });

  it("notes calls of tools it was not given", async () => {
    const ledger = memoryLedger();
    await abandoned(ledger, "k1", "wire_money");
    const gate = createGate({ tools: [notifyTool([])], ledger });
    const summary = await gate.recover();
    expect(summary.notes).toEqual([{ tenant: "acme", key: "k1", tool: "wire_money", note: "no tool named wire_money was given to this gate" }]);
  });

  it("a redacted call whose probe says absent is left for a replay with the full input", async () => {
    const ledger = memoryLedger();
    const runs: string[] = [];
    await ledger.calls.claim({
      tenant: "acme", key: "k1", tool: "notify", effect: "write", task: "t1", toolUseId: "k1",
      fingerprint: fingerprint("notify", input), input: { to: "[redacted]" }, inputRedacted: true, owner: "other-host/1/x", leaseMs: -1,
    });
    const gate = createGate({ tools: [notifyTool(runs, () => ({ status: "absent" }), 0)], ledger });
    expect((await gate.recover()).leftForLater).toBe(1);
    expect(runs).toEqual([]);
    // The agent's replay carries the real input: now it can run, with the same key.
    const [r] = await gate.runToolUses([toolUse("k1", "notify", input)], scope);
    expect(r!.is_error).toBe(false);
    expect(runs).toEqual(["k1#2"]);
  });
});

describe("meeting another worker's claim during a call", () => {
  it("waits for a live holder and returns its recorded result", async () => {
    const ledger = memoryLedger();
    const runs: string[] = [];
    await abandoned(ledger, "k1", "notify", 60_000);
    let sawClaim!: () => void;
    const claimSeen = new Promise<void>((r) => (sawClaim = r));
    // The gate meets the claim by reading the key before governance (ledger gate), or by claiming.
    const watched: Stores = {
      ...ledger,
      calls: {
        ...ledger.calls,
        get: async (tenant, key) => ledger.calls.get(tenant, key).finally(sawClaim),
        claim: async (req) => ledger.calls.claim(req).finally(sawClaim),
      },
    };
    const gate = createGate({ tools: [notifyTool(runs, () => ({ status: "absent" }))], ledger: watched, waitMs: 60_000 });
    const pending = gate.runToolUses([toolUse("k1", "notify", input)], scope);
    // The gate has met the live claim; the other worker finishes while it waits.
    await claimSeen;
    await ledger.calls.update("acme", "k1", 1, { state: "completed", result: { sent: "by the other worker" }, owner: null });
    const [r] = await pending;
    expect(r).toMatchObject({ is_error: false, content: '{"sent":"by the other worker"}' });
    expect(runs).toEqual([]);
  });

  it("after waitMs says the call is in progress elsewhere, without running it", async () => {
    const ledger = memoryLedger();
    const runs: string[] = [];
    await abandoned(ledger, "k1", "notify", 60_000);
    const gate = createGate({ tools: [notifyTool(runs, () => ({ status: "absent" }))], ledger, waitMs: 20 });
    const [r] = await gate.runToolUses([toolUse("k1", "notify", input)], scope);
    expect(r!.is_error).toBe(true);
    expect(r!.content).toMatch(/^EG_IN_PROGRESS: this notify call is held by another worker \(other-host\/4242\/dead\)/);
    expect(runs).toEqual([]);
  });

  it("takes over an expired claim through the probe", async () => {
    const ledger = memoryLedger();
    const runs: string[] = [];
    await abandoned(ledger, "k1");
    const gate = createGate({ tools: [notifyTool(runs, () => ({ status: "done", result: "it was sent" }))], ledger });
    const [r] = await gate.runToolUses([toolUse("k1", "notify", input)], scope);
    expect(r).toMatchObject({ is_error: false, content: "it was sent" });
    expect(runs).toEqual([]);
  });
});
