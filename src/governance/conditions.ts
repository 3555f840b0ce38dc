/** Declarative conditions on a call's input (`{ "field": "amount", "gt": 100 }`): evaluation and a description in words. */
import { canonicalJson } from "../core/keys.js";
import type { Condition } from "./policy.js";

/** The value at a dot path of the input, or undefined. */
export function fieldValue(input: unknown, path: string): unknown {
  let node: unknown = input;
  for (const part of path.split(".")) {
    if (typeof node !== "object" || node === null || !(part in node)) return undefined;
    node = (node as Record<string, unknown>)[part];
  }
  return node;
}

const same = (a: unknown, b: unknown): boolean => {
  if (a === b) return true;
  try {
    return canonicalJson(a) === canonicalJson(b);
  } catch {
    return false;
  }
};

export function holds(condition: Condition, input: unknown): boolean {
  if ("all" in condition) return condition.all.every((c) => holds(c, input));
  if ("any" in condition) return condition.any.some((c) => holds(c, input));
  if ("not" in condition) return !holds(condition.not, input);
  const value = fieldValue(input, condition.field);
  if (condition.exists !== undefined) return (value !== undefined) === condition.exists;
  if (condition.eq !== undefined) return same(value, condition.eq);
  if (condition.ne !== undefined) return !same(value, condition.ne);
  if (condition.in !== undefined) return condition.in.some((v) => same(value, v));
  // A comparison with a missing or non-numeric field does not hold.
  if (typeof value !== "number") return false;
  if (condition.gt !== undefined) return value > condition.gt;
  if (condition.gte !== undefined) return value >= condition.gte;
  if (condition.lt !== undefined) return value < condition.lt;
  if (condition.lte !== undefined) return value <= condition.lte;
  return false;
}

export function describeCondition(condition: Condition): string {
  if ("all" in condition) return condition.all.map(describeCondition).join(" and ");
  if ("any" in condition) return `(${condition.any.map(describeCondition).join(" or ")})`;
  if ("not" in condition) return `not (${describeCondition(condition.not)})`;
  const f = condition.field;
  if (condition.exists !== undefined) return condition.exists ? `${f} is given` : `${f} is not given`;
  if (condition.eq !== undefined) return `${f} = ${JSON.stringify(condition.eq)}`;
  if (condition.ne !== undefined) return `${f} ≠ ${JSON.stringify(condition.ne)}`;
  if (condition.in !== undefined) return `${f} in ${JSON.stringify(condition.in)}`;
  if (condition.gt !== undefined) return `${f} > ${condition.gt}`;
  if (condition.gte !== undefined) return `${f} ≥ ${condition.gte}`;
  if (condition.lt !== undefined) return `${f} < ${condition.lt}`;
  if (condition.lte !== undefined) return `${f} ≤ ${condition.lte}`;
  return f;
}
