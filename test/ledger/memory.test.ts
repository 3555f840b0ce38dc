import * as vitest from "vitest";
import { describe, expect, it } from "vitest";
import { memoryLedger } from "../../src/stores/memory/index.js";
import { contractSuite } from "../../src/testing/contract-suite.js";
import { claimRequest } from "../../src/testing/contract-suites/calls.js";
import { beginRequest } from "../../src/testing/contract-suites/sagas.js";

contractSuite({ vitest, name: "memory", open: () => memoryLedger() });

// Records used to be filed under `${tenant}\u0000${key}`, so these two were one record.
describe("the memory ledger keeps tenant and key apart, whatever characters they hold", () => {
  const A = { tenant: "a\u0000b", key: "c" };
  const B = { tenant: "a", key: "b\u0000c" };

  it("calls: (a\\u0000b, c) and (a, b\\u0000c) are two records", async () => {
    const ledger = memoryLedger();
    expect((await ledger.calls.claim(claimRequest({ ...A, fingerprint: "fp-a" }))).claimed).toBe(true);
    const second = await ledger.calls.claim(claimRequest({ ...B, fingerprint: "fp-b" }));
    expect(second.claimed).toBe(true);
    expect(second.record).toMatchObject({ ...B, fingerprint: "fp-b" });
    await ledger.calls.update(A.tenant, A.key, 1, { state: "completed", result: { which: "a" }, owner: null });
    expect(await ledger.calls.get(B.tenant, B.key)).toMatchObject({ ...B, state: "in_progress", fingerprint: "fp-b" });
    expect(await ledger.calls.list()).toHaveLength(2);
  });

  it("checkpoints: (a\\u0000b, c) and (a, b\\u0000c) are two checkpoints", async () => {
    const ledger = memoryLedger();
    await ledger.checkpoints.put(A.tenant, A.key, "first");
    expect(await ledger.checkpoints.get(B.tenant, B.key)).toBeUndefined();
    await ledger.checkpoints.put(B.tenant, B.key, "second");
    expect(await ledger.checkpoints.get(A.tenant, A.key)).toBe("first");
  });

  it("sagas: (a\\u0000b, c) and (a, b\\u0000c) are two sagas", async () => {
    const sagas = memoryLedger().sagas!;
    const started = { kind: "saga_started", message: "started" } as const;
    expect((await sagas.begin(beginRequest({ tenant: A.tenant, id: A.key }), started)).created).toBe(true);
    expect(await sagas.get(B.tenant, B.key)).toBeUndefined();
    const second = await sagas.begin(beginRequest({ tenant: B.tenant, id: B.key, task: "other" }), started);
    expect(second.created).toBe(true);
    expect(second.saga).toMatchObject({ tenant: B.tenant, id: B.key, task: "other" });
  });

  it("governance: a kill switch, a quota charge and a rate count of (a\\u0000b, c) are not those of (a, b\\u0000c)", async () => {
    const governance = memoryLedger().governance!;
    await governance.setKillSwitch({ tenant: A.tenant, agent: A.key }, true, { by: "ops" }, 1);
    expect(await governance.activeKillSwitch(B.tenant, B.key)).toBeUndefined();
    expect(await governance.activeKillSwitch(A.tenant, A.key)).toMatchObject({ tenant: A.tenant, agent: A.key });

    const charges = [{ counter: "q", limit: 10, amount: 1 }];
    expect(await governance.consumeQuota({ ...A, charges, now: 1 })).toEqual({ ok: true, charged: true });
    expect(await governance.consumeQuota({ ...B, charges, now: 1 })).toEqual({ ok: true, charged: true });
    expect((await governance.quotaUsage(["q"])).get("q")).toBe(2);

    const counts = [{ breaker: "r", scope: "task:t", limit: 1, windowMs: 60_000 }];
    expect(await governance.hitRate({ ...A, scopes: ["task:t"], counts, now: 1 })).toEqual({ ok: true });
    // The second call is a different call: it passes the limit of 1 and opens the breaker.
    expect(await governance.hitRate({ ...B, scopes: ["task:t"], counts, now: 2 })).toMatchObject({ ok: false, opened: true });
  });

  it("reconcile: a confirmation of (a\\u0000b, c) is not one of (a, b\\u0000c)", async () => {
    const reconcile = memoryLedger().reconcile!;
    const confirmation = { tool: "charge_card", ref: "ch_1", source: "scan", fields: null } as const;
    expect(await reconcile.recordConfirmation({ ...confirmation, ...A })).toBe(true);
    expect(await reconcile.recordConfirmation({ ...confirmation, ...B })).toBe(true);
    expect(await reconcile.listConfirmations({ tool: "charge_card", ...B })).toHaveLength(1);
  });
});
