/**
 * Rate breakers: more than `limit` governed calls within `windowMs` in one task, agent or
 * tenant opens a breaker for that scope. While it is open every write and destructive call in
 * the scope is refused (the loop is the problem, not one tool), and an operator alert is
 * raised once, when it opens. Only an operator closes it (`effectgate breaker close ID`).
 * Each call counts once, however often it is replayed.
 */
import type { Scope } from "../core/keys.js";
import type { AnyTool } from "../core/tool.js";
import type { RateCount } from "../contracts/governance.js";
import type { RateLimitRule } from "./policy.js";
import { describeSelector, selectorId, selects } from "./rules.js";
import { scopeKey } from "./scopes.js";

export interface CompiledRate {
  readonly id: string;
  readonly rule: RateLimitRule;
  /** "at most 10 calls of destructive tools per task in 60 s" */
  readonly description: string;
}

export function compileRate(rule: RateLimitRule): CompiledRate {
  const id = rule.id ?? `${rule.per}/${selectorId(rule)}/${rule.windowMs}ms`;
  return { id, rule, description: `at most ${rule.limit} call${rule.limit === 1 ? "" : "s"} of ${describeSelector(rule)} per ${rule.per} in ${seconds(rule.windowMs)}` };
}

export function seconds(ms: number): string {
  return ms % 1000 === 0 ? `${ms / 1000} s` : `${ms} ms`;
}

/** The windows this call counts in. */
export function planRates(rates: readonly CompiledRate[], tool: AnyTool, scope: Scope): RateCount[] {
  return rates.filter((r) => selects(r.rule, tool)).map((rate) => {
    const where = scopeKey(rate.rule.per, scope);
    return { breaker: `${rate.id}@${where}`, scope: where, limit: rate.rule.limit, windowMs: rate.rule.windowMs };
  });
}
