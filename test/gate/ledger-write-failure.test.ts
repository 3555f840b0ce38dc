/**
 * Defect 3 of the correctness issue: a failed ledger write after the tool ran was reported as
 * "Nothing was executed". The reproducer: a tool applies its effect and gets a 502 while another
 * process holds the SQLite file's write lock (SQLITE_BUSY). The agent was told nothing ran, no
 * alert was raised, the record stayed in_progress, and a replay probed "absent" and ran the tool
 * again. Here the lock is real: a second connection to the same file holds BEGIN EXCLUSIVE.
 */
import { join } from "node:path";
import Database from "better-sqlite3";
import { afterEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { createGate } from "../../src/root/create-gate.js";
import { defineTool } from "../../src/core/tool.js";
import type { ProbeResult } from "../../src/core/hooks.js";
import type { Alert } from "../../src/gate/alerts.js";
import { sqliteLedger } from "../../src/stores/sqlite/index.js";
import { tempDir } from "../support/tmp.js";
import { toolUse } from "../support/tools.js";

const scope = { tenant: "acme", task: "t1" };
const dir = tempDir("effectgate-lock-");
let n = 0;

/** A ledger file and a second connection that takes the write lock when asked (another process would do the same). */
function lockedLedger() {
  const file = join(dir, `ledger-${++n}.db`);
  const ledger = sqliteLedger(file, { busyTimeoutMs: 20 });
  let other: Database.Database | undefined;
  return {
    ledger,
    lock() {
      other = new Database(file);
      other.exec("BEGIN EXCLUSIVE");
    },
    unlock() {
      other?.exec("COMMIT");
      other?.close();
      other = undefined;
    },
  };
}

/** A downstream that ignores keys: what it applied, by key. */
function downstream() {
  const applied = new Map<string, number>();
  return {
    applied,
    apply(key: string) {
      applied.set(key, (applied.get(key) ?? 0) + 1);
      return { booking: `B-${applied.size}`, key };
    },
  };
}

let cleanup: (() => Promise<void>) | undefined;
afterEach(async () => {
  await cleanup?.();
  cleanup = undefined;
});

describe("a ledger write that fails after the tool ran", () => {
  it("502 after the effect, the ledger locked: the agent never hears 'nothing was executed'; the true outcome is kept, retried and alerted", async () => {
    const l = lockedLedger();
    const world = downstream();
    const alerts: Alert[] = [];
    const tool = defineTool({
      name: "book", effect: "write", input: z.object({ room: z.string() }), settleMs: 0,
      execute(_input, ctx) {
        world.apply(ctx.idempotencyKey);
        l.lock(); // another process takes the write lock just as the reply comes back
        throw Object.assign(new Error("bad gateway"), { status: 502 });
      },
      async probe(_input, ctx): Promise<ProbeResult<unknown>> {
        return world.applied.has(ctx.idempotencyKey) ? { status: "done", result: { booking: "B-1", key: ctx.idempotencyKey } } : { status: "absent" };
      },
    });
    const gate = createGate({ ledger: l.ledger, tools: [tool], probe: { attempts: 2, initialDelayMs: 1, maxDelayMs: 1 }, onAlert: (a) => alerts.push(a) });
    cleanup = async () => {
      l.unlock();
      await gate.drain();
      await gate.close();
      await l.ledger.close();
    };
    const block = [toolUse("toolu_1", "book", { room: "101" })];
    const [r] = await gate.runToolUses(block, scope);
    expect(r!.content).not.toMatch(/Nothing was executed/);
    expect(r).toMatchObject({ is_error: false, content: JSON.stringify({ booking: "B-1", key: "toolu_1" }) });
    expect(alerts.map((a) => a.code)).toContain("record_failed");
    // A replay while the lock is still held: the true answer again, the tool not run again.
    const [again] = await gate.runToolUses(block, scope);
    expect(again).toEqual(r);
    expect(world.applied.get("toolu_1")).toBe(1);
    // The lock goes: the kept outcome reaches the ledger.
    l.unlock();
    await gate.drain();
    expect(await l.ledger.calls.get("acme", "toolu_1")).toMatchObject({ state: "completed", result: { booking: "B-1", key: "toolu_1" }, owner: null });
    expect(world.applied.get("toolu_1")).toBe(1);
  });

  it("no probe, 502, the ledger locked: an honest 'outcome unknown, do not retry under a new id', and the call reaches a person", async () => {
    const l = lockedLedger();
    const world = downstream();
    const alerts: Alert[] = [];
    const tool = defineTool({
      name: "notify", effect: "write", input: z.object({ to: z.string() }),
      execute(_input, ctx) {
        world.apply(ctx.idempotencyKey);
        l.lock();
        throw Object.assign(new Error("bad gateway"), { status: 502 });
      },
    });
    const gate = createGate({ ledger: l.ledger, tools: [tool], onAlert: (a) => alerts.push(a) });
    cleanup = async () => {
      l.unlock();
      await gate.drain();
      await gate.close();
      await l.ledger.close();
    };
    const block = [toolUse("toolu_2", "notify", { to: "ops" })];
    const [r] = await gate.runToolUses(block, scope);
    expect(r!.is_error).toBe(true);
    expect(r!.content).not.toMatch(/Nothing was executed/);
    expect(r!.content).toMatch(/^EG_NEEDS_HUMAN: the outcome of this notify call is unknown .*Do not retry it under a new id/);
    expect(alerts.map((a) => a.code)).toEqual(expect.arrayContaining(["record_failed", "needs_human"]));
    const [again] = await gate.runToolUses(block, scope);
    expect(again).toEqual(r);
    l.unlock();
    await gate.drain();
    expect(await l.ledger.calls.get("acme", "toolu_2")).toMatchObject({ state: "needs_human" });
    expect(world.applied.get("toolu_2")).toBe(1);
  });

  it("the ledger locked before the claim: 'nothing was executed' is true then, and nothing ran", async () => {
    const l = lockedLedger();
    const world = downstream();
    const tool = defineTool({
      name: "book", effect: "write", input: z.object({ room: z.string() }),
      execute: (_input, ctx) => world.apply(ctx.idempotencyKey),
    });
    const gate = createGate({ ledger: l.ledger, tools: [tool], onAlert: () => {} });
    cleanup = async () => {
      l.unlock();
      await gate.close();
      await l.ledger.close();
    };
    await l.ledger.calls.list({ limit: 1 }); // the file exists, migrated
    l.lock();
    const [r] = await gate.runToolUses([toolUse("toolu_3", "book", { room: "1" })], scope);
    expect(r!.content).toMatch(/^EG_LEDGER_UNAVAILABLE: .*The tool was not started by this request/);
    expect(world.applied.size).toBe(0);
  });
});
