/**
 * Validating a policy (object or parsed file) with zod. Every problem is reported with the
 * field it is about (`quotas[1].limit`) and, for a file, its line and column.
 */
import { z } from "zod";
import { EffectgateError } from "../core/errors.js";
import type { Policy } from "./policy.js";

export type Locate = (path: readonly PropertyKey[]) => { line: number; column: number } | undefined;

const CLASSES = ["write", "destructive"] as const;
const name = z.string({ error: "must be a string" }).min(1, { error: "must not be empty" });
const positive = z.number({ error: "must be a number" }).finite({ error: "must be a finite number" }).positive({ error: "must be greater than 0" });
const positiveInt = z.number({ error: "must be a number" }).int({ error: "must be a whole number" }).positive({ error: "must be at least 1" });
const governedClass = z.enum(CLASSES, { error: `must be one of ${CLASSES.join(", ")} (read tools are never governed)` });
const dotPath = z.string({ error: "must be a dot path such as \"amount\" or \"card.total\"" })
  .regex(/^[^.]+(\.[^.]+)*$/, { error: "must be a dot path such as \"amount\" or \"card.total\"" });

const grant = z.strictObject({
  tenant: name.optional(),
  agent: name.optional(),
  task: name.optional(),
  tools: z.array(name, { error: "must be a list of tool names (or [\"*\"])" }).optional(),
  classes: z.array(governedClass, { error: "must be a list of classes (write, destructive)" }).optional(),
}).refine((g) => g.tools !== undefined || g.classes !== undefined, { error: "a grant needs tools or classes (what it grants)" });

const quota = z.strictObject({
  id: name.optional(),
  per: z.enum(["task", "session", "agent", "tenant"], { error: "must be one of task, session, agent, tenant" }),
  tool: name.optional(),
  class: governedClass.optional(),
  limit: positive,
  sum: dotPath.optional(),
});

const rateLimit = z.strictObject({
  id: name.optional(),
  per: z.enum(["task", "agent", "tenant"], { error: "must be one of task, agent, tenant" }),
  tool: name.optional(),
  class: governedClass.optional(),
  limit: positiveInt,
  windowMs: positiveInt,
});

const OPERATORS = ["gt", "gte", "lt", "lte", "eq", "ne", "in", "exists"] as const;

/** Conditions are checked by hand: a union's error would not say which part is wrong. */
function checkCondition(value: unknown, ctx: z.RefinementCtx, path: PropertyKey[]): void {
  const issue = (message: string, at: PropertyKey[] = path) => ctx.addIssue({ code: "custom", message, path: at });
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    issue(`must be a condition such as { "field": "amount", "gt": 100 } (or { "all": [...] }, { "any": [...] }, { "not": {...} })`);
    return;
  }
  const cond = value as Record<string, unknown>;
  const keys = Object.keys(cond);
  for (const combinator of ["all", "any"] as const) {
    if (combinator in cond) {
      if (keys.length !== 1) issue(`"${combinator}" stands alone in its condition; found also ${keys.filter((k) => k !== combinator).join(", ")}`);
      const list = cond[combinator];
      if (!Array.isArray(list) || list.length === 0) issue("must be a non-empty list of conditions", [...path, combinator]);
      else list.forEach((c, i) => checkCondition(c, ctx, [...path, combinator, i]));
      return;
    }
  }
  if ("not" in cond) {
    if (keys.length !== 1) issue(`"not" stands alone in its condition; found also ${keys.filter((k) => k !== "not").join(", ")}`);
    checkCondition(cond.not, ctx, [...path, "not"]);
    return;
  }
  if (typeof cond.field !== "string" || !/^[^.]+(\.[^.]+)*$/.test(cond.field)) {
    issue("must be a dot path into the input, such as \"amount\"", [...path, "field"]);
  }
  const unknown = keys.filter((k) => k !== "field" && !(OPERATORS as readonly string[]).includes(k));
  for (const k of unknown) issue(`is not a known operator (use one of ${OPERATORS.join(", ")}, or all / any / not)`, [...path, k]);
  const ops = keys.filter((k) => (OPERATORS as readonly string[]).includes(k));
  if (ops.length !== 1) {
    issue(`a condition needs exactly one operator (${OPERATORS.join(", ")}); found ${ops.length === 0 ? "none" : ops.join(", ")}`);
    return;
  }
  const op = ops[0] as (typeof OPERATORS)[number];
  const operand = cond[op];
  if ((op === "gt" || op === "gte" || op === "lt" || op === "lte") && (typeof operand !== "number" || !Number.isFinite(operand))) {
    issue("must be a finite number", [...path, op]);
  }
  if (op === "in" && !Array.isArray(operand)) issue("must be a list of values", [...path, op]);
  if (op === "exists" && typeof operand !== "boolean") issue("must be true or false", [...path, op]);
}

