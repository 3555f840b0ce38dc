/**
 * The reference row: level 2 plus the "plain JSON-file ledger" of tutorials, a file
 * {tool_use_id: tool_result} checked before each call and written after it returns.
 */
import { handRolled } from "./hand-rolled.js";
import { idempotencyKeys, retryWithKeys } from "./idempotency-keys.js";
import type { Level } from "./types.js";

export const jsonFileLedger: Level = {
  key: "ref",
  name: "JSON-file ledger after execution",
  adds: `level ${idempotencyKeys.key} plus a JSON file {tool_use_id: result} per worker, read before each call and written after it returns (the usual tutorial design)`,
  available: async () => ({ available: true }),
  open: async (ctx) => handRolled(ctx, { attempts: 3, retry: retryWithKeys, sendKey: true, jsonLedger: true }),
};
