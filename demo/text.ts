/** Small text helpers the demo shares. */
import canonicalize from "canonicalize";

/** A readable one-line message for anything thrown. */
export function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** RFC 8785 canonical JSON, so the same value is compared as the same text. */
export function canonicalJson(value: unknown): string {
  return canonicalize(value) ?? "null";
}
