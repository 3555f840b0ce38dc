import { inspect } from "node:util";

/** A JSON value, as the ledger stores inputs and results. */
export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

/** A tool's return value as stored JSON (undefined → null). */
export function toJson(value: unknown): Json {
  if (value === undefined) return null;
  try {
    const text = JSON.stringify(value);
    return text === undefined ? null : (JSON.parse(text) as Json);
  } catch {
    // The effect happened; a result we cannot store as JSON (a BigInt, a cycle) must not turn into an error.
    return inspect(value, { depth: 4 });
  }
}
