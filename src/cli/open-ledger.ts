/**
 * Opening a ledger file for an operator command. Operator commands only read, so they must
 * never create or alter a file because of a typo: a missing path is a usage error (exit 2);
 * the ledger is opened read-only, which refuses a file that is not an effectgate ledger.
 */
import { statSync } from "node:fs";
import { join, resolve } from "node:path";
import { messageOf } from "../core/errors.js";
import type { Ledger } from "../ledger/contract.js";
import { sqliteLedger } from "../ledger/sqlite.js";
import { CliError, EXIT_FAILURE, EXIT_USAGE } from "./errors.js";

export interface OpenedLedger {
  readonly ledger: Ledger;
  /** The absolute path of the file. */
  readonly file: string;
}

export function openLedgerForReading(path: string): OpenedLedger {
  const file = resolve(path);
  try {
    const stat = statSync(file);
    if (stat.isDirectory()) {
      throw new CliError(`${file} is a directory, not a ledger file. Pass the file itself with --db, e.g. --db ${join(path, "ledger.db")}.`, EXIT_USAGE);
    }
  } catch (err) {
    if (err instanceof CliError) throw err;
    if ((err as NodeJS.ErrnoException).code === "ENOENT") {
      throw new CliError(
        `there is no ledger at ${file} (the file does not exist; nothing was created). ` +
          `Check the path given with --db or EFFECTGATE_DB; without either, effectgate looks for .effectgate/ledger.db ` +
          `in the current directory (${process.cwd()}).`,
        EXIT_USAGE,
      );
    }
    throw new CliError(`cannot read the ledger ${file}: ${messageOf(err)}`, EXIT_FAILURE);
  }
  // The library refuses (untouched) an empty file or another program's database.
  return { ledger: sqliteLedger(file, { readOnly: true }), file };
}
