/**
 * Opening a ledger file for an operator command. Operator commands only read, so they must
 * never create or alter a file because of a typo: a missing path is a usage error (exit 2);
 * the ledger is opened read-only, which refuses a file that is not an effectgate ledger.
 */
import { statSync } from "node:fs";
import { join, resolve } from "node:path";
import { messageOf } from "../core/errors.js";
import type { Stores } from "../contracts/stores.js";
import { sqliteLedger } from "../stores/sqlite/index.js";
import { CliError, EXIT_FAILURE, EXIT_USAGE } from "./errors.js";

export interface OpenedLedger {
  readonly ledger: Stores;
  /** The absolute path of the file. */
  readonly file: string;
}

/** Set by `--pg URL` / EFFECTGATE_PG_URL (see usePostgres): then every command opens that ledger instead of a file. */
let postgresTarget: { readonly where: string; open(mode: "read" | "change"): Stores } | undefined;

/** Points the operator commands at a PostgreSQL ledger. Loads `pg` only now, so file users never need it. */
export async function usePostgres(url: string, schema?: string): Promise<void> {
  const { postgresLedger } = await import("../stores/postgres/index.js").catch((err: unknown) => {
    throw new CliError(`--pg needs the \`pg\` package: npm install pg (${messageOf(err)})`, EXIT_FAILURE);
  });
  postgresTarget = {
    where: redactUrl(url),
    open: (mode) => postgresLedger({ connectionString: url }, { ...(schema ? { schema } : {}), ...(mode === "read" ? { readOnly: true } : { create: false }) }),
  };
}

/** A connection URL fit to print: the password never appears. */
export function redactUrl(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password !== "") parsed.password = "***";
    return parsed.toString();
  } catch {
    return "(the --pg URL, which is not a valid URL)";
  }
}

/** Writable, but never created: a missing path is a usage error (a typo must not start a new ledger). */
export function openLedgerForChanges(path: string): OpenedLedger {
  if (postgresTarget) return { ledger: postgresTarget.open("change"), file: postgresTarget.where };
  const { file } = openLedgerForReading(path); // the same checks; the read-only ledger opens lazily, so nothing was opened
  return { ledger: sqliteLedger(file, { create: false }), file };
}

export function openLedgerForReading(path: string): OpenedLedger {
  if (postgresTarget) return { ledger: postgresTarget.open("read"), file: postgresTarget.where };
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

