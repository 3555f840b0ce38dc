/**
 * `effectgate demo --keep DIR`: each level's ledger outlives the run, so the operator commands
 * have something real to inspect (the calls sent to a person, the sagas, the breakers). A SQLite
 * ledger is copied to DIR/level-<key>/ledger.db once the level's workers are done; a PostgreSQL
 * ledger's schema is left in place instead of dropped.
 */
import { constants, copyFileSync, existsSync, mkdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { sqliteLedger } from "effectgate/sqlite";

export type KeptLedger =
  | { readonly level: string; readonly kind: "sqlite"; readonly path: string }
  | { readonly level: string; readonly kind: "postgres"; readonly schema: string };

export function keptLedgerPath(keepDir: string, levelKey: string): string {
  return join(keepDir, `level-${levelKey}`, "ledger.db");
}

/** The kept files that already exist (the run would refuse them): checked before the run starts, not after a minute of it. */
export function keptLedgersInTheWay(keepDir: string, levelKeys: readonly string[]): string[] {
  return levelKeys.map((key) => keptLedgerPath(keepDir, key)).filter((path) => existsSync(path));
}

/**
 * Copies a level's SQLite ledger (no process has it open any more) to `to`, never over an
 * existing file. Opening the copy once folds a copied write-ahead log into it, so what is kept is
 * one self-contained file.
 */
export async function keepSqliteLedger(from: string, to: string): Promise<void> {
  mkdirSync(dirname(to), { recursive: true });
  copyFileSync(from, to, constants.COPYFILE_EXCL);
  if (existsSync(`${from}-wal`)) copyFileSync(`${from}-wal`, `${to}-wal`, constants.COPYFILE_EXCL);
  const ledger = sqliteLedger(to, { create: false });
  try {
    await ledger.calls.list({ limit: 1 });
  } finally {
    await ledger.close();
  }
}
