/**
 * A saga's idempotency keys. Nothing random: the same saga id and step name always give the
 * same keys, so a step re-driven after a crash, or a compensation retried after a timeout,
 * lands on the same ledger record and happens once.
 *
 *   forward call:      saga:<saga id>:<step name>
 *   its compensation:  saga:<saga id>:<step name>:compensate
 *
 * Parts are URI-encoded so `a:b` + `c` can never collide with `a` + `b:c`. Keys are scoped by
 * tenant in the ledger, like every key.
 */
export function stepKey(sagaId: string, step: string): string {
  return `saga:${encodeURIComponent(sagaId)}:${encodeURIComponent(step)}`;
}

export function compensationKey(sagaId: string, step: string): string {
  return `${stepKey(sagaId, step)}:compensate`;
}

/** Saga ids and step names: non-empty, at most 200 characters, no control characters. */
export function checkName(what: "saga id" | "step name", value: unknown): string | undefined {
  if (typeof value !== "string" || value === "") return `${what} must be a non-empty string`;
  if (value.length > 200) return `${what} must be at most 200 characters`;
  if (/[\u0000-\u001f\u007f]/.test(value)) return `${what} must not contain control characters`;
  return undefined;
}
