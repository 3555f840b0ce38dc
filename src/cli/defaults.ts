/**
 * The gate's default ledger path (DEFAULT_LEDGER_PATH in src/gate/gate.ts), repeated here so
 * `effectgate --help` does not load the gate and the SQLite driver. test/cli keeps the two equal.
 */
export const DEFAULT_LEDGER_PATH = ".effectgate/ledger.db";
