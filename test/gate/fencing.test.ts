/**
 * Defect 4 of the correctness issue: no fencing, so a holder frozen past its lease (SIGSTOP, a GC
 * or VM pause) ran on after another worker took the call over. Now every take-over raises the
 * call's fence; the tool gets it as ctx.fence and sends it beside the key; a holder whose lease is
 * gone has its ctx.signal aborted (LeaseLost), starts nothing more, and its late outcome write is
 * refused, never overwriting the new holder's record. The downstream here keeps the highest fence
 * per key and refuses a lower one, as docs/guarantees.md asks.
 */
import { spawn } from "node:child_process";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { createGate } from "../../src/root/create-gate.js";
import { defineTool } from "../../src/core/tool.js";
import { FENCE_HEADER, LeaseLost } from "../../src/core/outcome.js";
import type { ProbeResult } from "../../src/core/hooks.js";
import type { Alert } from "../../src/gate/alerts.js";
import type { Stores } from "../../src/contracts/stores.js";
import { memoryLedger } from "../../src/stores/memory/index.js";
import { sqliteLedger } from "../../src/stores/sqlite/index.js";
import { startChargeService, type ChargeService } from "../support/charge-service.js";
import { requireBuild } from "../support/processes.js";
import { tempDir } from "../support/tmp.js";
import { toolUse } from "../support/tools.js";

const scope = { tenant: "acme", task: "t1" };
let service: ChargeService | undefined;
afterEach(async () => service?.close());

async function probeCharge(key: string): Promise<ProbeResult<unknown>> {
  const found = (await (await fetch(`${service!.url}/charges?key=${key}`)).json()) as { status: "done"; charge: unknown } | { status: "absent" };
  return found.status === "done" ? { status: "done", result: found.charge } : { status: "absent" };
}

/** A ledger whose lease renewals never reach the store (a network partition for this worker only). */
function partitioned(inner: Stores): Stores {
  return { ...inner, calls: { ...inner.calls, renewLease: () => Promise.reject(new Error("connect ETIMEDOUT")) } };
}

describe("fencing: a holder that lost its lease", () => {
  it("has ctx.signal aborted with LeaseLost; the new holder runs with a higher fence; the stale send is refused downstream; one charge", async () => {
    service = await startChargeService({ instant: true, fences: true });
    const ledger = memoryLedger();
    const seen: { fence: number; reason?: unknown }[] = [];
    let releaseA!: () => void;
    const aMayGoOn = new Promise<void>((resolve) => (releaseA = resolve));
    const tool = (holder: "a" | "b") => defineTool({
      name: "charge", effect: "write", input: z.object({ amount: z.number() }), timeoutMs: 5_000,
      // The service applies a request at once or never (settleMs 0); B asks it before running again.
      settleMs: 0, probe: async (_input, ctx) => probeCharge(ctx.idempotencyKey),
      async execute(input, ctx) {
        const entry: { fence: number; reason?: unknown } = { fence: ctx.fence };
        seen.push(entry);
        ctx.signal.addEventListener("abort", () => (entry.reason = ctx.signal.reason));
        // Holder A is slow to send (a pause): it sends only after it lost the call, ignoring the abort.
        if (holder === "a") await aMayGoOn;
        const res = await fetch(`${service!.url}/charges`, {
          method: "POST",
          headers: { "content-type": "application/json", "idempotency-key": ctx.idempotencyKey, [FENCE_HEADER]: String(ctx.fence) },
          body: JSON.stringify(input),
        });
        if (res.status === 409) throw Object.assign(new Error(await res.text()), { status: 409 });
        return res.json();
      },
    });
    const alertsA: Alert[] = [];
    const a = createGate({ ledger: partitioned(ledger), tools: [tool("a")], leaseMs: 90, onAlert: (x) => alertsA.push(x) });
    const b = createGate({ ledger, tools: [tool("b")], leaseMs: 5_000, waitMs: 5_000, onAlert: () => {} });
    const block = [toolUse("toolu_f", "charge", { amount: 7 })];
    const answerA = a.runToolUses(block, scope);
    // B meets A's live claim, waits for its lease to run out (A cannot renew), takes over and charges.
    const [answerB] = await b.runToolUses(block, scope);
    expect(answerB!.is_error, answerB!.content).toBe(false);
    expect(seen[0]!.reason).toBeInstanceOf(LeaseLost);
    releaseA();
    const [lateA] = await answerA;
    expect(seen.map((s) => s.fence)).toEqual([1, 2]);
    expect(service.received.map((r) => r.fence)).toEqual([2, 1]);
    expect(service.refusedFences).toEqual([{ key: "toolu_f", fence: 1 }]);
    expect(service.charges).toHaveLength(1);
    // A's late outcome never overwrites B's record, and A's agent is not told a falsehood.
    expect(await ledger.calls.get("acme", "toolu_f")).toMatchObject({ state: "completed", fence: 2, result: JSON.parse(answerB!.content) });
    expect(lateA!.content).not.toMatch(/Nothing was executed/);
    expect(alertsA.map((x) => x.code)).toContain("record_lost_race");
  });

  it("a holder that lost its lease before starting the tool never starts it", async () => {
    const ledger = memoryLedger();
    let runs = 0;
    let resumeA!: () => void;
    const pausedAtClaim = new Promise<void>((resolve) => (resumeA = resolve));
    const tool = defineTool({
      name: "charge", effect: "write", input: z.object({ amount: z.number() }), settleMs: 0,
      execute: () => (runs++, { ok: true }),
      probe: async () => (runs > 0 ? { status: "done" as const, result: { ok: true } } : { status: "absent" as const }),
    });
    const a = createGate({
      ledger: partitioned(ledger), tools: [tool], leaseMs: 60, onAlert: () => {},
      // A long pause right after the claim, before the tool starts.
      faults: async (point) => (point === "after_claim" ? pausedAtClaim : undefined),
    });
    const b = createGate({ ledger, tools: [tool], leaseMs: 5_000, waitMs: 5_000, onAlert: () => {} });
    const block = [toolUse("toolu_g", "charge", { amount: 1 })];
    const answerA = a.runToolUses(block, scope);
    const [answerB] = await b.runToolUses(block, scope);
    expect(answerB!.is_error, answerB!.content).toBe(false);
    resumeA();
    const [lateA] = await answerA;
    expect(runs).toBe(1);
    expect(lateA!.content).toMatch(/^EG_IN_PROGRESS: this worker lost the lease on this charge call/);
    expect(await ledger.calls.get("acme", "toolu_g")).toMatchObject({ state: "completed", fence: 2 });
  });
});

