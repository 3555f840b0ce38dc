/**
 * The canonical text of a JSON request body, for the Idempotency-Key fingerprint, computed
 * without losing precision: the body is parsed with `lossless-json` (numbers stay the digits
 * that were sent), then written the RFC 8785 way:
 *
 * - object keys sorted by UTF-16 code units, no whitespace, duplicate keys: the last one counts
 *   (as JSON.parse, and so the handler, reads them);
 * - strings as JSON.stringify writes them (lone surrogates escaped, never refused);
 * - numbers as their exact decimal value, normalised from the digits ("1.0", "1", "1e0" and
 *   "10E-1" are one number; 12345678901234567890 and 12345678901234567891 are two; "-0" is 0),
 *   written in ECMAScript's Number-to-String layout. For a number that is a double's shortest
 *   form (what JSON.stringify writes) the text is exactly what RFC 8785 writes, so a fingerprint
 *   taken before this file existed still matches; any other number keeps every digit.
 *
 * Nesting deeper than MAX_JSON_DEPTH (core/json-depth.ts, shared by every entry) is refused
 * before parsing (the parser recurses).
 */
import { isLosslessNumber, parse } from "lossless-json";
import { jsonNestsDeeperThan, MAX_JSON_DEPTH } from "../core/json-depth.js";

/** Deepest nesting of arrays and objects accepted in a JSON body: the bound every entry shares (core/json-depth.ts). */
export { MAX_JSON_DEPTH };

export type CanonicalResult =
  | { readonly kind: "ok"; readonly text: string }
  | { readonly kind: "invalid" }
  | { readonly kind: "too_deep" };

class TooDeep extends Error {}

/** The canonical text of a JSON document, or why it has none. */
export function canonicalJsonText(text: string): CanonicalResult {
  if (jsonNestsDeeperThan(text)) return { kind: "too_deep" };
  let tree: unknown;
  try {
    tree = parse(text, null, { onDuplicateKey: ({ newValue }) => newValue });
  } catch {
    return { kind: "invalid" };
  }
  return { kind: "ok", text: canonicalValueText(tree) };
}

/**
 * The canonical text of a value: a `lossless-json` tree, or what a body parser left (plain
 * objects, arrays, strings, numbers, booleans, null; `toJSON` is honoured, as JSON.stringify does).
 * Throws for what JSON cannot carry (NaN, Infinity, undefined at the top, nesting past the limit).
 */
export function canonicalValueText(value: unknown): string {
  const out: string[] = [];
  write(value, 0, out);
  return out.join("");
}

function write(value: unknown, depth: number, out: string[]): void {
  if (value === null) {
    out.push("null");
    return;
  }
  switch (typeof value) {
    case "string":
      out.push(JSON.stringify(value));
      return;
    case "boolean":
      out.push(value ? "true" : "false");
      return;
    case "number":
      if (!Number.isFinite(value)) throw new TypeError(`${value} is not a JSON number`);
      out.push(canonicalNumber(String(value)));
      return;
    case "bigint":
      out.push(canonicalNumber(value.toString()));
      return;
    case "object":
      break;
    default:
      throw new TypeError(`a ${typeof value} is not JSON`);
  }
  if (isLosslessNumber(value)) {
    out.push(canonicalNumber(value.toString()));
    return;
  }
  if (depth >= MAX_JSON_DEPTH) throw new TooDeep(`nested deeper than ${MAX_JSON_DEPTH}`);
  if (Array.isArray(value)) {
    out.push("[");
    value.forEach((item: unknown, i) => {
      if (i > 0) out.push(",");
      write(item === undefined || typeof item === "function" || typeof item === "symbol" ? null : item, depth + 1, out);
    });
    out.push("]");
    return;
  }
  const withToJson = value as { toJSON?: unknown };
  if (typeof withToJson.toJSON === "function") {
    write((withToJson.toJSON as () => unknown).call(value), depth + 1, out);
    return;
  }
  const record = value as Record<string, unknown>;
  const keys = Object.keys(record)
    .filter((k) => record[k] !== undefined && typeof record[k] !== "function" && typeof record[k] !== "symbol")
    .sort();
  out.push("{");
  keys.forEach((k, i) => {
    if (i > 0) out.push(",");
    out.push(JSON.stringify(k), ":");
    write(record[k], depth + 1, out);
  });
  out.push("}");
}

