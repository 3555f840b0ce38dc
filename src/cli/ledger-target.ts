/**
 * Which ledger a command works on: a SQLite file (--db, EFFECTGATE_DB, or the default path) or a
 * PostgreSQL schema (--pg, EFFECTGATE_PG_URL). A flag on the command line beats the environment,
 * and a choice that cannot be made safely is a usage error rather than a guess: --db and --pg
 * together, or both variables set and neither flag given.
 */
import type { OptionValueSource } from "commander";
import { CliError, EXIT_USAGE } from "./errors.js";

export type LedgerTarget =
  | { readonly kind: "file"; readonly path: string }
  | { readonly kind: "postgres"; readonly url: string; readonly schema: string | undefined };

/** An option's value and where commander found it ("cli", "env", "default"…). */
export interface Given {
  readonly value: unknown;
  readonly source: OptionValueSource | undefined;
}

const usage = (message: string) => new CliError(message, EXIT_USAGE);
const isSet = (given: Given): given is Given & { value: string } => typeof given.value === "string" && given.value !== "";

export function chooseTarget(db: Given, pg: Given, pgSchema: Given): LedgerTarget {
  const dbFlag = db.source === "cli";
  const pgFlag = pg.source === "cli";
  if (dbFlag && pgFlag) {
    throw usage("--db and --pg were both given, and a command works on one ledger: pass --db PATH for a SQLite file or --pg URL for PostgreSQL.");
  }
  let postgres: boolean;
  if (pgFlag) postgres = true;
  else if (dbFlag) postgres = false;
  else if (pg.source === "env" && isSet(pg) && db.source === "env" && isSet(db)) {
    throw usage(
      "EFFECTGATE_DB and EFFECTGATE_PG_URL are both set, so it is not clear which ledger to use: " +
        "pass --db PATH or --pg URL (a flag wins over the environment), or unset one of them.",
    );
  } else postgres = pg.source === "env" && isSet(pg);

  if (!postgres) {
    if (pgSchema.source === "cli") throw usage("--pg-schema names the PostgreSQL schema of a --pg ledger; without --pg URL (or EFFECTGATE_PG_URL) the ledger is the SQLite file --db.");
    return { kind: "file", path: typeof db.value === "string" ? db.value : "" };
  }
  const from = pgFlag ? "--pg" : "EFFECTGATE_PG_URL";
  if (!isSet(pg)) throw usage(`${from} is empty: give a PostgreSQL URL, e.g. postgres://user:password@localhost:5432/app`);
  checkPostgresUrl(pg.value, from);
  return { kind: "postgres", url: pg.value, schema: typeof pgSchema.value === "string" ? pgSchema.value : undefined };
}

/** Refuses what is not a postgres:// URL, echoing what was given (its password hidden), before any connection is tried. */
export function checkPostgresUrl(url: string, from: string): void {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw usage(`${from} ${JSON.stringify(redactUrl(url))} is not a URL: give a PostgreSQL URL, e.g. postgres://user:password@localhost:5432/app`);
  }
  if (parsed.protocol !== "postgres:" && parsed.protocol !== "postgresql:") {
    throw usage(
      `${from} ${JSON.stringify(redactUrl(url))} is not a PostgreSQL URL (its scheme is ${parsed.protocol.replace(/:$/, "")}): ` +
        `it must start with postgres:// or postgresql://, e.g. postgres://user:password@localhost:5432/app`,
    );
  }
}

/** A connection URL fit to print: the password never appears, even in text that does not parse as a URL. */
export function redactUrl(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password !== "") parsed.password = "***";
    return parsed.toString();
  } catch {
    // scheme://user:secret@host…: hide what sits between the user's colon and the @.
    return url.replace(/^([^:/?#]*:\/\/[^:/?#@]*:)[^@/?#]*@/, "$1***@");
  }
}
