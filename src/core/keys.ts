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
