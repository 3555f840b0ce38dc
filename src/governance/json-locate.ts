/**
 * Where each value of a JSON text starts, so a policy error can name a line and column. Run
 * on text JSON.parse has accepted; a path that is not in the text (a missing field) falls
 * back to the nearest enclosing value.
 */
import type { Locate } from "./policy-schema.js";

export interface Position {
  readonly line: number;
  readonly column: number;
}

export function jsonLocator(text: string): Locate {
  const starts = new Map<string, number>();
  let i = 0;
  const id = (path: readonly PropertyKey[]) => JSON.stringify(path.map(String));
  const ws = () => {
    while (i < text.length && /\s/.test(text[i] as string)) i++;
  };
  const str = (): string => {
    const start = i;
    i++; // opening quote
    while (i < text.length && text[i] !== '"') i += text[i] === "\\" ? 2 : 1;
    i++;
    return JSON.parse(text.slice(start, i)) as string;
  };
  const value = (path: PropertyKey[]): void => {
    ws();
    starts.set(id(path), i);
    const c = text[i];
    if (c === "{") {
      i++;
      ws();
      if (text[i] === "}") {
        i++;
        return;
      }
      for (;;) {
        ws();
        const key = str();
        ws();
        i++; // colon
        value([...path, key]);
        ws();
        if (text[i++] === "}") return;
      }
    }
    if (c === "[") {
      i++;
      ws();
      if (text[i] === "]") {
        i++;
        return;
      }
      for (let n = 0; ; n++) {
        value([...path, n]);
        ws();
        if (text[i++] === "]") return;
      }
    }
    if (c === '"') {
      str();
      return;
    }
    while (i < text.length && !/[\s,\]}]/.test(text[i] as string)) i++;
  };
  try {
    value([]);
  } catch {
    // Not the JSON we expected: positions stay unknown rather than wrong.
    starts.clear();
  }
  return (path) => {
    for (let n = path.length; n >= 0; n--) {
      const at = starts.get(id(path.slice(0, n)));
      if (at !== undefined) return positionAt(text, at);
    }
    return undefined;
  };
}

/** 1-based line and column of an offset. */
export function positionAt(text: string, offset: number): Position {
  let line = 1;
  let lineStart = 0;
  for (let k = 0; k < offset && k < text.length; k++) {
    if (text[k] === "\n") {
      line++;
      lineStart = k + 1;
    }
  }
  return { line, column: offset - lineStart + 1 };
}

/**
 * Where a JSON text first breaks the grammar, and what was expected there (JSON.parse's own
 * message does not always give a position). Undefined when the text is valid JSON.
 */
export function syntaxError(text: string): { offset: number; problem: string } | undefined {
  let i = 0;
  class Stop extends Error {
    constructor(readonly offset: number, readonly problem: string) {
      super(problem);
    }
  }
  const found = () => (i >= text.length ? "the end of the file" : JSON.stringify(text[i]));
  const fail = (expected: string): never => {
    throw new Stop(i, `expected ${expected}, found ${found()}`);
  };
  const ws = () => {
    while (i < text.length && " \t\n\r".includes(text[i] as string)) i++;
  };
  const string = () => {
    if (text[i] !== '"') fail("a string in double quotes");
    i++;
    for (;;) {
      if (i >= text.length) fail('a closing "');
      const c = text[i] as string;
      if (c === '"') return void i++;
      if (c < " ") fail("no raw control character inside a string (escape it)");
      if (c === "\\") {
        i++;
        if (text[i] === "u" && /^[0-9a-fA-F]{4}$/.test(text.slice(i + 1, i + 5))) i += 5;
        else if (text[i] !== undefined && '"\\/bfnrt'.includes(text[i] as string)) i++;
        else fail("a valid escape (\\\" \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX)");
      } else i++;
    }
  };
  const value = (): void => {
    ws();
    const c = text[i];
    if (c === "{") {
      i++;
      ws();
      if (text[i] === "}") return void i++;
      for (;;) {
        ws();
        string();
        ws();
        if (text[i] !== ":") fail('":" after the field name');
        i++;
        value();
        ws();
        if (text[i] === "}") return void i++;
        if (text[i] !== ",") fail('"," or "}"');
        i++;
        ws();
        if (text[i] === "}") fail("another field after \",\" (JSON allows no trailing comma)");
      }
    }
    if (c === "[") {
      i++;
      ws();
      if (text[i] === "]") return void i++;
      for (;;) {
        value();
        ws();
        if (text[i] === "]") return void i++;
        if (text[i] !== ",") fail('"," or "]"');
        i++;
        ws();
        if (text[i] === "]") fail("another value after \",\" (JSON allows no trailing comma)");
      }
    }
    if (c === '"') return string();
    const literal = /^(true|false|null|-?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?)/.exec(text.slice(i, i + 400));
    if (!literal) fail("a value (object, list, string, number, true, false or null)");
    i += (literal as RegExpExecArray)[0].length;
  };
  try {
    value();
    ws();
    if (i < text.length) fail("the end of the file after the policy object");
    return undefined;
  } catch (err) {
    if (err instanceof Stop) return { offset: err.offset, problem: err.problem };
    throw err;
  }
}
