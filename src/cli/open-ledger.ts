/**
 * Opening a ledger for an operator command. Operator commands must never create or alter a
 * file because of a typo, and never write into a damaged or foreign one: a missing path is a
 * usage error (exit 2); every file is checked whole first (PRAGMA quick_check), so a damaged
 * one is refused with EG_LEDGER_CORRUPT before anything is read from it or written to it, and
 * a file that is not an effectgate ledger (empty, or another program's database) is refused by
 * the store, untouched. Reading opens the file read-only.
 */
import { statSync } from "node:fs";
import { join, resolve } from "node:path";
import type { Command } from "commander";
import { messageOf } from "../core/errors.js";
import type { Stores } from "../contracts/stores.js";
import { sqliteLedger } from "../stores/sqlite/index.js";
import { CliError, EXIT_FAILURE, EXIT_USAGE } from "./errors.js";
import { chooseTarget, redactUrl, type LedgerTarget } from "./ledger-target.js";

export { redactUrl } from "./ledger-target.js";

export interface OpenedLedger {
  readonly ledger: Stores;
  /** The absolute path of the file, or the PostgreSQL URL (password hidden) and schema. */
  readonly file: string;
}

/** The ledger the running command was pointed at (chooseLedger); a file at the command's --db until then. */
let target: LedgerTarget | undefined;
/** Set when the target is PostgreSQL: every command opens that ledger instead of a file. */
let postgresTarget: { readonly where: string; open(mode: "read" | "change"): Stores } | undefined;

/**
 * Decides, before a command runs, which ledger it works on (see ledger-target.ts): its --db,
 * --pg and --pg-schema values and where each came from (command line, environment, default).
 */
export async function chooseLedger(command: Command): Promise<LedgerTarget> {
  const opts = command.opts<{ db?: unknown; pg?: unknown; pgSchema?: unknown }>();
  const given = (key: "db" | "pg" | "pgSchema") => ({ value: opts[key], source: command.getOptionValueSource(key) });
  target = chooseTarget(given("db"), given("pg"), given("pgSchema"));
  if (target.kind === "postgres") await usePostgres(target.url, target.schema);
  return target;
}

/** The ledger chooseLedger picked (a file at `path` when it was not called). */
export function chosenTarget(path: string): LedgerTarget {
  return target ?? { kind: "file", path };
}

/** Points the operator commands at a PostgreSQL ledger. Loads `pg` only now, so file users never need it. */
export async function usePostgres(url: string, schema?: string): Promise<void> {
  const { postgresLedger } = await import("../stores/postgres/index.js").catch((err: unknown) => {
    throw new CliError(`--pg needs the \`pg\` package: npm install pg (${messageOf(err)})`, EXIT_FAILURE);
  });
  postgresTarget = {
    where: `${redactUrl(url)} schema ${schema ?? "effectgate"}`,
    open: (mode) => postgresLedger({ connectionString: url }, { ...(schema ? { schema } : {}), ...(mode === "read" ? { readOnly: true } : { create: false }) }),
  };
}

/** Writable, but never created: a missing path is a usage error (a typo must not start a new ledger). */
export function openLedgerForChanges(path: string): OpenedLedger {
  if (postgresTarget) return { ledger: postgresTarget.open("change"), file: postgresTarget.where };
  const file = existingFile(path);
  return { ledger: sqliteLedger(file, { create: false, verify: true }), file };
}

export function openLedgerForReading(path: string): OpenedLedger {
  if (postgresTarget) return { ledger: postgresTarget.open("read"), file: postgresTarget.where };
  const file = existingFile(path);
  return { ledger: sqliteLedger(file, { readOnly: true, verify: true }), file };
}

/** The absolute path of an existing ledger file; a missing one or a directory is a usage error. */
function existingFile(path: string): string {
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
  return file;
}

/** Opens the ledger now, checks included, rather than on first use: for a command that may not touch it at all (a scan of no tools). */
export async function openNow(opened: OpenedLedger): Promise<OpenedLedger> {
  try {
    await opened.ledger.calls.list({ limit: 1 });
  } catch (err) {
    await opened.ledger.close();
    throw err;
  }
  return opened;
}