const approvalRule = z.strictObject({
  tool: name.optional(),
  class: governedClass.optional(),
  when: z.unknown().optional(),
  reason: name.optional(),
}).superRefine((rule, ctx) => {
  if (rule.when !== undefined && typeof rule.when !== "function") checkCondition(rule.when, ctx, ["when"]);
});

const policySchema = z.strictObject({
  $schema: z.string().optional(),
  version: name.optional(),
  grants: z.array(grant, { error: "must be a list of grants" }).optional(),
  quotas: z.array(quota, { error: "must be a list of quotas" }).optional(),
  rateLimits: z.array(rateLimit, { error: "must be a list of rate limits" }).optional(),
  approvals: z.strictObject({
    ttlMs: positiveInt.optional(),
    rules: z.array(approvalRule, { error: "must be a list of approval rules" }).optional(),
  }, { error: "must be an object { ttlMs?, rules? }" }).optional(),
  nonCompensable: z.array(name, { error: "must be a list of tool names" }).optional(),
}, { error: "a policy must be a JSON object" });

/** `quotas[1].limit` */
function fieldName(path: readonly PropertyKey[]): string {
  let out = "";
  for (const part of path) out += typeof part === "number" ? `[${part}]` : out === "" ? String(part) : `.${String(part)}`;
  return out === "" ? "(the policy itself)" : out;
}

export interface PolicyProblem {
  readonly field: string;
  readonly line?: number;
  readonly column?: number;
  readonly message: string;
}

function formatProblems(source: string, problems: readonly PolicyProblem[]): string {
  const lines = problems.map((p) => `  - ${p.field}${p.line === undefined ? "" : ` (line ${p.line}, column ${p.column ?? 1})`}: ${p.message}`);
  return `the policy ${source} is not valid (${problems.length} problem${problems.length === 1 ? "" : "s"}); no call was run under it:\n${lines.join("\n")}`;
}

export function policyError(source: string, problems: readonly PolicyProblem[]): EffectgateError {
  return new EffectgateError("EG_BAD_POLICY", formatProblems(source, problems));
}

/** Checks `value` against the policy schema; throws EG_BAD_POLICY naming every bad field. */
export function parsePolicy(value: unknown, source = "object", locate?: Locate): Policy {
  const parsed = policySchema.safeParse(value);
  if (parsed.success) return parsed.data as Policy;
  const problems: PolicyProblem[] = [];
  for (const issue of parsed.error.issues) {
    const paths: { path: PropertyKey[]; message: string }[] =
      issue.code === "unrecognized_keys"
        ? issue.keys.map((k) => ({ path: [...issue.path, k], message: "is not a known field" }))
        : [{ path: [...issue.path], message: issue.message }];
    for (const { path, message } of paths) {
      const at = locate?.(path);
      problems.push({ field: fieldName(path), ...(at ? { line: at.line, column: at.column } : {}), message });
    }
  }
  throw policyError(source, problems);
}
