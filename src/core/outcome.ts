/**
 * What a thrown error says about whether the call's effect happened. A timeout is not a
 * failure: it is "outcome unknown". Only a definite rejection makes a call `failed` at once.
 *
 * - `rejected`: the downstream refused it (a 4xx validation error, `ToolRejected`): no effect.
 * - `not_sent`: the request never reached the downstream (connection refused, DNS failure,
 *   429/503 "not processed"): no effect, safe to send again with the same key.
 * - `unknown`: it may or may not have happened (timeout, connection reset mid-request,
 *   500/502/504, `OutcomeUnknown`): probe, never blind-retry.
 * - `failed`: anything else the tool threw (its own bug or check): recorded as failed,
 *   as the tool said.
 */
export type ErrorKind = "rejected" | "not_sent" | "unknown" | "failed";

/** Throw from a tool when the downstream definitely refused the call (nothing happened). */
export class ToolRejected extends Error {
  override readonly name = "ToolRejected";
}

/** Throw from a tool when it cannot tell whether the downstream applied the call. */
export class OutcomeUnknown extends Error {
  override readonly name = "OutcomeUnknown";
}

/** Thrown into a tool's AbortSignal when the gate's timeout fires. */
export class ToolTimeout extends Error {
  override readonly name = "ToolTimeout";
}

/** Thrown into a tool's AbortSignal when its worker lost the call's lease: another worker may hold it now. */
export class LeaseLost extends Error {
  override readonly name = "LeaseLost";
}

/** The header a tool sends its `ctx.fence` in, beside `Idempotency-Key` (effectgate/server reads it). */
export const FENCE_HEADER = "Effectgate-Fence";

const NOT_SENT_CODES = new Set(["ECONNREFUSED", "ENOTFOUND", "EAI_AGAIN", "EHOSTUNREACH", "ENETUNREACH", "UND_ERR_CONNECT_TIMEOUT"]);
const UNKNOWN_CODES = new Set([
  "ECONNRESET", "EPIPE", "ETIMEDOUT", "ECONNABORTED", "UND_ERR_SOCKET", "UND_ERR_CLOSED", "UND_ERR_HEADERS_TIMEOUT",
  "UND_ERR_BODY_TIMEOUT", "ABORT_ERR",
]);

export function classifyError(err: unknown): ErrorKind {
  // Walk the cause chain: fetch wraps the socket error as TypeError("fetch failed", { cause }).
  for (let e: unknown = err, depth = 0; e !== undefined && e !== null && depth < 5; depth++) {
    if (e instanceof ToolRejected) return "rejected";
    if (e instanceof OutcomeUnknown || e instanceof ToolTimeout) return "unknown";
    if (typeof e !== "object") break;
    const { code, status, statusCode, name } = e as { code?: unknown; status?: unknown; statusCode?: unknown; name?: unknown };
    if (typeof code === "string" && NOT_SENT_CODES.has(code)) return "not_sent";
    if (typeof code === "string" && UNKNOWN_CODES.has(code)) return "unknown";
    if (name === "AbortError" || name === "TimeoutError") return "unknown";
    const http = typeof status === "number" ? status : typeof statusCode === "number" ? statusCode : undefined;
    if (http !== undefined) {
      if (http === 429 || http === 503) return "not_sent";
      if (http === 408 || http >= 500) return "unknown";
      if (http >= 400) return "rejected";
    }
    e = (e as { cause?: unknown }).cause;
  }
  return "failed";
}
