/**
 * The store contract suites, for a store of your own: the same tests the memory, SQLite and
 * PostgreSQL stores pass.
 *
 *   import * as vitest from "vitest";
 *   import { contractSuite } from "effectgate/testing";
 *
 *   contractSuite({ vitest, name: "dynamo", open: () => dynamoLedger({ table: freshTable() }) });
 *
 * The call store and checkpoints suite always runs; the saga, governance and reconcile suites run
 * when the bundle `open` returns has `sagas`, `governance`, `reconcile`. A suite for a store the
 * bundle lacks is one skipped test saying so, never silently absent. `open` is called before each
 * test (a fresh, empty ledger, closed after the test), and once while the tests are collected to
 * see which stores the bundle has (that one is closed at once, unused): it must work then too.
 *
 * A test your store cannot pass is skipped by name with the reason (`skip`); a name that is no
 * test's throws at once, so a typo cannot silently skip nothing.
 *
 * vitest is an optional peer dependency: this module only imports its types, you hand in yours.
 */
import type { Stores } from "../contracts/stores.js";
import { callsSuite } from "./contract-suites/calls.js";
import { governanceSuite } from "./contract-suites/governance.js";
import { reconcileSuite } from "./contract-suites/reconcile.js";
import { sagasSuite } from "./contract-suites/sagas.js";
import type { ContractSuiteDefinition, OptionalStore, SuiteTests, TestApi } from "./contract-suites/suite.js";

export type { OptionalStore, TestApi } from "./contract-suites/suite.js";

/** Tests a store cannot run, each named exactly, with why. */
export interface ContractSkip {
  readonly reason: string;
  readonly tests: readonly string[];
}

export interface ContractSuiteOptions {
  /** Your vitest: `import * as vitest from "vitest"`. */
  readonly vitest: TestApi;
  /** The store's name in the test titles, e.g. "sqlite". */
  readonly name: string;
  /** A fresh, empty ledger for one test (see above: it is also called once at collection). */
  readonly open: () => Stores | Promise<Stores>;
  readonly skip?: readonly ContractSkip[];
}

/** The suites, in the order they are registered. */
const SUITES: readonly ContractSuiteDefinition[] = [callsSuite, sagasSuite, governanceSuite, reconcileSuite];

/** Every contract test's name (unique across the suites, so a `skip` entry means one test). */
let allNames: ReadonlySet<string> | undefined;
function contractTestNames(): ReadonlySet<string> {
  if (allNames) return allNames;
  const names = new Set<string>();
  for (const suite of SUITES) {
    for (const test of namesOf(suite)) {
      if (names.has(test)) throw new Error(`effectgate: two contract tests are named "${test}"`);
      names.add(test);
    }
  }
  return (allNames = names);
}

function namesOf(suite: ContractSuiteDefinition): string[] {
  const names: string[] = [];
  suite.register({
    store: "(collecting names)",
    expect: undefined as unknown as TestApi["expect"],
    opened: () => undefined,
    test: (name) => {
      names.push(name);
    },
  });
  return names;
}

function reasonsByTest(name: string, skip: readonly ContractSkip[]): Map<string, string> {
  const known = contractTestNames();
  const reasons = new Map<string, string>();
  for (const entry of skip) {
    if (entry.reason.trim() === "") throw new Error(`contractSuite(${name}): a skip entry has no reason (tests: ${entry.tests.join(", ")})`);
    for (const test of entry.tests) {
      if (!known.has(test)) throw new Error(`contractSuite(${name}): skip names no contract test: "${test}"`);
      if (reasons.has(test)) throw new Error(`contractSuite(${name}): skip names "${test}" twice`);
      reasons.set(test, entry.reason);
    }
  }
  return reasons;
}

/** Registers the contract suites for one store (call it at the top level of a test file). */
export function contractSuite(options: ContractSuiteOptions): void {
  const { vitest, name, open } = options;
  const reasons = reasonsByTest(name, options.skip ?? []);

  // Which optional stores the bundle has: one ledger opened (and closed) while collecting.
  let probed: Promise<ReadonlySet<OptionalStore>> | undefined;
  const present = () => (probed ??= (async () => {
    let probe: Stores;
    try {
      probe = await open();
    } catch (err) {
      throw new Error(`contractSuite(${name}): open() failed while the tests were collected (it is called once then, to see which stores the bundle has): ${err instanceof Error ? err.message : String(err)}`, { cause: err });
    }
    const stores = new Set<OptionalStore>();
    if (probe.sagas) stores.add("sagas");
    if (probe.governance) stores.add("governance");
    if (probe.reconcile) stores.add("reconcile");
    await probe.close();
    return stores;
  })());

  const register = (suite: ContractSuiteDefinition) => {
    let ledger: Stores | undefined;
    const uses: ((ledger: Stores) => void)[] = [];
    vitest.beforeEach(async () => {
      ledger = await open();
      for (const use of uses) use(ledger);
    });
    vitest.afterEach(async () => {
      const closing = ledger;
      ledger = undefined;
      await closing?.close();
    });
    const tests: SuiteTests = {
      store: name,
      expect: vitest.expect,
      opened: (use) => {
        uses.push(use);
      },
      test: (test, body) => {
        const reason = reasons.get(test);
        if (reason === undefined) vitest.it(test, body);
        else vitest.it.skip(`${test} (skipped: ${reason})`, body);
      },
    };
    suite.register(tests);
  };

  for (const suite of SUITES) {
    const title = `${suite.title}: ${name}`;
    const needs = suite.needs;
    if (needs === undefined) {
      vitest.describe(title, () => register(suite));
      continue;
    }
    vitest.describe(title, async () => {
      if ((await present()).has(needs)) register(suite);
      else vitest.it.skip(`the ${suite.title} (skipped: the ${name} ledger has no \`${needs}\` store)`, () => undefined);
    });
  }
}
