/**
 * The "plain JSON-file ledger" of tutorials, as the comparison point: one JSON object
 * { tool_use_id: result } that is read whole (readFileSync + JSON.parse) and rewritten whole
 * (write + fsync) on every call. No claim before the effect, no states, no fingerprints:
 * it is strictly less than the gate does, and it is still the slow one as it grows.
 */
import { closeSync, existsSync, fsyncSync, openSync, readFileSync, writeSync } from "node:fs";
import type { Json } from "../../src/index.js";

export type JsonLedgerData = Record<string, Json>;

/** Answers one tool call through the JSON file: replay the stored result, or run and record it. */
export function jsonLedgerCall(file: string, toolUseId: string, run: () => Json): Json {
  const data: JsonLedgerData = existsSync(file) ? (JSON.parse(readFileSync(file, "utf8")) as JsonLedgerData) : {};
  if (Object.hasOwn(data, toolUseId)) return data[toolUseId] ?? null;
  const result = run();
  data[toolUseId] = result;
  writeWhole(file, data);
  return result;
}

/** Rewrites the whole file in place and fsyncs it (what `writeFileSync` + `fsync` amounts to). */
export function writeWhole(file: string, data: JsonLedgerData): void {
  const fd = openSync(file, "w");
  try {
    writeSync(fd, JSON.stringify(data));
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}
