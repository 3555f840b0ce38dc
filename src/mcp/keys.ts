/**
 * The idempotency key of a host's tools/call. Never the JSON-RPC request id: it changes on every
 * retry. In order:
 *   1. a tool-use id the host put in `params._meta` (the first of the configured fields present);
 *   2. otherwise a derived key over the upstream's identity (two gateways on one ledger in front of
 *      two servers must never answer each other's calls), the gateway's scope (tenant, task: stable
 *      across reconnects), the tool and the canonical arguments, so a host's repeat of a timed-out call is the same
 *      call. The dedupe window decides when an identical call is a new one: the key carries a
 *      generation, and a generation whose record settled at least the window ago is passed by.
 *      "Settled" is the record's last change (its updatedAt), on the store's clock, read as the gate
 *      reads it (`calls.now()`): counting from creation would make a slow call's repeat, or one a
 *      person settled late, a new call; the gateway's own clock may be off the store's. A
 *      generation still unsettled (running, uncertain, needing a person) is never passed by.
 */
import { canonicalJson, deriveKey, sha256Hex, type Scope } from "../core/keys.js";
import { isSettled } from "../core/states.js";
import type { CallStore } from "../contracts/calls.js";
import type { UpstreamConfig } from "./config.js";

export interface KeyRules {
  readonly metaKeys: readonly string[];
  readonly dedupeWindowMs: number;
}

/** The host's tool-use id in `_meta`, if it gave one. */
export function toolUseIdFromMeta(meta: Readonly<Record<string, unknown>> | undefined, metaKeys: readonly string[]): string | undefined {
  if (!meta) return undefined;
  for (const field of metaKeys) {
    const value = meta[field];
    if (typeof value === "string" && value !== "") return value;
    if (typeof value === "number" && Number.isFinite(value)) return String(value);
  }
  return undefined;
}

/**
 * The upstream's identity when the config names none (`upstreamId`): a hash of the command and its
 * arguments, or of the URL, so it is stable across restarts and reconnects, differs between two
 * servers, and never puts an argument (a token, a path) into a key in clear. 16 hex digits.
 */
export function defaultUpstreamId(upstream: UpstreamConfig): string {
  const what = "url" in upstream ? { url: new URL(upstream.url).href } : { command: upstream.command, args: upstream.args ?? [] };
  return sha256Hex(canonicalJson(what)).slice(0, 16);
}

/** How far up the generations a derived key may climb: a loop past this is a bug, not a workload. */
const MAX_GENERATIONS = 10_000;

export async function derivedKey(calls: CallStore, upstreamId: string, scope: Scope, tool: string, args: unknown, windowMs: number): Promise<string> {
  const base = `mcp:${encodeURIComponent(upstreamId)}:${deriveKey(scope, tool, args)}`;
  let storeNow: number | undefined;
  for (let generation = 0; generation < MAX_GENERATIONS; generation++) {
    const key = generation === 0 ? base : `${base}~${generation}`;
    const record = await calls.get(scope.tenant, key);
    if (!record || !isSettled(record.state)) return key;
    // Read once, and only when a settled generation is there to judge: a first call costs no extra round trip.
    storeNow ??= await calls.now();
    if (storeNow - record.updatedAt < windowMs) return key;
  }
  return `${base}~${MAX_GENERATIONS}`;
}
