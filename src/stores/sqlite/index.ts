/**
 * The embedded default ledger: one SQLite file in WAL mode (better-sqlite3, loaded when the
 * file is first opened). Every store of the contract lives in that file and shares its one
 * connection, so a call, its saga step and its quota charge commit at the same durability.
 */
import type { Stores } from "../../contracts/stores.js";
import { openSqlite, type OpenReport, type SqliteLedgerOptions } from "./access.js";
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

/**
 * Creates the ledger file, or brings its schema up to this version, ahead of the agents
 * (`effectgate migrate`). The file is checked whole first: a damaged, empty or foreign file is
 * refused untouched. Says what it found and did.
 */
export async function migrateSqlite(path: string, options: Omit<SqliteLedgerOptions, "readOnly" | "create"> = {}): Promise<OpenReport & { readonly file: string }> {
  const access = openSqlite(path, { ...options, verify: options.verify ?? true });
  try {
    await access.run("open it", () => undefined);
    const report = access.opened();
    if (!report) throw new Error("unreachable: the ledger is open but did not report how");
    return { file: access.file, ...report };
  } finally {
    await access.close();
  }
}
