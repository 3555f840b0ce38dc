/**
 * Rows come back as the server's raw text (RAW_TYPES) and are read here field by field, so a
 * damaged row is refused by name (RowDamage, then EG_LEDGER_CORRUPT) instead of being read as
 * something else, and the ledger does not depend on type parsers a user set globally on
 * node-postgres. Every PostgreSQL store decodes its rows with `fieldsOf`.
 */
import type { CustomTypesConfig } from "pg";
import { isCallState } from "../../core/states.js";
import { isEffectClass } from "../../core/effect-class.js";
import type { Json } from "../../core/json.js";
import type { CallRecord } from "../../contracts/calls.js";
import type { Unknowable } from "../sql/known-records.js";
import { RowDamage } from "../row-damage.js";

/** Every column as the server's text: no global parser (int8 as BigInt, json revivers…) touches the ledger's rows. */
export const RAW_TYPES = { getTypeParser: () => (value: string) => value } as unknown as CustomTypesConfig;

export type RawRow = Readonly<Record<string, string | null | undefined>>;

/** The `n` of a `SELECT count(*) AS n` query's one row, read as the other fields are (`subject` names it in a damage message). */
export function countIn(rows: readonly RawRow[], subject: string): number {
  const [row] = rows;
  if (!row) throw new Error(`${subject}: the count returned no row`);
  return fieldsOf(row, subject).int("n");
}

/** A SQL string literal, for the inspection queries damage messages print. */
export const literal = (value: string | null | undefined) => `'${(value ?? "?").replaceAll("'", "''")}'`;

/** Readers for one row; each throws RowDamage naming `subject` (and `inspect`, a query to look at the row). */
export function fieldsOf(row: RawRow, subject: string, inspect?: string) {
  const bad = (problem: string) => new RowDamage(subject, problem, inspect);
  const text = (field: string): string => {
    const value = row[field];
    if (typeof value !== "string") throw bad(`has no ${field}`);
    return value;
  };
  const optionalText = (field: string): string | null => row[field] ?? null;
  const int = (field: string): number => {
    const raw = text(field);
    const value = Number(raw);
    if (!/^-?\d+$/.test(raw) || !Number.isSafeInteger(value)) throw bad(`has an unreadable ${field} (${JSON.stringify(raw)})`);
    return value;
  };
  const optionalInt = (field: string): number | null => (row[field] == null ? null : int(field));
  const num = (field: string): number => {
    const value = Number(text(field));
    if (!Number.isFinite(value)) throw bad(`has an unreadable ${field} (${JSON.stringify(row[field])})`);
    return value;
  };
  const json = <T = Json>(field: string): T => {
    const raw = text(field);
    try {
      return JSON.parse(raw) as T;
    } catch (err) {
      throw bad(`has unreadable ${field} (${err instanceof Error ? err.message : String(err)})`);
    }
  };
  const optionalJson = <T = Json>(field: string): T | null => (row[field] == null ? null : json<T>(field));
  const bool = (field: string): boolean => {
    const raw = text(field);
    if (raw !== "t" && raw !== "f") throw bad(`has an unreadable ${field} (${JSON.stringify(raw)})`);
    return raw === "t";
  };
  return { bad, text, optionalText, int, optionalInt, num, json, optionalJson, bool };
}

export function decodeCall(row: RawRow, table: string): CallRecord {
  const f = fieldsOf(row, `record ${row.tenant ?? "?"}/${row.key ?? "?"}`,
    `${table} WHERE tenant = ${literal(row.tenant)} AND key = ${literal(row.key)}`);
  const state = f.text("state");
  if (!isCallState(state)) throw f.bad(`has an unknown state ${JSON.stringify(state)}`);
  const effect = f.text("effect");
  if (!isEffectClass(effect)) throw f.bad(`has an unknown effect ${JSON.stringify(effect)}`);
  return {
    tenant: f.text("tenant"),
    key: f.text("key"),
    tool: f.text("tool"),
    effect,
    task: f.text("task"),
    toolUseId: f.text("tool_use_id"),
    fingerprint: f.text("fingerprint"),
    intent: f.text("intent"),
    input: f.json("input"),
    inputRedacted: f.bool("input_redacted"),
    state,
    result: f.optionalJson("result"),
    error: f.optionalText("error"),
    owner: f.optionalText("owner"),
    leaseExpiresAt: f.optionalInt("lease_expires_at"),
    attempts: f.int("attempts"),
    fence: f.int("fence"),
    startedAt: f.int("started_at"),
    claimToken: f.text("claim_token"),
    version: f.int("version"),
    createdAt: f.int("created_at"),
    updatedAt: f.int("updated_at"),
  };
}

/** What a write of a known record returns (sql/known-records.ts). */
export function unknowable(row: RawRow, table: string): Unknowable {
  const f = fieldsOf(row, `record written in ${table}`);
  return { leaseExpiresAt: f.optionalInt("lease_expires_at"), startedAt: f.int("started_at"), updatedAt: f.int("updated_at") };
}

export function decodeMillis(raw: string | null | undefined): number {
  const value = Number(raw);
  if (typeof raw !== "string" || !/^-?\d+$/.test(raw) || !Number.isSafeInteger(value)) {
    throw new Error(`the database clock read ${JSON.stringify(raw)}, not epoch milliseconds`);
  }
  return value;
}
