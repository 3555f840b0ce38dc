/**
 * The GovernanceStore contract: every store runs exactly these tests, through its ledger's
 * `governance`. A store that cannot support a case skips it by name with a reason
 * (`contractSuite`'s `skip`), never silently. Times are passed in: no test sleeps.
 */
import type { Stores } from "../../contracts/stores.js";
import type { GovernanceStore, NewApproval, QuotaCharge, RateCount } from "../../contracts/governance.js";
import type { ContractSuiteDefinition } from "./suite.js";

const T0 = 1_800_000_000_000;

export function newApproval(overrides: Partial<NewApproval> = {}): NewApproval {
  return {
    id: "apr_1", tenant: "acme", key: "toolu_1", tool: "delete_account", effect: "destructive", task: "t1", agent: "bot",
    toolUseId: "toolu_1", input: { account: "acc_1", note: "ünïcødé \u0000 ok" },
    preview: { effect: "would_delete", would_affect: { account: "acc_1", rows: 3 }, reversible: false },
    reasons: ["destructive tool: every call needs approval"], digest: "d".repeat(64), policyVersion: "v1",
    requestedBy: "bot (worker w1)", requestedAt: T0, expiresAt: T0 + 60_000,
    ...overrides,
  };
}

const charge = (counter: string, limit: number, amount = 1): QuotaCharge => ({ counter, limit, amount });
const window = (breaker: string, limit: number, windowMs = 60_000, scope = "task:acme/t1"): RateCount => ({ breaker, scope, limit, windowMs });
const SCOPES = ["task:acme/t1", "agent:acme/bot", "tenant:acme"];

