/**
 * An in-memory ledger for tests and throwaway runs: every store of the contract, with the same
 * semantics as the SQL ones, gone when the process ends.
 */
import type { Stores } from "../../contracts/stores.js";
import { memoryCallStore } from "./calls.js";
import { memoryCheckpoints } from "./checkpoints.js";
import { memoryGovernance } from "./governance.js";
import { memoryReconcileStore } from "./reconcile.js";
import { memorySagaLog } from "./sagas.js";

export interface MemoryLedgerOptions {
  /** The clock leases are judged by (default Date.now); tests may pass their own. */
  readonly clock?: () => number;
}

export function memoryLedger(options: MemoryLedgerOptions = {}): Stores {
  const clock = options.clock ?? Date.now;
  const governance = memoryGovernance();
  return {
    location: "memory",
    calls: memoryCallStore(clock, governance.halted),
    checkpoints: memoryCheckpoints(),
    sagas: memorySagaLog(clock),
    governance,
    reconcile: memoryReconcileStore(clock),
    async close() {},
  };
}
