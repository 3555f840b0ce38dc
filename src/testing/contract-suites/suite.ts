/**
 * What a contract suite is: a title, the optional store of the bundle it tests, and a body that
 * registers its tests through `SuiteTests`. The body is called twice: once by `contractSuite` to
 * learn the tests' names (so a `skip` naming no test fails at once), once to register them with
 * vitest. It must do nothing but register tests and `opened` hooks.
 *
 * Only types come from vitest (`import type`): the package never loads vitest itself, the
 * caller hands in its own (see contract-suite.ts).
 */
import type * as Vitest from "vitest";
import type { Stores } from "../../contracts/stores.js";

/** The parts of vitest the suites use: pass `import * as vitest from "vitest"`. */
export type TestApi = Pick<typeof Vitest, "describe" | "it" | "expect" | "beforeEach" | "afterEach">;

/** The optional stores of a bundle that have a suite of their own. */
export type OptionalStore = "sagas" | "governance" | "reconcile";

export interface SuiteTests {
  /** The caller's name for the store under test, for messages ("sqlite"). */
  readonly store: string;
  readonly expect: TestApi["expect"];
  /** Runs before each test, with the fresh ledger just opened for it. */
  readonly opened: (use: (ledger: Stores) => void) => void;
  /** Registers one test (skipped, with its reason, when the caller's `skip` names it). */
  readonly test: (name: string, body: () => Promise<void>) => void;
}

export interface ContractSuiteDefinition {
  /** The describe block is `${title}: ${store}`, e.g. "SagaLog contract: sqlite". */
  readonly title: string;
  /** The bundle's optional store this suite tests; the call store's suite needs none. */
  readonly needs?: OptionalStore;
  readonly register: (tests: SuiteTests) => void;
}
