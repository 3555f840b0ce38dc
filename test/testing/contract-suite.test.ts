/**
 * contractSuite's own promises: a skip naming no test throws at collection, naming it; a suite for
 * a store the bundle lacks is one skipped test with the reason, never silently absent. Registered
 * through a recording stand-in for vitest, so these tests run no contract test themselves.
 */
import { describe, expect, it } from "vitest";
import type { Stores } from "../../src/contracts/stores.js";
import { memoryLedger } from "../../src/stores/memory/index.js";
import { contractSuite, type TestApi } from "../../src/testing/contract-suite.js";

interface Registered {
  readonly path: string;
  readonly skipped: boolean;
}

/** A stand-in for vitest that records what is registered, running each describe's body in turn. */
function recorder(): { vitest: TestApi; collect: () => Promise<Registered[]> } {
  const registered: Registered[] = [];
  const queue: { path: string[]; body: () => unknown }[] = [];
  let path: string[] = [];
  const record = (skipped: boolean) => (name: string) => {
    registered.push({ path: [...path, name].join(" > "), skipped });
  };
  const fake = {
    describe: (name: string, body: () => unknown) => queue.push({ path: [...path, name], body }),
    it: Object.assign(record(false), { skip: record(true) }),
    expect,
    beforeEach: () => undefined,
    afterEach: () => undefined,
  };
  return {
    vitest: fake as unknown as TestApi,
    collect: async () => {
      for (let next = queue.shift(); next; next = queue.shift()) {
        const outer = path;
        path = next.path;
        await next.body();
        path = outer;
      }
      return registered;
    },
  };
}

describe("contractSuite", () => {
  it("throws at once, naming it, when skip names a test that does not exist", () => {
    const { vitest } = recorder();
    expect(() => contractSuite({
      vitest, name: "mine", open: () => memoryLedger(),
      skip: [{ reason: "not supported", tests: ["a first claim creates an in_progress record held by the claimant", "a first clam with a typo"] }],
    })).toThrow(/contractSuite\(mine\): skip names no contract test: "a first clam with a typo"/);
  });

  it("registers a bundle without sagas as one skipped saga suite saying why, and every other suite in full", async () => {
    const { vitest, collect } = recorder();
    const open = (): Stores => {
      const { sagas: _sagas, ...rest } = memoryLedger();
      return rest;
    };
    contractSuite({ vitest, name: "no-sagas", open });
    const registered = await collect();
    const sagaTests = registered.filter((t) => t.path.startsWith("SagaLog contract: no-sagas > "));
    expect(sagaTests).toEqual([{
      path: "SagaLog contract: no-sagas > the SagaLog contract (skipped: the no-sagas ledger has no `sagas` store)", skipped: true,
    }]);
    for (const suite of ["Ledger contract", "GovernanceStore contract", "Reconcile contract"]) {
      const tests = registered.filter((t) => t.path.startsWith(`${suite}: no-sagas > `));
      expect(tests.length, suite).toBeGreaterThan(5);
      expect(tests.every((t) => !t.skipped), suite).toBe(true);
    }
  });

  it("skips a named test with its reason, and only that one", async () => {
    const { vitest, collect } = recorder();
    contractSuite({
      vitest, name: "mine", open: () => memoryLedger(),
      skip: [{ reason: "one writer only", tests: ["of many concurrent claims for one key exactly one wins"] }],
    });
    const skipped = (await collect()).filter((t) => t.skipped);
    expect(skipped.map((t) => t.path)).toEqual([
      "Ledger contract: mine > of many concurrent claims for one key exactly one wins (skipped: one writer only)",
    ]);
  });
});
