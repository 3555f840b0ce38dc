/**
 * The call store and checkpoints contract ("Ledger contract"): every store runs exactly these
 * tests, through its ledger's `calls` and `checkpoints`. A store that cannot support a case skips
 * it by name with a reason (`contractSuite`'s `skip`), never silently.
 */
import type { CallCount, CallCountQuery, CallRecord, ClaimRequest, ListCursor, ListQuery } from "../../contracts/calls.js";
import type { CallState } from "../../core/states.js";
import type { EffectClass } from "../../core/effect-class.js";
import { listCursorOf, listOrder } from "../../contracts/call-rules.js";
import type { Stores } from "../../contracts/stores.js";
import type { ContractSuiteDefinition } from "./suite.js";

export function claimRequest(overrides: Partial<ClaimRequest> = {}): ClaimRequest {
  return {
    tenant: "acme", key: "toolu_1", tool: "create_ticket", effect: "write", task: "task-1", toolUseId: "toolu_1",
    fingerprint: "fp-1", input: { title: "printer on fire" }, inputRedacted: false, owner: "worker-a", leaseMs: 60_000,
    ...overrides,
  };
}

export const callsSuite: ContractSuiteDefinition = {
  title: "Ledger contract",
  register({ expect, opened, test }) {
    let ledger!: Stores;
    opened((opening) => {
      ledger = opening;
    });

    test("a first claim creates an in_progress record held by the claimant", async () => {
      const before = await ledger.calls.now();
      const result = await ledger.calls.claim(claimRequest());
      expect(result.claimed).toBe(true);
      expect(result.record).toMatchObject({
        tenant: "acme", key: "toolu_1", tool: "create_ticket", effect: "write", state: "in_progress",
        owner: "worker-a", attempts: 1, version: 1, result: null, error: null, input: { title: "printer on fire" },
      });
      expect(result.record.leaseExpiresAt).toBeGreaterThanOrEqual(before + 60_000);
    });

    test("a second claim of the same key changes nothing and returns the record", async () => {
      await ledger.calls.claim(claimRequest());
      const second = await ledger.calls.claim(claimRequest({ owner: "worker-b", fingerprint: "fp-other", toolUseId: "toolu_9" }));
      expect(second.claimed).toBe(false);
      expect(second.record).toMatchObject({ owner: "worker-a", fingerprint: "fp-1", toolUseId: "toolu_1", version: 1 });
    });

    test("of many concurrent claims for one key exactly one wins", async () => {
      const results = await Promise.all(
        Array.from({ length: 20 }, (_, i) => ledger.calls.claim(claimRequest({ owner: `worker-${i}` }))),
      );
      expect(results.filter((r) => r.claimed)).toHaveLength(1);
      const owners = new Set(results.map((r) => r.record.owner));
      expect(owners.size).toBe(1);
    });

    test("records are scoped by tenant: the same key in two tenants is two records", async () => {
      await ledger.calls.claim(claimRequest({ tenant: "acme" }));
      const other = await ledger.calls.claim(claimRequest({ tenant: "globex" }));
      expect(other.claimed).toBe(true);
      await ledger.calls.update("acme", "toolu_1", 1, { state: "completed", result: { ticket: 1 }, owner: null });
      expect((await ledger.calls.get("globex", "toolu_1"))?.result).toBeNull();
      expect(await ledger.calls.get("initech", "toolu_1")).toBeUndefined();
    });

    test("tenant and key never run together: tenant a\\u0000b + key c and tenant a + key b\\u0000c are two records", async () => {
      const first = await ledger.calls.claim(claimRequest({ tenant: "a\u0000b", key: "c", fingerprint: "fp-first" }));
      const second = await ledger.calls.claim(claimRequest({ tenant: "a", key: "b\u0000c", fingerprint: "fp-second" }));
      expect(first.claimed).toBe(true);
      expect(second.claimed).toBe(true);
      expect(second.record).toMatchObject({ tenant: "a", key: "b\u0000c", fingerprint: "fp-second", version: 1 });
      await ledger.calls.update("a\u0000b", "c", 1, { state: "completed", result: { which: "first" }, owner: null });
      expect(await ledger.calls.get("a\u0000b", "c")).toMatchObject({ tenant: "a\u0000b", key: "c", state: "completed", result: { which: "first" } });
      expect(await ledger.calls.get("a", "b\u0000c")).toMatchObject({ tenant: "a", key: "b\u0000c", state: "in_progress", fingerprint: "fp-second", version: 1 });
      expect(await ledger.calls.get("a", "b")).toBeUndefined();
      expect((await ledger.calls.list({ tenant: "a" })).map((r) => r.key)).toEqual(["b\u0000c"]);
      // The checkpoints of the bundle are kept the same way.
      await ledger.checkpoints.put("a\u0000b", "c", "first");
      await ledger.checkpoints.put("a", "b\u0000c", "second");
      expect(await ledger.checkpoints.get("a\u0000b", "c")).toBe("first");
      expect(await ledger.checkpoints.get("a", "b\u0000c")).toBe("second");
    });

    test("update is compare-and-set on version and bumps it", async () => {
      await ledger.calls.claim(claimRequest());
      const done = await ledger.calls.update("acme", "toolu_1", 1, { state: "completed", result: { id: "T-1" }, owner: null });
      expect(done).toMatchObject({ state: "completed", result: { id: "T-1" }, version: 2, owner: null, leaseExpiresAt: null });
      const stale = await ledger.calls.update("acme", "toolu_1", 1, { state: "failed", error: "late" });
      expect(stale).toBeUndefined();
      expect(await ledger.calls.get("acme", "toolu_1")).toMatchObject({ state: "completed", result: { id: "T-1" }, version: 2 });
    });

    test("update of a missing record returns undefined", async () => {
      expect(await ledger.calls.update("acme", "nope", 1, { state: "completed" })).toBeUndefined();
    });

    test("an illegal transition is refused with an error that names both states", async () => {
      await ledger.calls.claim(claimRequest());
      await ledger.calls.update("acme", "toolu_1", 1, { state: "failed", error: "boom", owner: null });
      await expect(ledger.calls.update("acme", "toolu_1", 2, { state: "completed" })).rejects.toThrow(/EG_ILLEGAL_TRANSITION.*failed to completed/);
      expect(await ledger.calls.get("acme", "toolu_1")).toMatchObject({ state: "failed", version: 2 });
    });

    test("results round-trip as JSON exactly (strings, nesting, unicode, null)", async () => {
      const result = { text: "línea 1\n\"quoted\" ☃", n: 1.5, list: [1, null, { deep: true }], empty: "" };
      await ledger.calls.claim(claimRequest());
      await ledger.calls.update("acme", "toolu_1", 1, { state: "completed", result, owner: null });
      expect((await ledger.calls.get("acme", "toolu_1"))?.result).toEqual(result);
      await ledger.calls.claim(claimRequest({ key: "k-str" }));
      await ledger.calls.update("acme", "k-str", 1, { state: "completed", result: "plain text", owner: null });
      expect((await ledger.calls.get("acme", "k-str"))?.result).toBe("plain text");
    });

    test("countAttempt counts a re-execution and leaseMs sets a new lease", async () => {
      await ledger.calls.claim(claimRequest());
      const now = await ledger.calls.now();
      const again = await ledger.calls.update("acme", "toolu_1", 1, { state: "in_progress", owner: "worker-b", leaseMs: 5_000, countAttempt: true });
      expect(again).toMatchObject({ attempts: 2, owner: "worker-b", version: 2 });
      expect(again?.leaseExpiresAt).toBeGreaterThanOrEqual(now + 5_000);
    });

    test("takeOver refuses a live lease and takes an expired one", async () => {
      await ledger.calls.claim(claimRequest({ leaseMs: 60_000 }));
      expect(await ledger.calls.takeOver({ tenant: "acme", key: "toolu_1", version: 1, owner: "worker-b", leaseMs: 1000 })).toBeUndefined();
      await ledger.calls.claim(claimRequest({ key: "short", leaseMs: -1 })); // already expired
      const taken = await ledger.calls.takeOver({ tenant: "acme", key: "short", version: 1, owner: "worker-b", leaseMs: 1000 });
      expect(taken).toMatchObject({ owner: "worker-b", state: "in_progress", version: 2 });
    });

    test("takeOver of a live lease succeeds only when the holder is proven dead", async () => {
      await ledger.calls.claim(claimRequest());
      const taken = await ledger.calls.takeOver({ tenant: "acme", key: "toolu_1", version: 1, owner: "worker-b", leaseMs: 1000, holderIsDead: true });
      expect(taken?.owner).toBe("worker-b");
    });

    test("takeOver is compare-and-set: of two racing take-overs one wins", async () => {
      await ledger.calls.claim(claimRequest({ leaseMs: -1 }));
      const [a, b] = await Promise.all([
        ledger.calls.takeOver({ tenant: "acme", key: "toolu_1", version: 1, owner: "worker-b", leaseMs: 1000 }),
        ledger.calls.takeOver({ tenant: "acme", key: "toolu_1", version: 1, owner: "worker-c", leaseMs: 1000 }),
      ]);
      expect([a, b].filter(Boolean)).toHaveLength(1);
    });

    test("takeOver leaves an uncertain call alone while its holder's lease is live", async () => {
      await ledger.calls.claim(claimRequest());
      await ledger.calls.update("acme", "toolu_1", 1, { state: "uncertain", error: "timed out, probing", leaseMs: 60_000 });
      expect(await ledger.calls.takeOver({ tenant: "acme", key: "toolu_1", version: 2, owner: "w", leaseMs: 1000 })).toBeUndefined();
      expect(await ledger.calls.renewLease("acme", "toolu_1", 2, "worker-a", 60_000)).toBe(true);
    });

    test("takeOver takes released uncertain calls but never settled ones", async () => {
      await ledger.calls.claim(claimRequest());
      await ledger.calls.update("acme", "toolu_1", 1, { state: "uncertain", owner: null, error: "timed out" });
      expect(await ledger.calls.takeOver({ tenant: "acme", key: "toolu_1", version: 2, owner: "w", leaseMs: 1000 })).toMatchObject({ state: "uncertain", owner: "w" });
      await ledger.calls.claim(claimRequest({ key: "done", leaseMs: -1 }));
      await ledger.calls.update("acme", "done", 1, { state: "completed", result: 1, owner: null });
      expect(await ledger.calls.takeOver({ tenant: "acme", key: "done", version: 2, owner: "w", leaseMs: 1000, holderIsDead: true })).toBeUndefined();
    });

    test("renewLease extends only the current holder's lease and keeps the version", async () => {
      await ledger.calls.claim(claimRequest({ leaseMs: 1000 }));
      expect(await ledger.calls.renewLease("acme", "toolu_1", 1, "worker-a", 90_000)).toBe(true);
      const record = await ledger.calls.get("acme", "toolu_1");
      expect(record?.version).toBe(1);
      expect(record?.leaseExpiresAt).toBeGreaterThanOrEqual((await ledger.calls.now()) + 80_000);
      expect(await ledger.calls.renewLease("acme", "toolu_1", 1, "worker-b", 90_000)).toBe(false);
      expect(await ledger.calls.renewLease("acme", "toolu_1", 7, "worker-a", 90_000)).toBe(false);
    });

    test("remove is compare-and-set on version; a removed key can be claimed afresh", async () => {
      const { record } = await ledger.calls.claim(claimRequest());
      expect(await ledger.calls.remove("acme", "toolu_1", 7, record.claimToken)).toBe(false);
      expect(await ledger.calls.remove("globex", "toolu_1", 1, record.claimToken)).toBe(false);
      expect(await ledger.calls.remove("acme", "toolu_1", 1, record.claimToken)).toBe(true);
      expect(await ledger.calls.get("acme", "toolu_1")).toBeUndefined();
      expect(await ledger.calls.remove("acme", "toolu_1", 1, record.claimToken)).toBe(false);
      expect((await ledger.calls.claim(claimRequest({ owner: "worker-b" }))).claimed).toBe(true);
    });

    test("a late remove never deletes a later claim of the same key, even at the same version", async () => {
      const first = (await ledger.calls.claim(claimRequest())).record;
      expect(await ledger.calls.remove("acme", "toolu_1", 1, first.claimToken)).toBe(true);
      const second = (await ledger.calls.claim(claimRequest({ owner: "worker-b" }))).record;
      expect(second.version).toBe(first.version);
      expect(second.claimToken).not.toBe(first.claimToken);
      // A remover that read the first claim comes late: it must not delete the second.
      expect(await ledger.calls.remove("acme", "toolu_1", first.version, first.claimToken)).toBe(false);
      expect((await ledger.calls.get("acme", "toolu_1"))?.owner).toBe("worker-b");
    });

    test("the fence starts at 1 (or the claimant's), rises on every take-over, and never falls", async () => {
      const { record } = await ledger.calls.claim(claimRequest({ leaseMs: 1 }));
      expect(record.fence).toBe(1);
      await new Promise((resolve) => setTimeout(resolve, 5));
      const b = await ledger.calls.takeOver({ tenant: "acme", key: "toolu_1", version: 1, owner: "worker-b", leaseMs: 1 });
      expect(b?.fence).toBe(2);
      await new Promise((resolve) => setTimeout(resolve, 5));
      const c = await ledger.calls.takeOver({ tenant: "acme", key: "toolu_1", version: b!.version, owner: "worker-c", leaseMs: 60_000, fence: 10 });
      expect(c?.fence).toBe(10);
      const rerun = await ledger.calls.update("acme", "toolu_1", c!.version, { state: "in_progress", countAttempt: true });
      expect(rerun?.fence).toBe(10);
      const done = await ledger.calls.update("acme", "toolu_1", rerun!.version, { state: "completed", result: 1, owner: null });
      expect(done?.fence).toBe(10);
      const { record: own } = await ledger.calls.claim(claimRequest({ key: "k-fenced", fence: 42 }));
      expect(own.fence).toBe(42);
      const low = await ledger.calls.claim(claimRequest({ key: "k-low", leaseMs: 1 }));
      await new Promise((resolve) => setTimeout(resolve, 5));
      expect((await ledger.calls.takeOver({ tenant: "acme", key: "k-low", version: low.record.version, owner: "w", leaseMs: 1, fence: 0 }))?.fence).toBe(2);
    });

    test("startedAt is the claim's time, and moves only when a re-run is counted", async () => {
      const before = await ledger.calls.now();
      const { record } = await ledger.calls.claim(claimRequest());
      expect(record.startedAt).toBeGreaterThanOrEqual(before);
      expect(record.startedAt).toBeLessThanOrEqual(await ledger.calls.now());
      await new Promise((resolve) => setTimeout(resolve, 5));
      const uncertain = await ledger.calls.update("acme", "toolu_1", 1, { state: "uncertain", error: "timeout" });
      expect(uncertain?.startedAt).toBe(record.startedAt);
      const rerun = await ledger.calls.update("acme", "toolu_1", uncertain!.version, { state: "in_progress", countAttempt: true });
      expect(rerun!.startedAt).toBeGreaterThan(record.startedAt);
      expect((await ledger.calls.get("acme", "toolu_1"))?.startedAt).toBe(rerun!.startedAt);
    });

    test("listUnsettled returns uncertain and lease-expired calls, not live or settled ones", async () => {
      await ledger.calls.claim(claimRequest({ key: "live" }));
      await ledger.calls.claim(claimRequest({ key: "expired", leaseMs: -1 }));
      await ledger.calls.claim(claimRequest({ key: "unsure" }));
      await ledger.calls.update("acme", "unsure", 1, { state: "uncertain", owner: null });
      await ledger.calls.claim(claimRequest({ key: "done" }));
      await ledger.calls.update("acme", "done", 1, { state: "completed", result: null, owner: null });
      const keys = (await ledger.calls.listUnsettled()).map((r) => r.key).sort();
      expect(keys).toEqual(["expired", "unsure"]);
      const withLive = (await ledger.calls.listUnsettled({ includeLive: true })).map((r) => r.key).sort();
      expect(withLive).toEqual(["expired", "live", "unsure"]);
    });

    test("list filters by tenant, state and tool, oldest first, with a limit", async () => {
      for (let i = 0; i < 5; i++) await ledger.calls.claim(claimRequest({ key: `k${i}`, tool: i % 2 ? "send_email" : "create_ticket" }));
      await ledger.calls.claim(claimRequest({ key: "other-tenant", tenant: "globex" }));
      await ledger.calls.update("acme", "k0", 1, { state: "completed", result: 0, owner: null });
      expect((await ledger.calls.list({ tenant: "acme" })).map((r) => r.key)).toEqual(["k0", "k1", "k2", "k3", "k4"]);
      expect((await ledger.calls.list({ tenant: "acme", tool: "send_email" })).map((r) => r.key)).toEqual(["k1", "k3"]);
      expect((await ledger.calls.list({ state: "completed" })).map((r) => r.key)).toEqual(["k0"]);
      expect(await ledger.calls.list({ tenant: "acme", limit: 2 })).toHaveLength(2);
      expect((await ledger.calls.list({ tenant: "globex" })).map((r) => r.key)).toEqual(["other-tenant"]);
      await ledger.calls.claim(claimRequest({ key: "k1", tenant: "globex" }));
      expect((await ledger.calls.list({ key: "k1" })).map((r) => r.tenant).sort()).toEqual(["acme", "globex"]);
    });

    test("every store lists in one order: oldest first, ties by tenant and key byte by byte", async () => {
      const pause = () => new Promise((resolve) => setTimeout(resolve, 3));
      for (const key of ["z-first", "a-second", "m-third"]) {
        await ledger.calls.claim(claimRequest({ key }));
        await pause();
      }
      expect((await ledger.calls.list({ tenant: "acme" })).map((r) => r.key)).toEqual(["z-first", "a-second", "m-third"]);
      // A burst in one millisecond (or a few) still comes back in the one order.
      await Promise.all(["é", "f", "E", "e"].map((key) => ledger.calls.claim(claimRequest({ key, tenant: key === "f" ? "acme" : "beta" }))));
      const all = await ledger.calls.list({});
      expect(all.map((r) => `${r.tenant}/${r.key}`)).toEqual([...all].sort(listOrder).map((r) => `${r.tenant}/${r.key}`));
    });

    test("list filters by task and by creation time, both bounds inclusive, together with the other filters", async () => {
      const pause = () => new Promise((resolve) => setTimeout(resolve, 3));
      const made: CallRecord[] = [];
      for (let i = 0; i < 3; i++) {
        made.push((await ledger.calls.claim(claimRequest({ key: `k${i}`, task: i === 1 ? "task-2" : "task-1" }))).record);
        await pause();
      }
      await ledger.calls.claim(claimRequest({ key: "k-globex", tenant: "globex", task: "task-2" }));
      const [k0, k1, k2] = made.map((r) => r.createdAt) as [number, number, number];
      expect(k0 < k1 && k1 < k2).toBe(true);
      const keys = async (query: ListQuery) => (await ledger.calls.list(query)).map((r) => r.key);
      expect(await keys({ task: "task-1" })).toEqual(["k0", "k2"]);
      expect(await keys({ task: "task-2" })).toEqual(["k1", "k-globex"]);
      expect(await keys({ task: "task-2", tenant: "acme" })).toEqual(["k1"]);
      expect(await keys({ tenant: "acme", createdFrom: k1 })).toEqual(["k1", "k2"]);
      expect(await keys({ tenant: "acme", createdTo: k1 })).toEqual(["k0", "k1"]);
      expect(await keys({ tenant: "acme", createdFrom: k1, createdTo: k1 })).toEqual(["k1"]);
      expect(await keys({ createdFrom: k2 + 60_000 })).toEqual([]);
      expect(await keys({ task: "task-1", createdFrom: k1, tool: "create_ticket", state: "in_progress" })).toEqual(["k2"]);
      expect(await keys({ task: "task-1", tool: "send_email" })).toEqual([]);
    });

    test("keyset paging: pages `after` the last record of the one before walk every match once, in the list order", async () => {
      // More records than a page, some made in one burst (one millisecond, or a few): ties fall to tenant and key, byte by byte.
      for (let i = 0; i < 9; i++) await ledger.calls.claim(claimRequest({ key: `k${i}`, tool: i % 3 === 0 ? "send_email" : "create_ticket" }));
      await Promise.all(["é", "f", "E", "e", "k9"].map((key, i) => ledger.calls.claim(claimRequest({ key, tenant: i % 2 ? "acme" : "beta", tool: "send_email" }))));
      const walk = async (query: ListQuery, pageSize: number) => {
        const seen: string[] = [];
        let after: ListCursor | undefined;
        for (let pages = 0; pages < 100; pages++) {
          const page = await ledger.calls.list({ ...query, ...(after ? { after } : {}), limit: pageSize });
          expect(page.length).toBeLessThanOrEqual(pageSize);
          seen.push(...page.map((r) => `${r.tenant}/${r.key}`));
          const last = page[page.length - 1];
          if (page.length < pageSize || !last) return seen;
          after = listCursorOf(last);
        }
        throw new Error("paging never ended");
      };
      const whole = async (query: ListQuery) => (await ledger.calls.list({ ...query, limit: 1000 })).map((r) => `${r.tenant}/${r.key}`);
      const all = await whole({});
      expect(all).toHaveLength(14);
      expect(all).toEqual([...(await ledger.calls.list({ limit: 1000 }))].sort(listOrder).map((r) => `${r.tenant}/${r.key}`));
      for (const size of [1, 2, 4, 13, 14, 15]) expect(await walk({}, size), `pages of ${size}`).toEqual(all);
      expect(await walk({ tool: "send_email" }, 2)).toEqual(await whole({ tool: "send_email" }));
      expect(await walk({ tenant: "beta" }, 1)).toEqual(all.filter((id) => id.startsWith("beta/")));
      expect(await walk({ tenant: "beta" }, 1)).toHaveLength(3);
      // A cursor is a place in the order, not a record: one at a record's time with an empty tenant lists that record too.
      const third = (await ledger.calls.list({ limit: 3 }))[2]!;
      expect((await ledger.calls.list({ after: { createdAt: third.createdAt, tenant: "", key: "" }, limit: 1 }))[0]?.createdAt).toBe(third.createdAt);
      expect(await ledger.calls.list({ after: { createdAt: Number.MAX_SAFE_INTEGER, tenant: "", key: "" } })).toEqual([]);
    });

    test("a page is stable while records arrive: paging on repeats none and misses none of the records there before", async () => {
      for (let i = 0; i < 5; i++) await ledger.calls.claim(claimRequest({ key: `old${i}` }));
      const first = await ledger.calls.list({ tenant: "acme", limit: 2 });
      // Made later (keys that sort first, in case an order by key slipped in): they come after every page listed before them.
      await new Promise((resolve) => setTimeout(resolve, 3));
      for (let i = 0; i < 3; i++) await ledger.calls.claim(claimRequest({ key: `a-new${i}` }));
      // Records changing meanwhile keep their place: the order is by creation.
      await ledger.calls.update("acme", "old0", 1, { state: "completed", result: 0, owner: null });
      await ledger.calls.update("acme", "old3", 1, { state: "completed", result: 3, owner: null });
      const rest = await ledger.calls.list({ tenant: "acme", after: listCursorOf(first[first.length - 1]!), limit: 1000 });
      const keys = [...first, ...rest].map((r) => r.key);
      expect(new Set(keys).size).toBe(keys.length);
      expect(keys).toEqual(["old0", "old1", "old2", "old3", "old4", "a-new0", "a-new1", "a-new2"]);
      // The first page read again is the same page: the new records came after it.
      expect((await ledger.calls.list({ tenant: "acme", limit: 2 })).map((r) => r.key)).toEqual(["old0", "old1"]);
    });

    test("filter values are data: \"__proto__\", SQL and LIKE syntax, and very long strings match only themselves", async () => {
      await ledger.calls.claim(claimRequest({ tenant: "__proto__", key: "constructor", task: "__proto__" }));
      await ledger.calls.claim(claimRequest({ key: "k%_", tool: "x' OR '1'='1" }));
      const keys = async (query: ListQuery) => (await ledger.calls.list(query)).map((r) => `${r.tenant}/${r.key}`);
      expect(await keys({ tenant: "__proto__" })).toEqual(["__proto__/constructor"]);
      expect(await keys({ task: "__proto__" })).toEqual(["__proto__/constructor"]);
      expect(await keys({ key: "constructor" })).toEqual(["__proto__/constructor"]);
      expect(await keys({ tool: "x' OR '1'='1" })).toEqual(["acme/k%_"]);
      expect(await keys({ tool: "' OR '1'='1' --" })).toEqual([]);
      expect(await keys({ key: "k%" })).toEqual([]);
      expect(await keys({ key: "%" })).toEqual([]);
      expect(await keys({ tenant: "x".repeat(100_000) })).toEqual([]);
      expect(await keys({ after: { createdAt: 0, tenant: "__proto__", key: "y".repeat(100_000) }, tenant: "__proto__" })).toEqual(["__proto__/constructor"]);
    });

    /** A new call of `tenant` moved from its claim to `state` along the state table. */
    const callIn = async (tenant: string, key: string, effect: EffectClass, state: CallState) => {
      await ledger.calls.claim(claimRequest({ tenant, key, toolUseId: key, effect }));
      const path: Record<CallState, CallState[]> = {
        in_progress: [], completed: ["completed"], failed: ["failed"], uncertain: ["uncertain"], needs_human: ["needs_human"],
        compensated: ["completed", "compensated"], compensation_failed: ["completed", "compensation_failed"],
      };
      let version = 1;
      for (const to of path[state]) {
        if (!(await ledger.calls.update(tenant, key, version++, { state: to, owner: null }))) throw new Error(`${tenant}/${key} did not move to ${to}`);
      }
    };
    /** The counts in one order, so two answers compare whatever order a store gives its rows in. */
    const byPair = (a: CallCount, b: CallCount) => (a.state < b.state ? -1 : a.state > b.state ? 1 : a.effect < b.effect ? -1 : a.effect > b.effect ? 1 : 0);
    const counted = async (query?: CallCountQuery) =>
      (await ledger.calls.countByStateAndEffect(query)).map((c) => ({ ...c })).sort(byPair);
    const rows = (...counts: [CallState, EffectClass, number][]): CallCount[] =>
      counts.map(([state, effect, count]) => ({ state, effect, count })).sort(byPair);

    test("countByStateAndEffect counts every call exactly, by state and effect class; with a tenant, that tenant's alone (\"__proto__\" too)", async () => {
      const made: [string, EffectClass, CallState, number][] = [
        ["acme", "write", "completed", 3], ["acme", "read", "completed", 1], ["acme", "destructive", "needs_human", 2],
        ["acme", "write", "in_progress", 1], ["acme", "write", "compensation_failed", 1],
        ["globex", "write", "completed", 2], ["globex", "destructive", "failed", 1], ["globex", "read", "uncertain", 1], ["globex", "write", "compensated", 1],
        ["__proto__", "write", "completed", 1], ["__proto__", "read", "needs_human", 1],
      ];
      for (const [tenant, effect, state, n] of made) {
        for (let i = 0; i < n; i++) await callIn(tenant, `${state}-${effect}-${i}`, effect, state);
      }
      expect(await counted()).toEqual(rows(
        ["completed", "write", 6], ["completed", "read", 1], ["needs_human", "destructive", 2], ["needs_human", "read", 1],
        ["in_progress", "write", 1], ["compensation_failed", "write", 1], ["failed", "destructive", 1], ["uncertain", "read", 1], ["compensated", "write", 1],
      ));
      expect(await counted({ tenant: "acme" })).toEqual(rows(
        ["completed", "write", 3], ["completed", "read", 1], ["needs_human", "destructive", 2], ["in_progress", "write", 1], ["compensation_failed", "write", 1],
      ));
      expect(await counted({ tenant: "globex" })).toEqual(rows(["completed", "write", 2], ["failed", "destructive", 1], ["uncertain", "read", 1], ["compensated", "write", 1]));
      expect(await counted({ tenant: "__proto__" })).toEqual(rows(["completed", "write", 1], ["needs_human", "read", 1]));
      expect(await counted({ tenant: "initech" })).toEqual([]);
      expect(await counted({ tenant: "' OR '1'='1" })).toEqual([]);
      // The counts add up to the records there are.
      const total = (await counted()).reduce((sum, c) => sum + c.count, 0);
      expect(total).toBe((await ledger.calls.list({ limit: 1000 })).length);
      expect(total).toBe(15);
    });

    test("countByStateAndEffect: an empty ledger counts nothing, and the counts follow every state move and removal", async () => {
      expect(await counted()).toEqual([]);
      expect(await counted({ tenant: "acme" })).toEqual([]);
      await ledger.calls.claim(claimRequest({ key: "a", effect: "destructive" }));
      await ledger.calls.claim(claimRequest({ key: "b", effect: "destructive" }));
      await ledger.calls.claim(claimRequest({ key: "c", tenant: "globex", effect: "read" }));
      expect(await counted()).toEqual(rows(["in_progress", "destructive", 2], ["in_progress", "read", 1]));
      await ledger.calls.update("acme", "a", 1, { state: "needs_human", owner: null });
      expect(await counted({ tenant: "acme" })).toEqual(rows(["in_progress", "destructive", 1], ["needs_human", "destructive", 1]));
      await ledger.calls.update("acme", "a", 2, { state: "completed", result: { settled: true } });
      await ledger.calls.update("acme", "b", 1, { state: "completed", result: null, owner: null });
      expect(await counted({ tenant: "acme" })).toEqual(rows(["completed", "destructive", 2]));
      // A stale write moves nothing, so it counts nothing.
      expect(await ledger.calls.update("acme", "b", 1, { state: "completed", result: null, owner: null })).toBeUndefined();
      await ledger.calls.update("acme", "b", 2, { state: "compensated" });
      expect(await counted()).toEqual(rows(["completed", "destructive", 1], ["compensated", "destructive", 1], ["in_progress", "read", 1]));
      const c = (await ledger.calls.get("globex", "c"))!;
      expect(await ledger.calls.remove("globex", "c", c.version, c.claimToken)).toBe(true);
      expect(await counted({ tenant: "globex" })).toEqual([]);
      expect(await counted()).toEqual(rows(["completed", "destructive", 1], ["compensated", "destructive", 1]));
    });

    // A store may compute the record a write returns from what it wrote instead of reading the row back: it must be the row.
    test("every record update and takeOver return is the record as stored: get() right after reads the same, a renewed lease included", async () => {
      const get = () => ledger.calls.get("acme", "toolu_1");
      const { record } = await ledger.calls.claim(claimRequest({ leaseMs: 60_000 }));
      expect(await get()).toStrictEqual(record);
      // A renewal changes the lease without a new version: the next record written must show it.
      expect(await ledger.calls.renewLease("acme", "toolu_1", 1, "worker-a", 120_000)).toBe(true);
      const probing = await ledger.calls.update("acme", "toolu_1", 1, { state: "uncertain", error: "timed out, probing" });
      expect(probing).toStrictEqual(await get());
      expect(probing?.leaseExpiresAt).toBeGreaterThanOrEqual(record.createdAt + 120_000);
      const rerun = await ledger.calls.update("acme", "toolu_1", 2, { state: "in_progress", countAttempt: true, leaseMs: 30_000, error: null });
      expect(rerun).toStrictEqual(await get());
      const released = await ledger.calls.update("acme", "toolu_1", 3, { state: "uncertain", owner: null, sendEnded: true, error: "no answer" });
      expect(released).toStrictEqual(await get());
      const taken = await ledger.calls.takeOver({ tenant: "acme", key: "toolu_1", version: 4, owner: "worker-b", leaseMs: 60_000 });
      expect(taken).toStrictEqual(await get());
      expect(await ledger.calls.renewLease("acme", "toolu_1", 5, "worker-b", 90_000)).toBe(true);
      const takenFromLive = await ledger.calls.takeOver({ tenant: "acme", key: "toolu_1", version: 5, owner: "worker-c", leaseMs: 60_000, holderIsDead: true, fence: 9 });
      expect(takenFromLive).toStrictEqual(await get());
      expect(takenFromLive).toMatchObject({ owner: "worker-c", fence: 9, version: 6 });
      const result = { ticket: "T-1", text: "línea ☃", list: [1, null, { deep: true }] };
      const done = await ledger.calls.update("acme", "toolu_1", 6, { state: "completed", result, owner: null });
      expect(done).toStrictEqual(await get());
      expect(done).toMatchObject({ state: "completed", result, owner: null, leaseExpiresAt: null, version: 7 });
      const undone = await ledger.calls.update("acme", "toolu_1", 7, { state: "compensated", error: "refunded" });
      expect(undone).toStrictEqual(await get());
      // A take-over of a lease that ran out moves startedAt up to that lease's end.
      await ledger.calls.claim(claimRequest({ key: "expired", leaseMs: -1 }));
      const late = await ledger.calls.takeOver({ tenant: "acme", key: "expired", version: 1, owner: "worker-b", leaseMs: 1000 });
      expect(late).toStrictEqual(await ledger.calls.get("acme", "expired"));
    });

    test("a record removed and claimed again is written as the new claim, even at the version the old one had", async () => {
      const first = (await ledger.calls.claim(claimRequest())).record;
      expect(await ledger.calls.remove("acme", "toolu_1", 1, first.claimToken)).toBe(true);
      const second = (await ledger.calls.claim(claimRequest({ owner: "worker-b", input: { title: "second" }, fingerprint: "fp-2" }))).record;
      const done = await ledger.calls.update("acme", "toolu_1", 1, { state: "completed", result: { n: 2 }, owner: null });
      expect(done).toStrictEqual(await ledger.calls.get("acme", "toolu_1"));
      expect(done).toMatchObject({ claimToken: second.claimToken, input: { title: "second" }, fingerprint: "fp-2", result: { n: 2 } });
      await ledger.calls.claim(claimRequest({ key: "again", leaseMs: -1 }));
      const gone = (await ledger.calls.get("acme", "again"))!;
      expect(await ledger.calls.remove("acme", "again", 1, gone.claimToken)).toBe(true);
      const third = (await ledger.calls.claim(claimRequest({ key: "again", owner: "worker-c", leaseMs: -1 }))).record;
      const taken = await ledger.calls.takeOver({ tenant: "acme", key: "again", version: 1, owner: "worker-d", leaseMs: 1000 });
      expect(taken).toStrictEqual(await ledger.calls.get("acme", "again"));
      expect(taken?.claimToken).toBe(third.claimToken);
    });

    test("records a write returns are copies: changing one changes neither the store nor the next record written", async () => {
      await ledger.calls.claim(claimRequest());
      const probing = await ledger.calls.update("acme", "toolu_1", 1, { state: "uncertain", error: "timed out", result: { partial: [1] } });
      (probing!.input as Record<string, unknown>).title = "tampered";
      ((probing!.result as Record<string, unknown[]>).partial as unknown[]).push(2);
      const done = await ledger.calls.update("acme", "toolu_1", 2, { state: "completed", owner: null });
      expect(done).toMatchObject({ input: { title: "printer on fire" }, result: { partial: [1] } });
      expect(await ledger.calls.get("acme", "toolu_1")).toStrictEqual(done);
    });

    test("records returned are copies: changing one does not change the store", async () => {
      const { record } = await ledger.calls.claim(claimRequest());
      (record.input as Record<string, unknown>).title = "tampered";
      expect((await ledger.calls.get("acme", "toolu_1"))?.input).toEqual({ title: "printer on fire" });
    });

    // Writes asked for at the same moment may share one commit (group commit): each still stands or fails alone.
    test("concurrent writes stand alone: a stale compare-and-set among them changes nothing and fails no other", async () => {
      const keys = Array.from({ length: 8 }, (_, i) => `toolu_b${i}`);
      for (const key of keys) await ledger.calls.claim(claimRequest({ key, toolUseId: key }));
      // All asked for before any is awaited: in a store with group commit they share a batch.
      const staleWrite = ledger.calls.update("acme", "toolu_b0", 7, { state: "completed", result: { stale: true }, owner: null });
      const writes = keys.slice(1).map((key, i) => ledger.calls.update("acme", key, 1, { state: "completed", result: { n: i + 1 }, owner: null }));
      const twinClaim = ledger.calls.claim(claimRequest({ key: "toolu_b1", owner: "worker-b", fingerprint: "fp-twin" }));
      const freshClaim = ledger.calls.claim(claimRequest({ key: "toolu_new", toolUseId: "toolu_new" }));
      expect(await staleWrite).toBeUndefined();
      expect((await Promise.all(writes)).map((r) => r?.state)).toEqual(keys.slice(1).map(() => "completed"));
      expect((await twinClaim).claimed).toBe(false);
      expect((await freshClaim).claimed).toBe(true);
      expect(await ledger.calls.get("acme", "toolu_b0")).toMatchObject({ state: "in_progress", version: 1, result: null });
      for (const [i, key] of keys.slice(1).entries()) {
        expect(await ledger.calls.get("acme", key)).toMatchObject({ state: "completed", version: 2, result: { n: i + 1 } });
      }
      expect(await ledger.calls.get("acme", "toolu_new")).toMatchObject({ state: "in_progress", version: 1 });
    });

    test("concurrent writes stand alone: a forbidden move among them is refused and the others are written", async () => {
      await ledger.calls.claim(claimRequest({ key: "toolu_done" }));
      await ledger.calls.update("acme", "toolu_done", 1, { state: "failed", error: "refused downstream", owner: null });
      await ledger.calls.claim(claimRequest({ key: "toolu_ok" }));
      const [forbidden, written, claimed] = await Promise.allSettled([
        ledger.calls.update("acme", "toolu_done", 2, { state: "completed", result: { late: true } }),
        ledger.calls.update("acme", "toolu_ok", 1, { state: "completed", result: { ok: true }, owner: null }),
        ledger.calls.claim(claimRequest({ key: "toolu_later" })),
      ]);
      expect(forbidden.status).toBe("rejected");
      expect(written).toMatchObject({ status: "fulfilled", value: { state: "completed", result: { ok: true } } });
      expect(claimed).toMatchObject({ status: "fulfilled", value: { claimed: true } });
      expect(await ledger.calls.get("acme", "toolu_done")).toMatchObject({ state: "failed", version: 2, result: null });
      expect(await ledger.calls.get("acme", "toolu_later")).toMatchObject({ state: "in_progress", version: 1 });
    });

    /** The three repeat methods (intent windows), which come together: a store without them cannot enforce ToolSpec.repeats. */
    const repeatMethods = () => {
      const calls = ledger.calls;
      if (!calls.findRepeat || !calls.claimUnlessRepeated || !calls.claimAnswered) {
        throw new Error(`${ledger.location}: the call store lacks findRepeat / claimUnlessRepeated / claimAnswered (skip the repeat cases by name if it cannot offer them)`);
      }
      return { find: calls.findRepeat.bind(calls), claim: calls.claimUnlessRepeated.bind(calls), answer: calls.claimAnswered.bind(calls) };
    };
    const HOUR = 3_600_000;
    const repeatOf = (key: string, windowMs = HOUR) => ({ tenant: "acme", task: "task-1", intent: "fp-1", key, windowMs });

    test("a repeat is the same tenant, task and intent under another key: unsettled at any age, completed only within the window", async () => {
      const { find } = repeatMethods();
      expect(await find(repeatOf("toolu_new"))).toBeUndefined();
      await ledger.calls.claim(claimRequest({ key: "toolu_1" }));
      expect(await find(repeatOf("toolu_new"))).toMatchObject({ key: "toolu_1", state: "in_progress" });
      // Never a repeat of itself; never across tenants, tasks or inputs.
      expect(await find(repeatOf("toolu_1"))).toBeUndefined();
      expect(await find({ ...repeatOf("toolu_new"), tenant: "globex" })).toBeUndefined();
      expect(await find({ ...repeatOf("toolu_new"), task: "task-2" })).toBeUndefined();
      expect(await find({ ...repeatOf("toolu_new"), intent: "fp-2" })).toBeUndefined();
      // Unsettled at any age: a window that ended an hour ago still finds it.
      expect(await find(repeatOf("toolu_new", -HOUR))).toMatchObject({ key: "toolu_1" });
      await ledger.calls.update("acme", "toolu_1", 1, { state: "needs_human", error: "unknown", owner: null });
      expect(await find(repeatOf("toolu_new", -HOUR))).toMatchObject({ key: "toolu_1", state: "needs_human" });
      await ledger.calls.update("acme", "toolu_1", 2, { state: "completed", result: { id: "T-1" } });
      // Completed: inside the window, not after it.
      expect(await find(repeatOf("toolu_new"))).toMatchObject({ key: "toolu_1", state: "completed", result: { id: "T-1" } });
      expect(await find(repeatOf("toolu_new", -HOUR))).toBeUndefined();
      // A failed call is no repeat (nothing happened); a compensated one neither (it was undone).
      await ledger.calls.claim(claimRequest({ key: "toolu_f", fingerprint: "fp-f" }));
      await ledger.calls.update("acme", "toolu_f", 1, { state: "failed", error: "declined", owner: null });
      expect(await find({ ...repeatOf("toolu_new"), intent: "fp-f" })).toBeUndefined();
      await ledger.calls.update("acme", "toolu_1", 3, { state: "compensated" });
      expect(await find(repeatOf("toolu_new"))).toBeUndefined();
    });

    test("the intent decides a repeat, not the fingerprint of what was sent; a claim without one has its fingerprint as intent", async () => {
      const { find, claim } = repeatMethods();
      // Two inputs as sent (fingerprints differ: one spelt out a default), one input as the tool runs it (the intent).
      const first = await ledger.calls.claim(claimRequest({ key: "toolu_1", fingerprint: "fp-sent-1", intent: "intent-1" }));
      expect(first.record).toMatchObject({ fingerprint: "fp-sent-1", intent: "intent-1" });
      expect(await ledger.calls.get("acme", "toolu_1")).toMatchObject({ fingerprint: "fp-sent-1", intent: "intent-1" });
      expect(await find({ ...repeatOf("toolu_new"), intent: "intent-1" })).toMatchObject({ key: "toolu_1" });
      expect(await find({ ...repeatOf("toolu_new"), intent: "fp-sent-1" })).toBeUndefined();
      expect(await claim(claimRequest({ key: "toolu_2", toolUseId: "toolu_2", fingerprint: "fp-sent-2", intent: "intent-1" }), HOUR))
        .toMatchObject({ claimed: false, repeats: { key: "toolu_1" } });
      expect(await claim(claimRequest({ key: "toolu_3", toolUseId: "toolu_3", fingerprint: "fp-sent-1", intent: "intent-3" }), HOUR)).toMatchObject({ claimed: true });
      const plain = await ledger.calls.claim(claimRequest({ key: "toolu_4", task: "task-2", fingerprint: "fp-plain" }));
      expect(plain.record.intent).toBe("fp-plain");
    });

    test("the earliest repeated call is the one named", async () => {
      const { find } = repeatMethods();
      await ledger.calls.claim(claimRequest({ key: "toolu_first" }));
      await ledger.calls.claim(claimRequest({ key: "toolu_second" }));
      const [first] = await ledger.calls.list({ limit: 1 });
      expect(await find(repeatOf("toolu_third"))).toMatchObject({ key: first?.key });
    });

    test("a claim unless repeated claims a new call, answers a known key with its record, and writes nothing for a repeat", async () => {
      const { claim } = repeatMethods();
      expect(await claim(claimRequest({ key: "toolu_1" }), HOUR)).toMatchObject({ claimed: true, record: { key: "toolu_1", state: "in_progress", attempts: 1 } });
      expect(await claim(claimRequest({ key: "toolu_1", owner: "worker-b" }), HOUR)).toMatchObject({ claimed: false, record: { key: "toolu_1", owner: "worker-a" } });
      const repeated = await claim(claimRequest({ key: "toolu_2", toolUseId: "toolu_2", owner: "worker-b" }), HOUR);
      expect(repeated).toMatchObject({ claimed: false, repeats: { key: "toolu_1", toolUseId: "toolu_1" } });
      expect(await ledger.calls.get("acme", "toolu_2")).toBeUndefined();
      // Another input, task or tenant is no repeat.
      expect(await claim(claimRequest({ key: "toolu_3", fingerprint: "fp-3" }), HOUR)).toMatchObject({ claimed: true });
      expect(await claim(claimRequest({ key: "toolu_4", task: "task-2" }), HOUR)).toMatchObject({ claimed: true });
      // Once the first failed (nothing happened), the same input may be claimed again.
      await ledger.calls.update("acme", "toolu_1", 1, { state: "failed", error: "declined", owner: null });
      expect(await claim(claimRequest({ key: "toolu_2" }), HOUR)).toMatchObject({ claimed: true, record: { key: "toolu_2" } });
    });

    test("of many claims of one input under different keys at once, exactly one is claimed and every other is told the call it repeats", async () => {
      const { claim } = repeatMethods();
      const results = await Promise.all(Array.from({ length: 12 }, (_, i) =>
        claim(claimRequest({ key: `toolu_race_${i}`, toolUseId: `toolu_race_${i}`, owner: `worker-${i}` }), HOUR)));
      const claimed = results.filter((r) => r.claimed);
      expect(claimed).toHaveLength(1);
      const winner = claimed[0]?.record.key;
      for (const r of results.filter((x) => !x.claimed)) expect(r).toMatchObject({ repeats: { key: winner } });
      expect((await ledger.calls.list({})).map((r) => r.key)).toEqual([winner]);
    });

    test("a call answered without running its tool is recorded settled, held by nobody, with no attempt, and never replaces a record", async () => {
      const { answer, find } = repeatMethods();
      const refused = await answer(claimRequest({ key: "toolu_r" }), { state: "failed", result: null, error: "EG_REPEATED_CALL: repeats toolu_0" });
      expect(refused).toMatchObject({ claimed: true, record: { key: "toolu_r", state: "failed", error: "EG_REPEATED_CALL: repeats toolu_0", owner: null, leaseExpiresAt: null, attempts: 0, version: 1 } });
      const collapsed = await answer(claimRequest({ key: "toolu_c", fingerprint: "fp-c" }), { state: "completed", result: { id: "T-9", n: 12345678901234567890 }, error: null });
      expect(collapsed).toMatchObject({ claimed: true, record: { state: "completed", result: { id: "T-9" }, attempts: 0 } });
      expect(await ledger.calls.get("acme", "toolu_c")).toEqual(collapsed.record);
      // A known key: nothing changes, whatever the answer says.
      await ledger.calls.claim(claimRequest({ key: "toolu_live", fingerprint: "fp-live" }));
      expect(await answer(claimRequest({ key: "toolu_live" }), { state: "completed", result: { forged: true }, error: null }))
        .toMatchObject({ claimed: false, record: { key: "toolu_live", state: "in_progress", result: null, version: 1 } });
      // A collapsed answer is itself a completed call: a third call with that input repeats the first completed one.
      expect(await find({ ...repeatOf("toolu_d"), intent: "fp-c" })).toMatchObject({ key: "toolu_c" });
    });

    test("an input with a \"__proto__\" key reads back as data, in the same JSON", async () => {
      const input = JSON.parse('{"__proto__": {"admin": true}, "list": [1, {"deep": null}], "s": "é"}') as Record<string, unknown>;
      await ledger.calls.claim(claimRequest({ input: input as never }));
      const read = await ledger.calls.get("acme", "toolu_1");
      expect(JSON.stringify(read?.input)).toBe(JSON.stringify(input));
      expect(Object.getPrototypeOf(read?.input)).toBe(Object.prototype);
      expect((read?.input as { admin?: unknown }).admin).toBeUndefined();
    });

    test("checkpoints are stored per tenant and replaced whole", async () => {
      expect(await ledger.checkpoints.get("acme", "task-1")).toBeUndefined();
      await ledger.checkpoints.put("acme", "task-1", '{"v":1}');
      await ledger.checkpoints.put("acme", "task-1", '{"v":2}');
      expect(await ledger.checkpoints.get("acme", "task-1")).toBe('{"v":2}');
      expect(await ledger.checkpoints.get("globex", "task-1")).toBeUndefined();
    });
  },
};
