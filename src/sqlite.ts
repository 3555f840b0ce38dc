/**
 * effectgate/sqlite: the embedded ledger, one SQLite file (the default `createGate` opens at
 * .effectgate/ledger.db). better-sqlite3 is loaded when the file is first opened.
 *
 *   import { createGate } from "effectgate";
 *   import { sqliteLedger } from "effectgate/sqlite";
 *   const gate = createGate({ tools, ledger: sqliteLedger("/var/lib/agent/ledger.db") });
 */
export { sqliteLedger, type SqliteLedgerOptions } from "./stores/sqlite/index.js";
export { SCHEMA_VERSION as SQLITE_SCHEMA_VERSION } from "./stores/sqlite/migrations.js";
