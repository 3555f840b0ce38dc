/**
 * What every PostgreSQL store's SQL shares: the database clock, the commit mode a transaction
 * takes from the ledger's durability, prepared-statement names, optional equality filters, and
 * the dialect through which the call store's statements (src/stores/sql) are written.
 */
import { createHash } from "node:crypto";
import type { Dialect } from "../sql/dialect.js";

/** Epoch milliseconds on the database clock. */
export const NOW_MS = `floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint`;

/**
 * The clock of a ledger opened with a `clock` option (deterministic tests only): the value the
 * access layer sets on the session before each statement (access.ts).
 */
export const GIVEN_NOW_MS = `current_setting('effectgate.now_ms')::bigint`;
export const GIVEN_NOW_SETTING = "effectgate.now_ms";

/** A statement text and the name it is prepared under on each connection. */
export interface Statement {
  readonly text: string;
  /** Derived from the text, so two ledgers (schemas, durabilities) on one pool never collide. */
  readonly name: string;
}

export const named = (text: string): Statement => ({ text, name: `effectgate_${createHash("sha256").update(text).digest("hex").slice(0, 24)}` });

/**
 * The one-row clock every write joins: `c.now`, and with durability "process" the commit mode
 * for this transaction only (synchronous_commit=off; the pool's sessions are not changed).
 */
export function clockOf(durability: "fsync" | "process", now: string = NOW_MS): string {
  return `(SELECT ${now} AS now${durability === "process" ? `, set_config('synchronous_commit', 'off', true) AS commit_mode` : ""}) AS c`;
}

/**
 * For statements that take no clock: `from` (a FROM item, for INSERT … SELECT, UPDATE and
 * SELECT) and `using` (DELETE) that set the commit mode of the statement's own transaction from
 * the ledger's durability; both empty with "fsync".
 */
export function commitModeOf(durability: "fsync" | "process"): { readonly from: string; readonly using: string } {
  if (durability === "fsync") return { from: "", using: "" };
  const mode = `(SELECT set_config('synchronous_commit', 'off', true) AS commit_mode) AS m`;
  return { from: `FROM ${mode}`, using: `USING ${mode}` };
}

export function postgresDialect(schema: string, durability: "fsync" | "process", now: string = NOW_MS): Dialect {
  const clock = clockOf(durability, now);
  return {
    name: "postgres",
    table: (name) => `${schema}.${name}`,
    now: "c.now",
    fromClock: `FROM ${clock}`,
    joinClock: `, ${clock}`,
    usingClock: `USING ${clock}`,
    param: (_name, type, index) => `$${index}::${type}`,
  };
}

/**
 * `column = $n` conditions for the optional filters that are given, numbered from $1, with
 * their values; the caller appends further parameters (a LIMIT) after them.
 */
export function equalityFilters(pairs: readonly (readonly [column: string, value: string | undefined])[]): { filters: string[]; values: unknown[] } {
  const filters: string[] = [];
  const values: unknown[] = [];
  for (const [column, value] of pairs) {
    if (value === undefined) continue;
    values.push(value);
    filters.push(`${column} = $${values.length}`);
  }
  return { filters, values };
}
