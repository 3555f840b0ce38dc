/**
 * The call store and checkpoints contract ("Ledger contract"): every store runs exactly these
 * tests, through its ledger's `calls` and `checkpoints`. A store that cannot support a case skips
 * it by name with a reason (`contractSuite`'s `skip`), never silently.
 */
import type { ClaimRequest } from "../../contracts/calls.js";
import { listOrder } from "../../contracts/call-rules.js";
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
