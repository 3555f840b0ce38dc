/** Loading `effectgate.policy.json`: JSON syntax errors and schema errors both name a line and column. */
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { messageOf } from "../core/errors.js";
import { jsonLocator, positionAt, syntaxError } from "./json-locate.js";
import type { Policy } from "./policy.js";
import { parsePolicy, policyError } from "./policy-schema.js";

export function loadPolicyFile(path: string): Policy {
  const file = resolve(path);
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    const why = code === "ENOENT" ? "the file does not exist" : messageOf(err);
    throw policyError(file, [{ field: "(file)", message: `cannot read it: ${why}` }]);
  }
  return parsePolicyText(text, file);
}

/** Parses the text of a policy file; `source` names it in errors. */
export function parsePolicyText(text: string, source: string): Policy {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    const found = syntaxError(text);
    const at = found ? positionAt(text, found.offset) : undefined;
    throw policyError(source, [{
      field: "(JSON syntax)",
      ...(at ? { line: at.line, column: at.column } : {}),
      message: `not valid JSON: ${found?.problem ?? messageOf(err)}`,
    }]);
  }
  return parsePolicy(value, source, jsonLocator(text));
}
