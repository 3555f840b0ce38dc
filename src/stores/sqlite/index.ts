/**
 * The embedded default ledger: one SQLite file in WAL mode (better-sqlite3, loaded when the
 * file is first opened). Every store of the contract lives in that file and shares its one
 * connection, so a call, its saga step and its quota charge commit at the same durability.
 */
import type { Stores } from "../../contracts/stores.js";
import { openSqlite, type SqliteLedgerOptions } from "./access.js";
import { sqliteCallStore, sqliteCheckpoints } from "./calls.js";
import { sqliteGovernance } from "./governance.js";
import { sqliteReconcileStore } from "./reconcile.js";
import { sqliteSagaLog } from "./sagas.js";

export type { SqliteLedgerOptions } from "./access.js";

export function sqliteLedger(path: string, options: SqliteLedgerOptions = {}): Stores {
  const access = openSqlite(path, options);
  return {
    location: access.location,
    calls: sqliteCallStore(access),
    checkpoints: sqliteCheckpoints(access),
    sagas: sqliteSagaLog(access),
    governance: sqliteGovernance(access),
    reconcile: sqliteReconcileStore(access),
    close: () => access.close(),
  };
}