const HOLDER = fileURLToPath(new URL("./fixtures/stalled-holder.mjs", import.meta.url));

describe("fencing across processes: a holder frozen with SIGSTOP past its lease", () => {
  it("does not run the tool when it wakes after another worker took the call over: one effect", async () => {
    requireBuild();
    service = await startChargeService({ instant: true, fences: true });
    const file = join(tempDir("effectgate-stop-"), "ledger.db");
    const child = spawn(process.execPath, [HOLDER, JSON.stringify({ ledger: file, url: service.url })], { stdio: ["pipe", "pipe", "pipe"] });
    let out = "";
    child.stdout.setEncoding("utf8").on("data", (chunk: string) => (out += chunk));
    let err = "";
    child.stderr.setEncoding("utf8").on("data", (chunk: string) => (err += chunk));
    const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));
    // The holder prints "claimed" at after_claim and waits for a line on stdin before going on.
    for (let i = 0; i < 400 && !out.includes("claimed"); i++) await new Promise((r) => setTimeout(r, 10));
    expect(out, err).toContain("claimed");
    child.kill("SIGSTOP");
    try {
      const ledger = sqliteLedger(file);
      const tool = defineTool({
        name: "charge", effect: "write", input: z.object({ amount: z.number() }),
        settleMs: 0, probe: async (_input, ctx) => probeCharge(ctx.idempotencyKey),
        async execute(input, ctx) {
          const res = await fetch(`${service!.url}/charges`, {
            method: "POST",
            headers: { "content-type": "application/json", "idempotency-key": ctx.idempotencyKey, [FENCE_HEADER]: String(ctx.fence) },
            body: JSON.stringify(input),
          });
          return res.json();
        },
      });
      const b = createGate({ ledger, tools: [tool], waitMs: 5_000, onAlert: () => {} });
      const [answerB] = await b.runToolUses([toolUse("toolu_s", "charge", { amount: 3 })], scope);
      expect(answerB!.is_error, answerB!.content).toBe(false);
      await b.close();
      await ledger.close();
    } finally {
      child.kill("SIGCONT");
    }
    child.stdin.end("go\n");
    expect(await exited).toBe(0);
    const last = JSON.parse(out.trim().split("\n").pop()!) as { result: { content: string } };
    expect(last.result.content).toMatch(/^EG_IN_PROGRESS: this worker lost the lease/);
    expect(service.received).toHaveLength(1);
    expect(service.charges).toHaveLength(1);
  });
});
