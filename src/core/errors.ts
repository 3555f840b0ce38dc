/**
 * Every error effectgate raises or reports carries a stable `EG_…` code and says what
 * happens next: whether the call's effect is known not to have happened (`terminal`),
 * may be retried as-is (`retryable`), or has an unknown outcome (`unknown`).
 */
export type ErrorOutcome = "terminal" | "retryable" | "unknown";

const ERROR_CODES = {
  EG_BAD_CONTENT: "terminal",
  EG_MALFORMED_BLOCK: "terminal",
  EG_UNKNOWN_TOOL: "terminal",
  EG_INVALID_INPUT: "terminal",
  EG_KEY_MISMATCH: "terminal",
  /** A call's tenant, task or idempotency key is longer than a ledger keeps (KEY_LIMITS, src/core/keys.ts): nothing was executed or written. */
  EG_KEY_TOO_LONG: "terminal",
  EG_TOOL_FAILED: "terminal",
  EG_IN_PROGRESS: "unknown",
  EG_NEEDS_HUMAN: "unknown",
  EG_LEDGER_UNAVAILABLE: "retryable",
  EG_LEDGER_CORRUPT: "terminal",
  EG_LEDGER_TOO_NEW: "terminal",
  EG_CHECKPOINT_CORRUPT: "terminal",
  EG_BAD_TOOL_DEFINITION: "terminal",
  /** An option given to createGate, a store or an entry is wrong: the message names it and says what it must be. */
  EG_BAD_OPTION: "terminal",
  EG_ILLEGAL_TRANSITION: "terminal",
  /** The call repeats an earlier one of its task (same tool, same input, a new id) and was not executed (ToolSpec.repeats). */
  EG_REPEATED_CALL: "terminal",
  // Governance (src/governance): each refusal means nothing was executed.
  EG_KILL_SWITCH: "terminal",
  EG_NOT_GRANTED: "terminal",
  EG_QUOTA_EXCEEDED: "terminal",
  EG_BREAKER_OPEN: "terminal",
  EG_AWAITING_APPROVAL: "retryable",
  EG_APPROVAL_DENIED: "terminal",
  EG_APPROVAL_EXPIRED: "terminal",
  EG_DRY_RUN_FAILED: "terminal",
  EG_BAD_POLICY: "terminal",
  EG_SANDBOX_DENIED: "terminal",
  // Sagas (src/saga): the saga ended (its completed steps compensated, or handed to a person), or takes no more steps.
  EG_SAGA_FAILED: "terminal",
  EG_SAGA_CLOSED: "terminal",
} as const satisfies Record<string, ErrorOutcome>;

export type ErrorCode = keyof typeof ERROR_CODES;

/** `EG_…: message`, the form every error result and stored error takes (the code is typed, so a misspelt one does not compile). */
export function errorMessage(code: ErrorCode, message: string): string {
  return `${code}: ${message}`;
}

export class EffectgateError extends Error {
  readonly code: ErrorCode;
  readonly outcome: ErrorOutcome;

  constructor(code: ErrorCode, message: string, options?: { cause?: unknown }) {
    super(errorMessage(code, message), options);
    this.name = "EffectgateError";
    this.code = code;
    this.outcome = ERROR_CODES[code];
  }
}

export function isErrorCode(code: unknown): code is ErrorCode {
  return typeof code === "string" && Object.hasOwn(ERROR_CODES, code);
}

export function isEffectgateError(err: unknown, code?: ErrorCode): err is EffectgateError {
  return err instanceof EffectgateError && (code === undefined || err.code === code);
}

/** A readable one-line message for anything thrown. */
/**
 * A ledger error's reason without the advice its store adds for a call that never started
 * ("The tool was not started by this request; replay…"): what the gate says once a tool has started
 * must never carry that sentence.
 */
export function reasonAfterStart(err: unknown): string {
  return messageOf(err).replace(/\.?\s*The tool was not started by this request; replay this same call once the (ledger|database) is reachable to run it or get its outcome\.?$/, "");
}

export function messageOf(err: unknown): string {
  if (err instanceof Error) return err.message;
  if (typeof err === "string") return err;
  try {
    return JSON.stringify(err);
  } catch {
    return String(err);
  }
}
