/**
 * Defect 6 of the correctness issue: a claim that committed but whose reply was lost (the
 * connection cut after the INSERT) sent a call that never ran to a person. The store here is
 * real; only the reply is lost: the claim is written, then the call to it fails as a cut
 * connection would make it fail.
 */
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { createGate } from "../../src/root/create-gate.js";
import { defineTool } from "../../src/core/tool.js";
import type { Stores } from "../../src/contracts/stores.js";
import { memoryLedger } from "../../src/stores/memory/index.js";
import { toolUse } from "../support/tools.js";

const scope = { tenant: "acme", task: "t1" };

/** A ledger whose next `n` claims commit and then lose their reply. */
function lossyClaims(inner: Stores, n: number): Stores {
  let left = n;
  return {
    ...inner,
    calls: {
      ...inner.calls,
      async claim(request) {
        const result = await inner.calls.claim(request);
        if (left-- > 0) throw Object.assign(new Error("read ECONNRESET"), { code: "ECONNRESET" });
        return result;
      },
      // The claim with the kill switch checked inside it (what the gate uses when governance only reads) loses its reply alike.
      async claimUnlessHalted(request, agent) {
        const result = await inner.calls.claimUnlessHalted!(request, agent);
        if (left-- > 0) throw Object.assign(new Error("read ECONNRESET"), { code: "ECONNRESET" });
        return result;
      },
    },
  };
}

function notify(runs: string[]) {
  // No probe: were the gate to treat its own unstarted claim as someone's lost call, it could only hand it to a person.
  return defineTool({
    name: "notify", effect: "write", input: z.object({ to: z.string() }),
    execute: (_input, ctx) => {
      runs.push(`${ctx.idempotencyKey}#${ctx.attempt} fence ${ctx.fence}`);
      return { sent: ctx.idempotencyKey };
    },
  });
}

describe("a claim whose reply was lost", () => {
  it("is answered truthfully (nothing ran), and the replay runs the call once", async () => {
    const inner = memoryLedger();
    const runs: string[] = [];
    const gate = createGate({ ledger: lossyClaims(inner, 1), tools: [notify(runs)], onAlert: () => {} });
    const block = [toolUse("toolu_1", "notify", { to: "ops" })];
    const [first] = await gate.runToolUses(block, scope);
    expect(first!.content).toMatch(/^EG_LEDGER_UNAVAILABLE: read ECONNRESET\. The tool was not started by this request/);
    expect(runs).toEqual([]);
    expect(await inner.calls.get("acme", "toolu_1")).toMatchObject({ state: "in_progress", owner: gate.owner });
    const [replay] = await gate.runToolUses(block, scope);
    expect(replay).toMatchObject({ is_error: false, content: JSON.stringify({ sent: "toolu_1" }) });
    expect(runs).toEqual(["toolu_1#1 fence 2"]);
    expect(await inner.calls.get("acme", "toolu_1")).toMatchObject({ state: "completed", attempts: 1 });
    // And never twice.
    await gate.runToolUses(block, scope);
    expect(runs).toHaveLength(1);
  });

  it("gate.recover() in the same process runs it too, once", async () => {
    const inner = memoryLedger();
    const runs: string[] = [];
    const gate = createGate({ ledger: lossyClaims(inner, 1), tools: [notify(runs)], onAlert: () => {} });
    await gate.runToolUses([toolUse("toolu_2", "notify", { to: "ops" })], scope);
    expect(await gate.recover()).toMatchObject({ examined: 1, reexecuted: 1, needsHuman: 0 });
    expect(runs).toEqual(["toolu_2#1 fence 2"]);
    expect((await inner.calls.get("acme", "toolu_2"))?.state).toBe("completed");
  });

  it("a claim that did not commit at all: the replay claims afresh and runs once", async () => {
    const inner = memoryLedger();
    const runs: string[] = [];
    let fail = true;
    const refusing: Stores = {
      ...inner,
      calls: {
        ...inner.calls,
        claim: (request) => (fail ? ((fail = false), Promise.reject(new Error("connection refused"))) : inner.calls.claim(request)),
        claimUnlessHalted: (request, agent) => (fail ? ((fail = false), Promise.reject(new Error("connection refused"))) : inner.calls.claimUnlessHalted!(request, agent)),
      },
    };
    const gate = createGate({ ledger: refusing, tools: [notify(runs)], onAlert: () => {} });
    const block = [toolUse("toolu_3", "notify", { to: "ops" })];
    expect((await gate.runToolUses(block, scope))[0]!.content).toMatch(/The tool was not started by this request/);
    expect((await gate.runToolUses(block, scope))[0]!.is_error).toBe(false);
    expect(runs).toEqual(["toolu_3#1 fence 1"]);
  });

  it("another process, which cannot know the claim never started, leaves it to its lease and a person (never runs it blindly)", async () => {
    let now = 1_000_000;
    const inner = memoryLedger({ clock: () => now });
    const runs: string[] = [];
    const a = createGate({ ledger: lossyClaims(inner, 1), tools: [notify(runs)], leaseMs: 1_000, onAlert: () => {} });
    await a.runToolUses([toolUse("toolu_4", "notify", { to: "ops" })], scope);
    const b = createGate({ ledger: inner, tools: [notify(runs)], waitMs: 10, onAlert: () => {} });
    const [live] = await b.runToolUses([toolUse("toolu_4", "notify", { to: "ops" })], scope);
    expect(live!.content).toMatch(/^EG_IN_PROGRESS: this notify call is held by another worker/);
    now += 2_000;
    const [late] = await b.runToolUses([toolUse("toolu_4", "notify", { to: "ops" })], scope);
    expect(late!.content).toMatch(/^EG_NEEDS_HUMAN/);
    expect(runs).toEqual([]);
  });
});