export const governanceSuite: ContractSuiteDefinition = {
  title: "GovernanceStore contract",
  needs: "governance",
  register({ store, expect, opened, test }) {
    let ledger!: Stores;
    let g!: GovernanceStore;
    opened((opening) => {
      ledger = opening;
      if (!ledger.governance) throw new Error(`${store}: the ledger has no governance store`);
      g = ledger.governance;
    });

    // ---- kill switches ----
    test("no kill switch: nothing is stopped", async () => {
      expect(await g.activeKillSwitch("acme", "bot")).toBeUndefined();
      expect(await g.listKillSwitches()).toEqual([]);
    });

    test("a global kill switch stops every tenant and agent, with who, why and since", async () => {
      expect(await g.setKillSwitch({}, true, { by: "alice", reason: "runaway" }, T0)).toBe(true);
      expect(await g.activeKillSwitch("acme", "bot")).toEqual({ tenant: null, agent: null, by: "alice", reason: "runaway", since: T0 });
      expect(await g.activeKillSwitch("globex", undefined)).toMatchObject({ tenant: null, agent: null });
    });

    test("a claim made unless halted: refused while a kill switch covers the tenant or the agent, writing nothing; a known key still answers with its record", async () => {
      const claimUnlessHalted = ledger.calls.claimUnlessHalted?.bind(ledger.calls);
      if (!claimUnlessHalted) throw new Error(`${store}: a ledger with a governance store offers calls.claimUnlessHalted`);
      const request = (key: string) => ({
        tenant: "acme", key, tool: "create_ticket", effect: "write" as const, task: "t", toolUseId: key, fingerprint: "fp",
        input: { n: 1 }, inputRedacted: false, owner: "worker-a", leaseMs: 60_000,
      });
      expect(await claimUnlessHalted(request("k-before"), "bot")).toMatchObject({ claimed: true, record: { key: "k-before", state: "in_progress" } });
      await g.setKillSwitch({ agent: "bot" }, true, { by: "alice" }, T0);
      expect(await claimUnlessHalted(request("k-agent"), "bot")).toEqual({ claimed: false, halted: true });
      expect(await ledger.calls.get("acme", "k-agent")).toBeUndefined();
      // Another agent, and no agent, are not covered by an agent's switch.
      expect(await claimUnlessHalted(request("k-other"), "other")).toMatchObject({ claimed: true });
      expect(await claimUnlessHalted(request("k-none"), undefined)).toMatchObject({ claimed: true });
      // A key the ledger knows is answered with its record, switch or not.
      expect(await claimUnlessHalted(request("k-before"), "bot")).toMatchObject({ claimed: false, record: { key: "k-before", version: 1 } });
      await g.setKillSwitch({ tenant: "acme" }, true, { by: "alice" }, T0);
      expect(await claimUnlessHalted(request("k-tenant"), undefined)).toEqual({ claimed: false, halted: true });
      await g.setKillSwitch({ tenant: "acme" }, false, { by: "alice" }, T0);
      await g.setKillSwitch({ agent: "bot" }, false, { by: "alice" }, T0);
      expect(await claimUnlessHalted(request("k-agent"), "bot")).toMatchObject({ claimed: true, record: { key: "k-agent" } });
      // A switch for one tenant's agent covers that pair only; a global switch covers every call.
      await g.setKillSwitch({ tenant: "acme", agent: "bot" }, true, { by: "alice" }, T0);
      expect(await claimUnlessHalted(request("k-pair"), "bot")).toEqual({ claimed: false, halted: true });
      expect(await claimUnlessHalted(request("k-pair-other"), "other")).toMatchObject({ claimed: true });
      expect(await claimUnlessHalted({ ...request("k-pair-globex"), tenant: "globex" }, "bot")).toMatchObject({ claimed: true });
      await g.setKillSwitch({ tenant: "acme", agent: "bot" }, false, { by: "alice" }, T0);
      await g.setKillSwitch({}, true, { by: "alice" }, T0);
      expect(await claimUnlessHalted({ ...request("k-global"), tenant: "globex" }, undefined)).toEqual({ claimed: false, halted: true });
      expect(await claimUnlessHalted(request("k-global-bot"), "bot")).toEqual({ claimed: false, halted: true });
      expect(await ledger.calls.get("globex", "k-global")).toBeUndefined();
    });

    test("tenant, agent and tenant+agent switches stop only their calls", async () => {
      await g.setKillSwitch({ tenant: "acme" }, true, { by: "a" }, T0);
      expect(await g.activeKillSwitch("acme", undefined)).toMatchObject({ tenant: "acme", agent: null, reason: null });
      expect(await g.activeKillSwitch("globex", "bot")).toBeUndefined();
      await g.setKillSwitch({ agent: "bot" }, true, { by: "a" }, T0);
      expect(await g.activeKillSwitch("globex", "bot")).toMatchObject({ tenant: null, agent: "bot" });
      expect(await g.activeKillSwitch("globex", "other")).toBeUndefined();
      expect(await g.activeKillSwitch("globex", undefined)).toBeUndefined();
      await g.setKillSwitch({ tenant: "initech", agent: "x" }, true, { by: "a" }, T0);
      expect(await g.activeKillSwitch("initech", "x")).toMatchObject({ tenant: "initech", agent: "x" });
      expect(await g.activeKillSwitch("initech", "y")).toBeUndefined();
      expect(await g.listKillSwitches()).toHaveLength(3);
    });

    test("setting a switch twice changes nothing; off clears only that switch and reports whether it was on", async () => {
      expect(await g.setKillSwitch({ tenant: "acme" }, true, { by: "a", reason: "first" }, T0)).toBe(true);
      expect(await g.setKillSwitch({ tenant: "acme" }, true, { by: "b", reason: "second" }, T0 + 5)).toBe(false);
      expect(await g.activeKillSwitch("acme", undefined)).toMatchObject({ by: "a", reason: "first", since: T0 });
      await g.setKillSwitch({}, true, { by: "a" }, T0);
      expect(await g.setKillSwitch({ tenant: "acme" }, false, { by: "a" }, T0)).toBe(true);
      expect(await g.setKillSwitch({ tenant: "acme" }, false, { by: "a" }, T0)).toBe(false);
      // The global one still stops acme.
      expect(await g.activeKillSwitch("acme", undefined)).toMatchObject({ tenant: null });
      await g.setKillSwitch({}, false, { by: "a" }, T0);
      expect(await g.activeKillSwitch("acme", undefined)).toBeUndefined();
    });

    // ---- quotas ----
    test("a quota charges every counter, reads back its totals, and refuses past the limit without charging anything", async () => {
      expect(await g.consumeQuota({ tenant: "acme", key: "k1", charges: [charge("a", 3), charge("b", 100, 60)], now: T0 })).toEqual({ ok: true, charged: true });
      const refused = await g.consumeQuota({ tenant: "acme", key: "k2", charges: [charge("a", 3), charge("b", 100, 50)], now: T0 });
      expect(refused).toEqual({ ok: false, counter: "b", used: 60, limit: 100, amount: 50 });
      const usage = await g.quotaUsage(["a", "b", "never"]);
      expect([usage.get("a"), usage.get("b"), usage.get("never")]).toEqual([1, 60, 0]);
      expect(await g.consumeQuota({ tenant: "acme", key: "k3", charges: [charge("a", 3), charge("b", 100, 40)], now: T0 })).toEqual({ ok: true, charged: true });
      expect((await g.quotaUsage(["b"])).get("b")).toBe(100);
    });

    test("a call is charged once however often it is replayed, and calls in another tenant are other calls", async () => {
      for (let i = 0; i < 3; i++) await g.consumeQuota({ tenant: "acme", key: "k1", charges: [charge("a", 10, 4)], now: T0 });
      expect((await g.quotaUsage(["a"])).get("a")).toBe(4);
      expect(await g.consumeQuota({ tenant: "acme", key: "k1", charges: [charge("a", 10, 4)], now: T0 })).toEqual({ ok: true, charged: false });
      await g.consumeQuota({ tenant: "globex", key: "k1", charges: [charge("a", 10, 4)], now: T0 });
      expect((await g.quotaUsage(["a"])).get("a")).toBe(8);
    });

    test("sums keep fractions; listQuotas filters by prefix", async () => {
      await g.consumeQuota({ tenant: "acme", key: "k1", charges: [charge("sum@task:acme/t1", 100, 12.5)], now: T0 });
      await g.consumeQuota({ tenant: "acme", key: "k2", charges: [charge("sum@task:acme/t1", 100, 0.25), charge("count@task:acme/t1", 5)], now: T0 + 1 });
      const all = await g.listQuotas();
      expect(all.map((c) => [c.counter, c.used])).toEqual([["count@task:acme/t1", 1], ["sum@task:acme/t1", 12.75]]);
      expect((await g.listQuotas({ prefix: "sum@" })).map((c) => c.counter)).toEqual(["sum@task:acme/t1"]);
    });

    test("of many concurrent charges against one counter, exactly the limit is admitted", async () => {
      const results = await Promise.all(Array.from({ length: 40 }, (_, i) =>
        g.consumeQuota({ tenant: "acme", key: `k${i}`, charges: [charge("a", 7)], now: T0 })));
      expect(results.filter((r) => r.ok)).toHaveLength(7);
      expect((await g.quotaUsage(["a"])).get("a")).toBe(7);
    });

    // ---- rate breakers ----
    test("a window admits its limit; the next call opens the breaker once, and it then refuses every call in its scope", async () => {
      for (let i = 0; i < 3; i++) {
        expect(await g.hitRate({ tenant: "acme", key: `k${i}`, scopes: SCOPES, counts: [window("r@task:acme/t1", 3)], now: T0 + i })).toEqual({ ok: true });
      }
      const tripped = await g.hitRate({ tenant: "acme", key: "k3", scopes: SCOPES, counts: [window("r@task:acme/t1", 3)], now: T0 + 10 });
      expect(tripped).toMatchObject({ ok: false, opened: true, breaker: { id: "r@task:acme/t1", tenant: "acme", scope: "task:acme/t1", state: "open", openedAt: T0 + 10, closedBy: null } });
      expect(tripped.ok === false && tripped.breaker.reason).toMatch(/more than 3 calls within 60000 ms/);
      // Open: refused even for a call counted before, and for calls that count in no window.
      expect(await g.hitRate({ tenant: "acme", key: "k0", scopes: SCOPES, counts: [window("r@task:acme/t1", 3)], now: T0 + 11 })).toMatchObject({ ok: false, opened: false });
      expect(await g.hitRate({ tenant: "acme", key: "k9", scopes: SCOPES, counts: [], now: T0 + 11 })).toMatchObject({ ok: false, opened: false });
      // Another task is not stopped.
      expect(await g.hitRate({ tenant: "acme", key: "k9", scopes: ["task:acme/t2", "agent:acme/bot2", "tenant:acme"], counts: [], now: T0 + 11 })).toEqual({ ok: true });
      expect((await g.listBreakers()).map((b) => b.id)).toEqual(["r@task:acme/t1"]);
    });

    test("a call counts once in a window however often it is replayed", async () => {
      for (let i = 0; i < 5; i++) {
        expect(await g.hitRate({ tenant: "acme", key: "same", scopes: SCOPES, counts: [window("r@t", 2)], now: T0 + i })).toEqual({ ok: true });
      }
      expect(await g.hitRate({ tenant: "acme", key: "other", scopes: SCOPES, counts: [window("r@t", 2)], now: T0 + 6 })).toEqual({ ok: true });
      expect(await g.hitRate({ tenant: "acme", key: "third", scopes: SCOPES, counts: [window("r@t", 2)], now: T0 + 7 })).toMatchObject({ ok: false, opened: true });
    });

    test("the window slides: calls older than windowMs no longer count", async () => {
      const w = window("r@t", 2, 1000);
      await g.hitRate({ tenant: "acme", key: "k1", scopes: SCOPES, counts: [w], now: T0 });
      await g.hitRate({ tenant: "acme", key: "k2", scopes: SCOPES, counts: [w], now: T0 + 500 });
      // k1 is 1000 ms old at T0 + 1000: out of the window, so a third call fits.
      expect(await g.hitRate({ tenant: "acme", key: "k3", scopes: SCOPES, counts: [w], now: T0 + 1000 })).toEqual({ ok: true });
      expect(await g.hitRate({ tenant: "acme", key: "k4", scopes: SCOPES, counts: [w], now: T0 + 1001 })).toMatchObject({ ok: false, opened: true });
    });

    test("a refused call counts in none of its windows (all or nothing)", async () => {
      const a = window("a@t", 5);
      const b = window("b@t", 1);
      expect(await g.hitRate({ tenant: "acme", key: "k1", scopes: SCOPES, counts: [a, b], now: T0 })).toEqual({ ok: true });
      expect(await g.hitRate({ tenant: "acme", key: "k2", scopes: SCOPES, counts: [a, b], now: T0 })).toMatchObject({ ok: false, breaker: { id: "b@t" } });
      await g.closeBreaker("b@t", "op", T0);
      // k2 did not count in a: a still has room for 4 more.
      for (let i = 3; i < 7; i++) expect(await g.hitRate({ tenant: "acme", key: `k${i}`, scopes: SCOPES, counts: [a], now: T0 })).toEqual({ ok: true });
      expect(await g.hitRate({ tenant: "acme", key: "k7", scopes: SCOPES, counts: [a], now: T0 })).toMatchObject({ ok: false, opened: true });
    });

    test("closing a breaker records who and when, resets its window, and lets calls run again; closing twice does nothing", async () => {
      const w = window("r@t", 1);
      await g.hitRate({ tenant: "acme", key: "k1", scopes: SCOPES, counts: [w], now: T0 });
      await g.hitRate({ tenant: "acme", key: "k2", scopes: SCOPES, counts: [w], now: T0 });
      const closed = await g.closeBreaker("r@t", "alice", T0 + 100);
      expect(closed).toMatchObject({ id: "r@t", state: "closed", closedBy: "alice", closedAt: T0 + 100 });
      expect(await g.closeBreaker("r@t", "bob", T0 + 200)).toBeUndefined();
      expect(await g.closeBreaker("no-such", "bob", T0)).toBeUndefined();
      expect(await g.listBreakers()).toEqual([]);
      expect(await g.listBreakers({ includeClosed: true })).toHaveLength(1);
      expect(await g.hitRate({ tenant: "acme", key: "k2", scopes: SCOPES, counts: [w], now: T0 + 300 })).toEqual({ ok: true });
      // It can open again.
      expect(await g.hitRate({ tenant: "acme", key: "k3", scopes: SCOPES, counts: [w], now: T0 + 301 })).toMatchObject({ ok: false, opened: true, breaker: { state: "open", closedBy: null } });
    });

    test("countBreakers counts the open breakers exactly, past any listing's limit (and, with includeClosed, every breaker)", async () => {
      expect(await g.countBreakers()).toBe(0);
      expect(await g.countBreakers({ includeClosed: true })).toBe(0);
      // A window of limit 0: the first call opens its breaker.
      for (let i = 0; i < 120; i++) {
        const scope = `task:acme/t${i}`;
        expect(await g.hitRate({ tenant: "acme", key: `k${i}`, scopes: [scope], counts: [window(`b${i}@${scope}`, 0, 60_000, scope)], now: T0 + i })).toMatchObject({ ok: false, opened: true });
      }
      expect(await g.listBreakers()).toHaveLength(100);
      expect(await g.countBreakers()).toBe(120);
      for (const i of [0, 7, 119]) await g.closeBreaker(`b${i}@task:acme/t${i}`, "ops", T0 + 500);
      expect(await g.countBreakers()).toBe(117);
      expect(await g.countBreakers({ includeClosed: false })).toBe(117);
      expect(await g.countBreakers({ includeClosed: true })).toBe(120);
    });

    test("of many concurrent calls against one window, exactly the limit is admitted and the breaker opens once", async () => {
      const results = await Promise.all(Array.from({ length: 30 }, (_, i) =>
        g.hitRate({ tenant: "acme", key: `k${i}`, scopes: SCOPES, counts: [window("r@t", 5)], now: T0 })));
      expect(results.filter((r) => r.ok)).toHaveLength(5);
      expect(results.filter((r) => !r.ok && r.opened)).toHaveLength(1);
    });

    // ---- approvals ----
    test("a new request is stored pending, read back intact, and filing it again changes nothing", async () => {
      const first = await g.putApproval(newApproval());
      expect(first.created).toBe(true);
      expect(first.approval).toEqual({ ...newApproval(), state: "pending", decidedBy: null, decidedAt: null, note: null, consumedAt: null });
      const again = await g.putApproval(newApproval({ toolUseId: "toolu_other", requestedAt: T0 + 5 }));
      expect(again).toEqual({ created: false, approval: first.approval });
      expect(await g.getApproval("apr_1")).toEqual(first.approval);
      expect(await g.getApproval("apr_none")).toBeUndefined();
    });

    test("approvals are listed oldest first, by state and tenant", async () => {
      await g.putApproval(newApproval({ id: "apr_b", requestedAt: T0 + 2 }));
      await g.putApproval(newApproval({ id: "apr_a", requestedAt: T0 + 1, tenant: "globex" }));
      await g.putApproval(newApproval({ id: "apr_c", requestedAt: T0 + 3, preview: null }));
      await g.moveApproval("apr_c", "pending", { to: "denied", by: "x" }, T0 + 4);
      expect((await g.listApprovals()).map((a) => a.id)).toEqual(["apr_a", "apr_b", "apr_c"]);
      expect((await g.listApprovals({ state: "pending" })).map((a) => a.id)).toEqual(["apr_a", "apr_b"]);
      expect((await g.listApprovals({ tenant: "acme" })).map((a) => a.id)).toEqual(["apr_b", "apr_c"]);
      expect((await g.listApprovals({ limit: 1 })).map((a) => a.id)).toEqual(["apr_a"]);
      expect((await g.getApproval("apr_c"))?.preview).toBeNull();
    });

    test("approvals by key: a call's requests in its tenant, or that key in every tenant; keys are data, matched whole", async () => {
      await g.putApproval(newApproval({ id: "apr_b", key: "k1", requestedAt: T0 + 2, policyVersion: "v2" }));
      await g.putApproval(newApproval({ id: "apr_a", key: "k1", requestedAt: T0 + 1 }));
      await g.putApproval(newApproval({ id: "apr_c", key: "k2", requestedAt: T0 + 3 }));
      await g.putApproval(newApproval({ id: "apr_d", key: "k1", tenant: "globex", requestedAt: T0 + 4 }));
      await g.putApproval(newApproval({ id: "apr_e", key: "k1", tenant: "__proto__", requestedAt: T0 + 5 }));
      await g.putApproval(newApproval({ id: "apr_f", key: "k1%", requestedAt: T0 + 6 }));
      const ids = async (query: Parameters<GovernanceStore["listApprovals"]>[0]) => (await g.listApprovals(query)).map((a) => a.id);
      expect(await ids({ tenant: "acme", key: "k1" })).toEqual(["apr_a", "apr_b"]);
      expect(await ids({ key: "k1" })).toEqual(["apr_a", "apr_b", "apr_d", "apr_e"]);
      expect(await ids({ tenant: "__proto__", key: "k1" })).toEqual(["apr_e"]);
      expect(await ids({ key: "k1%" })).toEqual(["apr_f"]);
      expect(await ids({ key: "k" })).toEqual([]);
      expect(await ids({ key: "%" })).toEqual([]);
      expect(await ids({ key: "k1' OR '1'='1" })).toEqual([]);
      await g.moveApproval("apr_a", "pending", { to: "denied", by: "x" }, T0 + 7);
      expect(await ids({ tenant: "acme", key: "k1", state: "pending" })).toEqual(["apr_b"]);
      expect(await ids({ tenant: "acme", key: "k1", state: "denied" })).toEqual(["apr_a"]);
      expect(await ids({ tenant: "acme", key: "k1", limit: 1 })).toEqual(["apr_a"]);
    });

    test("countApprovals counts exactly by state, tenant and key, past any listing's limit, and follows every move", async () => {
      expect(await g.countApprovals()).toBe(0);
      expect(await g.countApprovals({ state: "pending" })).toBe(0);
      for (let i = 0; i < 150; i++) await g.putApproval(newApproval({ id: `apr_p${i}`, key: `k${i % 3}`, requestedAt: T0 + i }));
      await g.putApproval(newApproval({ id: "apr_g", tenant: "globex", key: "k0" }));
      await g.putApproval(newApproval({ id: "apr_x", tenant: "__proto__", key: "k0" }));
      // A listing stops at its limit (100 by default); a count does not.
      expect(await g.listApprovals({ state: "pending" })).toHaveLength(100);
      expect(await g.countApprovals({ state: "pending" })).toBe(152);
      expect(await g.countApprovals()).toBe(152);
      expect(await g.countApprovals({ tenant: "acme" })).toBe(150);
      expect(await g.countApprovals({ tenant: "__proto__" })).toBe(1);
      expect(await g.countApprovals({ tenant: "initech" })).toBe(0);
      expect(await g.countApprovals({ key: "k0" })).toBe(52);
      expect(await g.countApprovals({ tenant: "acme", key: "k0" })).toBe(50);
      expect(await g.countApprovals({ tenant: "acme", key: "k0", state: "approved" })).toBe(0);
      await g.moveApproval("apr_p0", "pending", { to: "approved", by: "alice" }, T0 + 200);
      await g.moveApproval("apr_p3", "pending", { to: "denied", by: "alice" }, T0 + 200);
      await g.moveApproval("apr_g", "pending", { to: "expired" }, T0 + 200);
      expect(await g.countApprovals({ state: "pending" })).toBe(149);
      expect(await g.countApprovals({ state: "approved" })).toBe(1);
      expect(await g.countApprovals({ state: "denied", tenant: "acme", key: "k0" })).toBe(1);
      expect(await g.countApprovals({ state: "expired", tenant: "acme" })).toBe(0);
      expect(await g.countApprovals({ state: "expired", tenant: "globex" })).toBe(1);
      await g.moveApproval("apr_p0", "approved", { to: "consumed" }, T0 + 201);
      expect(await g.countApprovals({ state: "approved" })).toBe(0);
      expect(await g.countApprovals({ state: "consumed", key: "k0" })).toBe(1);
      expect(await g.countApprovals()).toBe(152);
    });

    test("a decision is compare-and-set on the state and records who, when, the note and the new expiry", async () => {
      await g.putApproval(newApproval());
      const approved = await g.moveApproval("apr_1", "pending", { to: "approved", by: "alice", note: "ok", expiresAt: T0 + 99_000 }, T0 + 10);
      expect(approved).toMatchObject({ state: "approved", decidedBy: "alice", decidedAt: T0 + 10, note: "ok", expiresAt: T0 + 99_000, consumedAt: null });
      expect(await g.moveApproval("apr_1", "pending", { to: "denied", by: "bob" }, T0 + 11)).toBeUndefined();
      const consumed = await g.moveApproval("apr_1", "approved", { to: "consumed" }, T0 + 20);
      expect(consumed).toMatchObject({ state: "consumed", consumedAt: T0 + 20, decidedBy: "alice", note: "ok" });
      expect(await g.moveApproval("apr_1", "approved", { to: "consumed" }, T0 + 21)).toBeUndefined();
      expect(await g.moveApproval("apr_none", "pending", { to: "approved", by: "x" }, T0)).toBeUndefined();
    });

    test("an approval is consumed once, however many workers race for it", async () => {
      await g.putApproval(newApproval());
      await g.moveApproval("apr_1", "pending", { to: "approved", by: "alice" }, T0);
      const results = await Promise.all(Array.from({ length: 10 }, () => g.moveApproval("apr_1", "approved", { to: "consumed" }, T0 + 1)));
      expect(results.filter((r) => r !== undefined)).toHaveLength(1);
    });

    test("illegal moves are refused by name; denied, expired and consumed are final", async () => {
      await g.putApproval(newApproval());
      await expect(g.moveApproval("apr_1", "pending", { to: "consumed" }, T0)).rejects.toThrow(/EG_ILLEGAL_TRANSITION: approval apr_1 cannot move from pending to consumed/);
      await expect(g.moveApproval("apr_1", "denied", { to: "approved", by: "x" }, T0)).rejects.toThrow(/cannot move from denied to approved/);
      expect(await g.moveApproval("apr_1", "pending", { to: "expired" }, T0)).toMatchObject({ state: "expired", decidedBy: null });
      await expect(g.moveApproval("apr_1", "expired", { to: "pending" }, T0)).rejects.toThrow(/EG_ILLEGAL_TRANSITION/);
      expect((await g.getApproval("apr_1"))?.state).toBe("expired");
    });
  },
};
