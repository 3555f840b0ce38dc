/**
 * The SagaLog contract: every store runs exactly these tests against its `ledger.sagas`. A store
 * that cannot support a case skips it by name with a reason (`contractSuite`'s `skip`), never
 * silently.
 */
import type { Stores } from "../../contracts/stores.js";
import type { BeginSaga, NewStep, SagaLog } from "../../contracts/sagas.js";
import type { ContractSuiteDefinition } from "./suite.js";

export function beginRequest(overrides: Partial<BeginSaga> = {}): BeginSaga {
  return { tenant: "acme", id: "order-1", task: "task-1", owner: "worker-a", leaseMs: 60_000, onAbandon: "hold", ...overrides };
}

export function stepRequest(overrides: Partial<NewStep> = {}): NewStep {
  return {
    tenant: "acme", sagaId: "order-1", name: "charge", tool: "charge_card", effect: "write", key: "saga:order-1:charge",
    input: { amount: 40 }, inputRedacted: false, fingerprint: "fp-charge", compensable: true,
    compensation: { kind: "tool", tool: "refund", input: null }, approval: "not_needed", state: "pending",
    ...overrides,
  };
}

const started = { kind: "saga_started", message: "started" } as const;

export const sagasSuite: ContractSuiteDefinition = {
  title: "SagaLog contract",
  needs: "sagas",
  register({ store, expect, opened, test }) {
    let ledger!: Stores;
    let log!: SagaLog;
    opened((opening) => {
      ledger = opening;
      if (!ledger.sagas) throw new Error(`${store} has no saga log`);
      log = ledger.sagas;
    });

    test("begin creates a running saga held by the caller, once", async () => {
      const before = await ledger.calls.now();
      const first = await log.begin(beginRequest(), started);
      expect(first.created).toBe(true);
      expect(first.saga).toMatchObject({
        tenant: "acme", id: "order-1", task: "task-1", state: "running", onAbandon: "hold", owner: "worker-a",
        reason: null, resolution: null, version: 1,
      });
      expect(first.saga.leaseExpiresAt).toBeGreaterThanOrEqual(before + 60_000);
      const second = await log.begin(beginRequest({ owner: "worker-b", task: "other", onAbandon: "compensate" }), started);
      expect(second.created).toBe(false);
      expect(second.saga).toMatchObject({ owner: "worker-a", task: "task-1", onAbandon: "hold", version: 1 });
      expect(await log.history("acme", "order-1")).toHaveLength(1);
    });

    test("of many concurrent begins exactly one creates the saga", async () => {
      const results = await Promise.all(Array.from({ length: 20 }, (_, i) => log.begin(beginRequest({ owner: `w-${i}` }), started)));
      expect(results.filter((r) => r.created)).toHaveLength(1);
      expect(new Set(results.map((r) => r.saga.owner)).size).toBe(1);
    });

    test("sagas are scoped by tenant", async () => {
      await log.begin(beginRequest({ tenant: "acme" }), started);
      expect((await log.begin(beginRequest({ tenant: "globex" }), started)).created).toBe(true);
      await log.update("acme", "order-1", 1, { state: "completed" });
      expect((await log.get("globex", "order-1"))?.state).toBe("running");
      expect(await log.get("initech", "order-1")).toBeUndefined();
      expect(await log.steps("initech", "order-1")).toEqual([]);
      expect(await log.history("initech", "order-1")).toEqual([]);
    });

    test("update is compare-and-set on version, bumps it, and appends its event only when it writes", async () => {
      await log.begin(beginRequest(), started);
      const moved = await log.update("acme", "order-1", 1, { state: "compensating", reason: "step ship failed", owner: "worker-b", leaseMs: 5_000 },
        { kind: "compensation_started", message: "compensating" });
      expect(moved).toMatchObject({ state: "compensating", reason: "step ship failed", owner: "worker-b", version: 2 });
      const stale = await log.update("acme", "order-1", 1, { state: "completed" }, { kind: "saga_completed", message: "never" });
      expect(stale).toBeUndefined();
      expect(await log.get("acme", "order-1")).toMatchObject({ state: "compensating", version: 2 });
      expect((await log.history("acme", "order-1")).map((e) => e.kind)).toEqual(["saga_started", "compensation_started"]);
      expect(await log.update("acme", "nope", 1, { state: "completed" })).toBeUndefined();
    });

    test("releasing the owner clears the lease", async () => {
      await log.begin(beginRequest(), started);
      const released = await log.update("acme", "order-1", 1, { state: "stalled", owner: null });
      expect(released).toMatchObject({ owner: null, leaseExpiresAt: null, state: "stalled" });
    });

    test("an illegal saga move is refused naming both states, and changes nothing", async () => {
      await log.begin(beginRequest(), started);
      await log.update("acme", "order-1", 1, { state: "compensating" });
      await log.update("acme", "order-1", 2, { state: "compensated", owner: null });
      await expect(log.update("acme", "order-1", 3, { state: "running" }, { kind: "driver_resumed", message: "x" }))
        .rejects.toThrow(/EG_ILLEGAL_TRANSITION: saga order-1 cannot move from compensated to running/);
      expect(await log.get("acme", "order-1")).toMatchObject({ state: "compensated", version: 3 });
      expect((await log.history("acme", "order-1")).map((e) => e.kind)).toEqual(["saga_started"]);
    });

    test("renewLease extends only the current owner's lease on a running or compensating saga", async () => {
      await log.begin(beginRequest({ leaseMs: 1_000 }), started);
      const now = await ledger.calls.now();
      expect(await log.renewLease("acme", "order-1", "worker-a", 60_000)).toBe(true);
      const renewed = await log.get("acme", "order-1");
      expect(renewed?.leaseExpiresAt).toBeGreaterThanOrEqual(now + 60_000);
      expect(renewed?.version).toBe(1);
      expect(await log.renewLease("acme", "order-1", "worker-b", 60_000)).toBe(false);
      await log.update("acme", "order-1", 1, { state: "completed" });
      expect(await log.renewLease("acme", "order-1", "worker-a", 60_000)).toBe(false);
    });

    test("addStep inserts steps in position order, once per name", async () => {
      await log.begin(beginRequest(), started);
      const a = await log.addStep(stepRequest({ name: "reserve", key: "k-reserve" }), { kind: "step_started", step: "reserve", message: "reserving" });
      const b = await log.addStep(stepRequest({ name: "charge" }));
      expect(a).toMatchObject({ outcome: "added", step: { name: "reserve", position: 0, state: "pending", version: 1, result: null, compensationKey: null } });
      expect(b).toMatchObject({ outcome: "added", step: { name: "charge", position: 1 } });
      const again = await log.addStep(stepRequest({ name: "reserve", key: "other", fingerprint: "fp-other" }));
      expect(again).toMatchObject({ outcome: "exists", step: { name: "reserve", key: "k-reserve", position: 0 } });
      expect((await log.steps("acme", "order-1")).map((s) => s.name)).toEqual(["reserve", "charge"]);
      expect(await log.getStep("acme", "order-1", "charge")).toMatchObject({
        tool: "charge_card", effect: "write", input: { amount: 40 }, inputRedacted: false, fingerprint: "fp-charge",
        compensable: true, compensation: { kind: "tool", tool: "refund", input: null }, approval: "not_needed",
      });
      expect((await log.history("acme", "order-1")).map((e) => [e.seq, e.kind, e.step])).toEqual([[1, "saga_started", null], [2, "step_started", "reserve"]]);
    });

    test("of concurrent addSteps of one name exactly one adds it; of different names each gets its own position", async () => {
      await log.begin(beginRequest(), started);
      const same = await Promise.all(Array.from({ length: 10 }, () => log.addStep(stepRequest())));
      expect(same.filter((r) => r.outcome === "added")).toHaveLength(1);
      const many = await Promise.all(Array.from({ length: 10 }, (_, i) => log.addStep(stepRequest({ name: `s${i}`, key: `k${i}` }))));
      expect(many.every((r) => r.outcome === "added")).toBe(true);
      const positions = (await log.steps("acme", "order-1")).map((s) => s.position);
      expect(positions).toEqual(Array.from({ length: 11 }, (_, i) => i));
    });

    test("addStep adds nothing once the saga is not running (or does not exist)", async () => {
      expect(await log.addStep(stepRequest())).toEqual({ outcome: "saga_not_running", saga: undefined });
      await log.begin(beginRequest(), started);
      await log.addStep(stepRequest({ name: "reserve" }));
      await log.update("acme", "order-1", 1, { state: "compensating" });
      const late = await log.addStep(stepRequest({ name: "ship" }), { kind: "step_started", step: "ship", message: "too late" });
      expect(late).toMatchObject({ outcome: "saga_not_running", saga: { state: "compensating" } });
      expect((await log.steps("acme", "order-1")).map((s) => s.name)).toEqual(["reserve"]);
      expect((await log.history("acme", "order-1")).map((e) => e.kind)).toEqual(["saga_started"]);
      // A step that exists is still returned (a re-driven step finds out where it stands).
      expect(await log.addStep(stepRequest({ name: "reserve" }))).toMatchObject({ outcome: "exists" });
    });

    test("a refused step is stored refused with its reason", async () => {
      await log.begin(beginRequest(), started);
      const r = await log.addStep(stepRequest({ name: "mail", compensable: false, compensation: null, approval: "refused", state: "refused", error: "not approved" }));
      expect(r).toMatchObject({ outcome: "added", step: { state: "refused", approval: "refused", compensable: false, compensation: null, error: "not approved" } });
    });

    test("updateStep is compare-and-set on the step's version and keeps results exactly", async () => {
      await log.begin(beginRequest(), started);
      await log.addStep(stepRequest());
      const result = { id: "ch_1", text: "línea\n\"q\" ☃", list: [1, null, { deep: true }], empty: "" };
      const done = await log.updateStep("acme", "order-1", "charge", 1, {
        state: "completed", result, compensation: { kind: "tool", tool: "refund", input: { charge: "ch_1" } },
      }, { kind: "step_completed", step: "charge", message: "charged", data: { id: "ch_1" } });
      expect(done).toMatchObject({ state: "completed", result, compensation: { kind: "tool", tool: "refund", input: { charge: "ch_1" } }, version: 2 });
      expect(await log.updateStep("acme", "order-1", "charge", 1, { state: "failed" })).toBeUndefined();
      expect(await log.getStep("acme", "order-1", "charge")).toMatchObject({ state: "completed", result, version: 2 });
      const events = await log.history("acme", "order-1");
      expect(events.at(-1)).toMatchObject({ kind: "step_completed", step: "charge", message: "charged", data: { id: "ch_1" }, seq: 2 });
      expect(await log.updateStep("acme", "order-1", "nope", 1, { state: "failed" })).toBeUndefined();
    });

    test("the step moves of a compensation, and an illegal step move refused naming both states", async () => {
      await log.begin(beginRequest(), started);
      await log.addStep(stepRequest());
      await log.updateStep("acme", "order-1", "charge", 1, { state: "completed", result: "ok" });
      const comp = await log.updateStep("acme", "order-1", "charge", 2, { state: "compensating", compensationKey: "saga:order-1:charge:compensate" });
      expect(comp).toMatchObject({ state: "compensating", compensationKey: "saga:order-1:charge:compensate" });
      await log.updateStep("acme", "order-1", "charge", 3, { state: "compensated" });
      await expect(log.updateStep("acme", "order-1", "charge", 4, { state: "completed" }))
        .rejects.toThrow(/EG_ILLEGAL_TRANSITION: step charge of saga order-1 cannot move from compensated to completed/);
      expect(await log.getStep("acme", "order-1", "charge")).toMatchObject({ state: "compensated", version: 4 });
    });

    test("history keeps every event in order with its data; appendEvent for an unknown saga writes nothing", async () => {
      await log.begin(beginRequest(), started);
      for (let i = 0; i < 5; i++) await log.appendEvent("acme", "order-1", { kind: "step_kept", step: `s${i}`, message: `m${i}`, data: { i } });
      const events = await log.history("acme", "order-1");
      expect(events.map((e) => e.seq)).toEqual([1, 2, 3, 4, 5, 6]);
      expect(events[3]).toMatchObject({ tenant: "acme", sagaId: "order-1", kind: "step_kept", step: "s2", message: "m2", data: { i: 2 } });
      expect(events[0]?.data).toBeNull();
      expect(await log.history("acme", "order-1", { limit: 2 })).toHaveLength(2);
      await log.appendEvent("acme", "ghost", { kind: "resolved", message: "nobody" });
      expect(await log.history("acme", "ghost")).toEqual([]);
    });

    test("list filters by tenant, state and id, oldest first, with a limit", async () => {
      await log.begin(beginRequest({ id: "a" }), started);
      await log.begin(beginRequest({ id: "b", tenant: "globex" }), started);
      await log.begin(beginRequest({ id: "c" }), started);
      await log.update("acme", "c", 1, { state: "completed" });
      expect((await log.list()).map((s) => s.id)).toEqual(["a", "b", "c"]);
      expect((await log.list({ tenant: "acme" })).map((s) => s.id)).toEqual(["a", "c"]);
      expect((await log.list({ state: "completed" })).map((s) => s.id)).toEqual(["c"]);
      expect((await log.list({ id: "b" })).map((s) => s.tenant)).toEqual(["globex"]);
      expect(await log.list({ limit: 2 })).toHaveLength(2);
    });

    test("listActive returns running and compensating sagas only", async () => {
      for (const id of ["run", "comp", "done", "stalled"]) await log.begin(beginRequest({ id }), started);
      await log.update("acme", "comp", 1, { state: "compensating" });
      await log.update("acme", "done", 1, { state: "completed" });
      await log.update("acme", "stalled", 1, { state: "stalled", owner: null });
      expect((await log.listActive()).map((s) => s.id).sort()).toEqual(["comp", "run"]);
      expect(await log.listActive({ limit: 1 })).toHaveLength(1);
    });

    test("returned records are copies: mutating one changes nothing stored", async () => {
      const { saga } = await log.begin(beginRequest(), started);
      (saga as { state: string }).state = "completed";
      await log.addStep(stepRequest({ input: { nested: { n: 1 } } }));
      const step = await log.getStep("acme", "order-1", "charge");
      ((step!.input as { nested: { n: number } }).nested).n = 99;
      expect((await log.get("acme", "order-1"))?.state).toBe("running");
      expect((await log.getStep("acme", "order-1", "charge"))?.input).toEqual({ nested: { n: 1 } });
    });
  },
};
