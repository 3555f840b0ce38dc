/**
 * Quotas: at most N calls, or at most a total of one numeric input field, per task, session,
 * agent or tenant. The gate peeks before asking for approval (no person is asked about a call
 * that cannot run) and charges atomically, once per call, right before the claim.
 *
 * A charged quota is never given back, not even by a call that then fails: a failure does
 * not prove that nothing happened downstream, and a loop of failing calls must be stopped too.
 */
import type { Scope } from "../core/keys.js";
import type { AnyTool } from "../core/tool.js";
import { fieldValue } from "./conditions.js";
import type { QuotaCharge } from "../contracts/governance.js";
import type { QuotaRule } from "./policy.js";
import { describeSelector, selectorId, selects } from "./rules.js";
import { describeScope, scopeKey } from "./scopes.js";

export interface CompiledQuota {
  readonly id: string;
  readonly rule: QuotaRule;
  /** "at most 500 of amount per task for charge_card" */
  readonly description: string;
}

export function compileQuota(rule: QuotaRule): CompiledQuota {
  const id = rule.id ?? `${rule.per}/${selectorId(rule)}/${rule.sum === undefined ? "count" : `sum:${rule.sum}`}`;
  const what = rule.sum === undefined ? `${rule.limit} call${rule.limit === 1 ? "" : "s"} of ${describeSelector(rule)}` : `a total ${rule.sum} of ${rule.limit} for ${describeSelector(rule)}`;
  return { id, rule, description: `at most ${what} per ${rule.per}` };
}

export interface QuotaPlan {
  readonly charges: readonly QuotaCharge[];
  /** For messages: which quota each counter belongs to, and where it counts. */
  readonly about: ReadonlyMap<string, { readonly quota: CompiledQuota; readonly where: string }>;
}

/** The counters this call charges, or why its input cannot be charged. */
export function planQuotas(quotas: readonly CompiledQuota[], tool: AnyTool, input: unknown, scope: Scope): QuotaPlan | { problem: string } {
  const charges: QuotaCharge[] = [];
  const about = new Map<string, { quota: CompiledQuota; where: string }>();
  for (const quota of quotas) {
    if (!selects(quota.rule, tool)) continue;
    let amount = 1;
    if (quota.rule.sum !== undefined) {
      const value = fieldValue(input, quota.rule.sum);
      // A call without the field adds nothing to the sum.
      if (value === undefined) continue;
      if (typeof value !== "number" || !Number.isFinite(value) || value < 0) {
        return { problem: `quota ${quota.id} sums the input field ${quota.rule.sum}, but this call's ${quota.rule.sum} is ${JSON.stringify(value)}; it must be a number ≥ 0` };
      }
      amount = value;
    }
    const counter = `${quota.id}@${scopeKey(quota.rule.per, scope)}`;
    charges.push({ counter, limit: quota.rule.limit, amount });
    about.set(counter, { quota, where: describeScope(quota.rule.per, scope) });
  }
  return { charges, about };
}
