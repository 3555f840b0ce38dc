/**
 * Idempotency keys and input fingerprints. Nothing random ever enters a key: the same
 * call made again (a replay, a resume, a twin) must land on the same ledger record.
 */
import { createHash } from "node:crypto";
import canonicalize from "canonicalize";
import { EffectgateError } from "./errors.js";

/** Who a call is made for. Records are scoped by tenant: one tenant never sees another's. */
export interface Scope {
  /** The customer, team or user the agent acts for. Every ledger read and write is scoped by it. */
  readonly tenant: string;
  /** The task or conversation the call belongs to. */
  readonly task: string;
  /** The agent making the call, where several share a task. */
  readonly agent?: string;
  /** The session the task belongs to (a user's session spanning several tasks); governance quotas can count per session. */
  readonly session?: string;
  /**
   * The saga this call is a step of (see docs/sagas.md): tagged calls form a saga whose completed
   * steps are compensated in reverse order when one fails. Not part of any derived key.
   */
  readonly saga?: string;
}

/** RFC 8785 canonical JSON: the same value always serialises to the same bytes. */
export function canonicalJson(value: unknown): string {
  let text: string | undefined;
  try {
    text = canonicalize(value);
  } catch (err) {
    throw new EffectgateError("EG_INVALID_INPUT", `input is not JSON-serialisable: ${(err as Error).message}`, { cause: err });
  }
  if (text === undefined) throw new EffectgateError("EG_INVALID_INPUT", "input is not JSON-serialisable (undefined)");
  return text;
}

export function sha256Hex(text: string): string {
  return createHash("sha256").update(text).digest("hex");
}

/**
 * A derived idempotency key: tenant + task + step + SHA-256 of the canonical input.
 * Parts are URI-encoded so `a/b`+`c` can never collide with `a`+`b/c`.
 */
export function deriveKey(scope: Pick<Scope, "tenant" | "task">, step: string, input: unknown): string {
  const parts = [scope.tenant, scope.task, step].map(encodeURIComponent);
  return `${parts.join(":")}:${sha256Hex(canonicalJson(input))}`;
}

/** Fingerprint of what a call asks for: same key + different fingerprint is a mismatch, never a hit. */
export function fingerprint(tool: string, input: unknown): string {
  return sha256Hex(canonicalJson({ tool, input }));
}

/**
 * The longest tenant, task and idempotency key a ledger keeps, in UTF-8 bytes: the same on every
 * store, so a ledger that works on SQLite or in memory works on PostgreSQL too. PostgreSQL limits
 * one btree index entry to about a third of a page (2704 bytes with 8 KiB pages), and the ledger's
 * indexes on calls hold tenant and key together, and tenant, task and key together: measured on
 * PostgreSQL 15, a claim whose tenant + task + key (text that does not compress) passed about 2670
 * bytes was refused. These limits add up to 2304 bytes (docs/postgres.md, "Key limits").
 */
export const KEY_LIMITS = { tenant: 256, task: 512, key: 1536 } as const;

export interface KeyParts {
  readonly tenant: string;
  readonly task: string;
  readonly key: string;
}

/** A UTF-16 code unit is at most 3 bytes of UTF-8 (a surrogate pair, 2 units, is 4): short strings need no counting. */
const fits = (text: string, limit: number) => text.length * 3 <= limit || Buffer.byteLength(text, "utf8") <= limit;

/** EG_KEY_TOO_LONG naming the part over its limit and what to do, or undefined when every part fits (checked before any claim). */
export function keyTooLong(parts: KeyParts): EffectgateError | undefined {
  for (const part of ["key", "tenant", "task"] as const) {
    const text = parts[part];
    if (typeof text !== "string" || fits(text, KEY_LIMITS[part])) continue;
    const what = part === "key" ? "The call's idempotency key" : `The scope's ${part}`;
    const fix = part === "key"
      ? "use a shorter tool_use id or key function (a key function can hash a long natural key: sha256Hex); a derived key holds the tenant, task and tool name, so shorten those"
      : `use a shorter ${part}`;
    return new EffectgateError("EG_KEY_TOO_LONG",
      `${what} (${JSON.stringify(text.slice(0, 40))}…) is ${Buffer.byteLength(text, "utf8")} bytes of UTF-8; a ledger keeps at most ` +
        `${KEY_LIMITS.key} bytes of key, ${KEY_LIMITS.tenant} of tenant and ${KEY_LIMITS.task} of task, on every store. ` +
        `Nothing was executed and nothing was written: ${fix}, then make the call again.`);
  }
  return undefined;
}

/** Throws keyTooLong's error: what every store's claim does first, so no store ever writes a key another store could not. */
export function assertKeyFits(parts: KeyParts): void {
  const refused = keyTooLong(parts);
  if (refused) throw refused;
}

