/**
 * How deep a client's JSON may nest, for every entry that reads one (the Idempotency-Key
 * middleware's fingerprint, the console's API, the receipts endpoint): one bound, checked on
 * the text before it is parsed, so that nothing that walks the value recursively afterwards
 * (JSON.stringify when a store writes it, a canonical form, a comparison) can run out of stack.
 * V8's JSON.stringify overflows somewhere past 4,000 levels; 1,000 leaves room for the stack a
 * request is already on, and is far deeper than any document a person or a program means to send.
 */

/** Deepest nesting of arrays and objects accepted in JSON a client sends. */
export const MAX_JSON_DEPTH = 1000;

/** Whether arrays and objects in a JSON text nest deeper than `limit` (brackets inside strings do not count). Never parses, never recurses. */
export function jsonNestsDeeperThan(text: string, limit: number = MAX_JSON_DEPTH): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c) i++; // a backslash escapes the next character
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) {
      inString = true;
    } else if (c === 0x5b || c === 0x7b) {
      if (++depth > limit) return true;
    } else if (c === 0x5d || c === 0x7d) {
      depth--;
    }
  }
  return false;
}

