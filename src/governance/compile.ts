/**
 * A policy checked against the gate's tools and turned into the checks the pipeline asks.
 * Tool names the policy mentions must be tools of the gate (a misspelt name in an approval
 * rule would silently let calls through), and rule ids must be unique.
 */
import { messageOf } from "../core/errors.js";
import { sha256Hex, canonicalJson } from "../core/keys.js";
import type { AnyTool } from "../core/tool.js";
import { compileRate, type CompiledRate } from "./breakers.js";
import { describeCondition, holds } from "./conditions.js";
import { compileGrants, type GrantCheck } from "./grants.js";
import { DEFAULT_APPROVAL_TTL_MS, type Policy } from "./policy.js";
import { loadPolicyFile } from "./policy-file.js";
import { parsePolicy, policyError, type PolicyProblem } from "./policy-schema.js";
import { compileQuota, type CompiledQuota } from "./quotas.js";
import { describeSelector, selects } from "./rules.js";

export interface CompiledPolicy {
  /** Where the policy came from, for messages: a file path, "policy object", or "no policy". */
  readonly source: string;
  readonly version: string;
  readonly ttlMs: number;
  readonly isGranted: GrantCheck;
  readonly quotas: readonly CompiledQuota[];
  readonly rates: readonly CompiledRate[];
  /** Why this call needs a person's approval; empty when it does not. */
  approvalReasons(tool: AnyTool, input: unknown): string[];
  isNonCompensable(tool: string): boolean;
  /** Whether any approval rule or non-compensable tool is declared (beyond destructive tools, which always need approval). */
  readonly hasApprovalRules: boolean;
}

export function compilePolicy(given: Policy | string | undefined, tools: ReadonlyMap<string, AnyTool>): CompiledPolicy {
  const source = given === undefined ? "no policy" : typeof given === "string" ? given : "policy object";
  const policy = given === undefined ? {} : typeof given === "string" ? loadPolicyFile(given) : parsePolicy(given, "policy object");
  checkAgainstTools(policy, tools, source);

  const quotas = (policy.quotas ?? []).map(compileQuota);
  const rates = (policy.rateLimits ?? []).map(compileRate);
  const problems: PolicyProblem[] = [];
  const unique = (kind: string, ids: readonly string[]) => ids.forEach((id, i) => {
    if (ids.indexOf(id) !== i) problems.push({ field: `${kind}[${i}].id`, message: `two ${kind} share the id ${JSON.stringify(id)}; give one of them its own "id"` });
  });
  unique("quotas", quotas.map((q) => q.id));
  unique("rateLimits", rates.map((r) => r.id));
  if (problems.length > 0) throw policyError(source, problems);

  const nonCompensable = new Set(policy.nonCompensable ?? []);
  const rules = policy.approvals?.rules ?? [];
  return {
    source,
    version: policy.version ?? (given === undefined ? "none" : `sha256:${sha256Hex(canonicalJson(withFunctionsAsText(policy))).slice(0, 16)}`),
    ttlMs: policy.approvals?.ttlMs ?? DEFAULT_APPROVAL_TTL_MS,
    isGranted: compileGrants(policy.grants),
    quotas,
    rates,
    approvalReasons(tool, input) {
      if (tool.effect === "read") return [];
      const reasons: string[] = [];
      if (tool.effect === "destructive") reasons.push("destructive tool: every call needs approval");
      if (nonCompensable.has(tool.name)) reasons.push("non-compensable: its effect cannot be undone");
      rules.forEach((rule, i) => {
        if (!selects(rule, tool)) return;
        if (rule.when === undefined) {
          reasons.push(rule.reason ?? `approval rule approvals.rules[${i}]: every call of ${describeSelector(rule)}`);
        } else if (typeof rule.when === "function") {
          let verdict: boolean | string;
          try {
            verdict = rule.when(input) === true;
          } catch (err) {
            // A predicate that fails asks a person rather than letting the call through.
            verdict = `its condition failed (${messageOf(err)}), so a person decides`;
          }
          if (verdict !== false) reasons.push(rule.reason ?? `approval rule approvals.rules[${i}]: ${verdict === true ? "its condition holds" : verdict}`);
        } else if (holds(rule.when, input)) {
          reasons.push(rule.reason ?? `approval rule approvals.rules[${i}]: ${describeCondition(rule.when)}`);
        }
      });
      return reasons;
    },
    isNonCompensable: (tool) => nonCompensable.has(tool),
    hasApprovalRules: rules.length > 0 || nonCompensable.size > 0,
  };
}

function checkAgainstTools(policy: Policy, tools: ReadonlyMap<string, AnyTool>, source: string): void {
  const problems: PolicyProblem[] = [];
  const known = [...tools.keys()].join(", ") || "none";
  const check = (field: string, name: string | undefined, allowStar = false) => {
    if (name === undefined || (allowStar && name === "*")) return;
    const tool = tools.get(name);
    if (!tool) problems.push({ field, message: `there is no tool named ${JSON.stringify(name)} in this gate (tools: ${known})` });
    else if (tool.effect === "read") problems.push({ field, message: `${name} is a read tool; reads are never governed, so this rule would do nothing` });
  };
  policy.grants?.forEach((g, i) => g.tools?.forEach((t, j) => check(`grants[${i}].tools[${j}]`, t, true)));
  policy.quotas?.forEach((q, i) => check(`quotas[${i}].tool`, q.tool));
  policy.rateLimits?.forEach((r, i) => check(`rateLimits[${i}].tool`, r.tool));
  policy.approvals?.rules?.forEach((r, i) => check(`approvals.rules[${i}].tool`, r.tool));
  policy.nonCompensable?.forEach((t, i) => check(`nonCompensable[${i}]`, t));
  if (problems.length > 0) throw policyError(source, problems);
}

function withFunctionsAsText(value: unknown): unknown {
  return JSON.parse(JSON.stringify(value, (_key, v: unknown) => (typeof v === "function" ? `function:${String(v)}` : v))) as unknown;
}