const NUMBER = /^(-?)(0|[1-9][0-9]*)(?:\.([0-9]+))?(?:[eE]([+-]?)([0-9]+))?$/;

/**
 * A JSON number lexeme's exact value, normalised: significand without leading or trailing zeros,
 * laid out as ECMAScript's Number::toString lays out a double (plain up to 21 integer digits,
 * `0.000ddd` down to 6 zeros, `d.ddde±x` otherwise), with every digit kept.
 */
export function canonicalNumber(lexeme: string): string {
  const m = NUMBER.exec(lexeme);
  if (!m) throw new TypeError(`not a JSON number: ${lexeme.slice(0, 40)}`);
  const minus = m[1] === "-";
  const whole = m[2] ?? "0";
  const fraction = m[3] ?? "";
  const exponentNegative = m[4] === "-";
  const exponentDigits = stripLeadingZeros(m[5] ?? "0");

  const digits = whole + fraction;
  let first = 0;
  while (first < digits.length && digits.charCodeAt(first) === 0x30) first++;
  if (first === digits.length) return "0"; // any zero, -0 included
  let end = digits.length;
  while (digits.charCodeAt(end - 1) === 0x30) end--;
  const s = digits.slice(first, end);
  const k = s.length;
  // value = s × 10^(exponent − fraction.length + trailing zeros dropped); ES's n = that power + k.
  const shift = k - fraction.length + (digits.length - end);
  const sign = minus ? "-" : "";

  if (exponentDigits.length > 15) {
    // |exponent| ≥ 10^15: far outside the plain layouts, and |shift| (bounded by the body size) is smaller.
    const e = addSmall(exponentDigits, exponentNegative ? -(shift - 1) : shift - 1);
    return `${sign}${mantissa(s)}e${exponentNegative ? "-" : "+"}${e}`;
  }
  const n = (exponentNegative ? -1 : 1) * Number(exponentDigits) + shift;
  if (k <= n && n <= 21) return sign + s + "0".repeat(n - k);
  if (0 < n && n <= 21) return `${sign}${s.slice(0, n)}.${s.slice(n)}`;
  if (-6 < n && n <= 0) return `${sign}0.${"0".repeat(-n)}${s}`;
  const e = n - 1;
  return `${sign}${mantissa(s)}e${e < 0 ? "-" : "+"}${Math.abs(e)}`;
}

function mantissa(s: string): string {
  return s.length === 1 ? s : `${s[0]}.${s.slice(1)}`;
}

function stripLeadingZeros(d: string): string {
  let i = 0;
  while (i < d.length - 1 && d.charCodeAt(i) === 0x30) i++;
  return d.slice(i);
}

/** d + c for a decimal digit string d ≥ 10^15 and a safe integer c with |c| < 10^15 (so the result stays positive). */
function addSmall(d: string, c: number): string {
  if (c === 0) return d;
  const tailLength = Math.min(d.length, 18);
  const base = 10n ** BigInt(tailLength);
  let head = d.slice(0, d.length - tailLength);
  let tail = BigInt(d.slice(d.length - tailLength)) + BigInt(c);
  if (tail >= base) {
    tail -= base;
    head = increment(head);
  } else if (tail < 0n) {
    tail += base;
    head = decrement(head);
  }
  return stripLeadingZeros(head + tail.toString().padStart(tailLength, "0"));
}

function increment(d: string): string {
  let i = d.length - 1;
  while (i >= 0 && d[i] === "9") i--;
  if (i < 0) return `1${"0".repeat(d.length)}`;
  return d.slice(0, i) + String(Number(d[i]) + 1) + "0".repeat(d.length - 1 - i);
}

function decrement(d: string): string {
  let i = d.length - 1;
  while (i >= 0 && d[i] === "0") i--;
  // d > 0 here (see addSmall), so a non-zero digit exists.
  return d.slice(0, i) + String(Number(d[i]) - 1) + "9".repeat(d.length - 1 - i);
}

/** @internal for the middleware: whether canonicalValueText failed because the value nests too deep. */
export function isTooDeep(err: unknown): boolean {
  return err instanceof TooDeep;
}
