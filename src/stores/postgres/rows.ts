/**
 * Rows come back as raw text (see RAW_TYPES) and are checked here field by field, so a damaged
 * row is refused by name instead of being read as something else, and the ledger does not
 * depend on the type parsers a user may have set globally on node-postgres.
 */
import type { CustomTypesConfig } from "pg";
import { isCallState } from "../../core/states.js";
import { EFFECT_CLASSES, type EffectClass, type Json } from "../../core/tool.js";
import type { CallRecord } from "../../contracts/calls.js";

/** Every column as the server's text: no global parser (int8 as BigInt, json revivers…) touches the ledger's rows. */
export const RAW_TYPES = { getTypeParser: () => (value: string) => value } as unknown as CustomTypesConfig;

export type RawRow = Readonly<Record<string, string | null | undefined>>;

/** What is wrong with a row; the store wraps it in EG_LEDGER_CORRUPT naming the record. */
export class RowDamage extends Error {
  constructor(readonly tenant: string, readonly key: string, problem: string) {
    super(`record ${tenant}/${key} ${problem}`);
  }
}

export function decodeCall(row: RawRow): CallRecord {
  const tenant = row.tenant ?? "?";
  const key = row.key ?? "?";
  const bad = (problem: string) => new RowDamage(tenant, key, problem);
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
  const json = (field: string, raw: string): Json => {
    try {
      return JSON.parse(raw) as Json;
    } catch (err) {
      throw bad(`has unreadable ${field} (${err instanceof Error ? err.message : String(err)})`);
    }
  };
  const state = text("state");
  if (!isCallState(state)) throw bad(`has an unknown state ${JSON.stringify(state)}`);
  const effect = text("effect");
  if (!EFFECT_CLASSES.includes(effect as EffectClass)) throw bad(`has an unknown effect ${JSON.stringify(effect)}`);
  const redacted = text("input_redacted");
  if (redacted !== "t" && redacted !== "f") throw bad(`has an unreadable input_redacted (${JSON.stringify(redacted)})`);
  const result = optionalText("result");
  return {
    tenant: text("tenant"),
    key: text("key"),
    tool: text("tool"),
    effect: effect as EffectClass,
    task: text("task"),
    toolUseId: text("tool_use_id"),
    fingerprint: text("fingerprint"),
    input: json("input", text("input")),
    inputRedacted: redacted === "t",
    state,
    result: result === null ? null : json("result", result),
    error: optionalText("error"),
    owner: optionalText("owner"),
    leaseExpiresAt: optionalInt("lease_expires_at"),
    attempts: int("attempts"),
    version: int("version"),
    createdAt: int("created_at"),
    updatedAt: int("updated_at"),
  };
}

export function decodeMillis(raw: string | null | undefined): number {
  const value = Number(raw);
  if (typeof raw !== "string" || !/^-?\d+$/.test(raw) || !Number.isSafeInteger(value)) {
    throw new Error(`the database clock read ${JSON.stringify(raw)}, not epoch milliseconds`);
  }
  return value;
}
