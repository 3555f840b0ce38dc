/** Helpers for the console tests: a served ledger, requests with and without the token, a needs_human call made the way the gate makes one. */
import { fingerprint } from "../../src/core/keys.js";
import type { Json } from "../../src/core/json.js";
import type { Stores } from "../../src/contracts/stores.js";

export interface Reply {
  readonly status: number;
  readonly body: unknown;
  readonly headers: Headers;
}

/** A request to the console as a script (curl, a bot) makes it. */
export async function call(base: string, token: string | undefined, method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<Reply> {
  const res = await fetch(new URL(path, base), {
    method,
    headers: {
      ...(token === undefined ? {} : { Authorization: `Bearer ${token}` }),
      ...(body === undefined ? {} : { "Content-Type": "application/json" }),
      ...headers,
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await res.text();
  let parsed: unknown = text;
  try {
    parsed = JSON.parse(text);
  } catch {
    // not JSON: keep the text
  }
  return { status: res.status, body: parsed, headers: res.headers };
}

/**
 * A call the gate could not settle, as the gate leaves it: claimed (in_progress), then moved to
 * needs_human by the store's compare-and-set. Its fingerprint is the one a replay of the same
 * tool_use computes, so the agent's replay gets whatever a person records.
 */
export async function needsHumanCall(ledger: Stores, call: { tenant: string; key: string; tool: string; input: Json; why: string }): Promise<void> {
  const claimed = await ledger.calls.claim({
    tenant: call.tenant, key: call.key, tool: call.tool, effect: "write", task: "t1", toolUseId: call.key,
    fingerprint: fingerprint(call.tool, call.input), input: call.input, inputRedacted: false, owner: "test", leaseMs: 60_000,
  });
  if (!claimed.claimed) throw new Error(`key ${call.key} already exists`);
  const moved = await ledger.calls.update(call.tenant, call.key, claimed.record.version, { state: "needs_human", owner: null, error: call.why });
  if (!moved) throw new Error("could not move the call to needs_human");
}
