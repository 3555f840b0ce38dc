/**
 * The console's overview counts exactly, past every cap it once had: more than 1,000 pending
 * approvals and more than 1,000 queue items (it once counted lists of at most 1,000), more than
 * 100 open breakers (a default page), and a blast radius that is the store's own count (it once
 * counted at most 20,000 calls per state and said `truncated`). A call's detail lists its own
 * approval requests, found by key.
 */
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import type { CallState } from "../../src/core/states.js";
import type { EffectClass } from "../../src/core/effect-class.js";
import type { Stores } from "../../src/contracts/stores.js";
import { silentLogger } from "../../src/core/logger.js";
import { startConsole, type ConsoleServer } from "../../src/root/console/server.js";
import { sqliteLedger } from "../../src/stores/sqlite/index.js";
import { claimRequest } from "../../src/testing/contract-suites/calls.js";
import { newApproval } from "../../src/testing/contract-suites/governance.js";
import { tempDir } from "../support/tmp.js";
import { call } from "./support.js";

const TOKEN = "counts-token-0123456789abcdefghijkl";
const opened: { server: ConsoleServer; ledger: Stores }[] = [];
afterAll(async () => {
  for (const o of opened.splice(0)) {
    await o.server.close();
    await o.ledger.close();
  }
});

/** `count` of something, 200 at a time (calls asked together share a commit). */
async function inBatches(count: number, make: (i: number) => Promise<unknown>): Promise<void> {
  for (let start = 0; start < count; start += 200) await Promise.all(Array.from({ length: Math.min(200, count - start) }, (_, j) => make(start + j)));
}

/** A call claimed and moved along the state table to `state`. */
async function callIn(ledger: Stores, key: string, effect: EffectClass, state: CallState): Promise<void> {
  await ledger.calls.claim(claimRequest({ key, toolUseId: key, effect }));
  const path: CallState[] = state === "needs_human" ? ["needs_human"] : state === "compensation_failed" ? ["completed", "compensation_failed"] : state === "in_progress" ? [] : [state];
  let version = 1;
  for (const to of path) if (!(await ledger.calls.update("acme", key, version++, { state: to, owner: null, error: "lost" }))) throw new Error(`${key} did not move to ${to}`);
}

interface Overview {
  approvalsPending: number;
  queueSize: number;
  openBreakers: number;
  blastRadius: { byState: Record<string, Record<EffectClass, number>> } & Record<string, unknown>;
}

describe("console overview counts", { timeout: 60_000 }, () => {
  it("counts 1,234 pending approvals, 1,310 queue items and 110 open breakers exactly; the blast radius is the store's own count of every state", async () => {
    const ledger = sqliteLedger(join(tempDir(), "counts.db"), { durability: "process" });
    const T = Date.now();
    const g = ledger.governance!;
    await inBatches(1_234, (i) => g.putApproval(newApproval({ id: `apr_p${i}`, key: `toolu_d${i}`, requestedAt: T + i, expiresAt: T + 3_600_000 })));
    // Decided requests are not pending.
    await inBatches(20, async (i) => {
      await g.putApproval(newApproval({ id: `apr_x${i}`, key: `toolu_x${i}`, requestedAt: T, expiresAt: T + 3_600_000 }));
      await g.moveApproval(`apr_x${i}`, "pending", { to: i % 2 ? "approved" : "denied", by: "ops" }, T);
    });
    // The queue: 1,100 needs_human and 60 compensation_failed calls, 150 open findings about nothing waiting,
    // and 40 about waiting calls (listed with their call, not on their own).
    await inBatches(1_100, (i) => callIn(ledger, `h${i}`, i % 3 === 0 ? "destructive" : "write", "needs_human"));
    await inBatches(60, (i) => callIn(ledger, `c${i}`, "write", "compensation_failed"));
    await inBatches(300, (i) => callIn(ledger, `done${i}`, i % 2 ? "read" : "write", "completed"));
    await inBatches(7, (i) => callIn(ledger, `run${i}`, "read", "in_progress"));
    const r = ledger.reconcile!;
    const finding = (id: string, key: string) => ({
      id, kind: "unresolved" as const, tool: "create_ticket", tenant: "acme", key, summary: "differs", ledger: null, downstream: [], differences: [], source: "scan" as const,
    });
    await inBatches(150, (i) => r.recordFinding(finding(`f_o${i}`, `gone${i}`)));
    await inBatches(40, (i) => r.recordFinding(finding(`f_h${i}`, `h${i}`)));
    // 110 open rate breakers (the listing's default page is 100): a window of limit 0 opens on its first call.
    await inBatches(110, (i) => g.hitRate({ tenant: "acme", key: `r${i}`, scopes: [`task:acme/t${i}`], counts: [{ breaker: `b${i}`, scope: `task:acme/t${i}`, limit: 0, windowMs: 60_000 }], now: T }));

    const server = await startConsole({ ledger, token: TOKEN, port: 0, logger: silentLogger });
    opened.push({ server, ledger });
    const reply = await call(server.url, TOKEN, "GET", "/api/overview");
    expect(reply.status).toBe(200);
    const overview = reply.body as Overview;
    expect(overview.approvalsPending).toBe(1_234);
    expect(overview.queueSize).toBe(1_100 + 60 + 150);
    expect(overview.openBreakers).toBe(110);
    expect(overview.blastRadius.byState).toEqual({
      in_progress: { read: 7, write: 0, destructive: 0 },
      completed: { read: 150, write: 150, destructive: 0 },
      failed: { read: 0, write: 0, destructive: 0 },
      uncertain: { read: 0, write: 0, destructive: 0 },
      needs_human: { read: 0, write: 733, destructive: 367 },
      compensated: { read: 0, write: 0, destructive: 0 },
      compensation_failed: { read: 0, write: 60, destructive: 0 },
    });
    expect(overview.blastRadius).not.toHaveProperty("truncated");
    // The navigation's badges: the same two exact figures, and nothing that counts every call.
    expect((await call(server.url, TOKEN, "GET", "/api/badges")).body).toEqual({ approvalsPending: 1_234, queueSize: 1_310 });
    // The chart is the store's count, cell for cell.
    for (const { state, effect, count } of await ledger.calls.countByStateAndEffect()) expect(overview.blastRadius.byState[state]?.[effect]).toBe(count);

    // A call's detail: its own requests (two policy versions), found by key among 1,254 in its tenant.
    await g.putApproval(newApproval({ id: "apr_h1_v2", key: "h1", policyVersion: "v2", requestedAt: T + 2 }));
    await g.putApproval(newApproval({ id: "apr_h1_v1", key: "h1", requestedAt: T + 1 }));
    await g.putApproval(newApproval({ id: "apr_h1_globex", key: "h1", tenant: "globex", requestedAt: T }));
    const detail = (await call(server.url, TOKEN, "GET", "/api/calls/acme/h1")).body as { approvals: { id: string }[] };
    expect(detail.approvals.map((a) => a.id)).toEqual(["apr_h1_v1", "apr_h1_v2"]);
    expect(((await call(server.url, TOKEN, "GET", "/api/calls/acme/h2")).body as { approvals: unknown[] }).approvals).toEqual([]);
    expect(((await call(server.url, TOKEN, "GET", "/api/overview")).body as Overview).approvalsPending).toBe(1_237);
  });
});
