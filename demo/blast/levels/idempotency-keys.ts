/**
 * Level 2: the tool_use id goes downstream as Idempotency-Key; a write whose downstream honours
 * keys (payments) is retried with the same key on an unknown outcome. Other writes stay unretried.
 */
import { SERVICE_TRAITS } from "../services.js";
import type { ToolInfo } from "../tools.js";
import { handRolled, transient } from "./hand-rolled.js";
import type { Level } from "./types.js";

const honours = new Set(SERVICE_TRAITS.filter((s) => s.honoursKeys).map((s) => s.name));

/** Reads on a transient error; writes too where the downstream applies a repeated key once. */
export function retryWithKeys(tool: ToolInfo, error: unknown): boolean {
  return transient(error) && (tool.effect === "read" || (tool.effect === "write" && honours.has(tool.service)));
}

export const idempotencyKeys: Level = {
  key: "2",
  name: "+ idempotency keys",
  adds: "the tool_use id is sent as Idempotency-Key; writes to a downstream that honours keys (payments) are retried with that key, other writes are not",
  available: async () => ({ available: true }),
  open: async (ctx) => handRolled(ctx, { attempts: 3, retry: retryWithKeys, sendKey: true, jsonLedger: false }),
};
