/**
 * Grants: a write or destructive tool runs only if a grant matching the call's scope names it
 * or its class. With no `grants` in the policy (or no policy), the tools handed to the gate
 * are the grant. Reads are never governed.
 */
import type { Scope } from "../core/keys.js";
import type { AnyTool } from "../core/tool.js";
import type { GovernedClass, GrantRule, NamePattern } from "./policy.js";

/** Exact match, or `*` as any run of characters; an absent pattern matches anything. */
function matchesPattern(pattern: NamePattern | undefined, value: string | undefined): boolean {
  if (pattern === undefined) return true;
  if (value === undefined) return false;
  if (!pattern.includes("*")) return pattern === value;
  const regex = new RegExp(`^${pattern.split("*").map((p) => p.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")).join(".*")}$`);
  return regex.test(value);
}

export type GrantCheck = (tool: AnyTool, scope: Scope) => boolean;

export function compileGrants(rules: readonly GrantRule[] | undefined): GrantCheck {
  if (rules === undefined) return () => true;
  return (tool, scope) => {
    if (tool.effect === "read") return true;
    return rules.some((rule) =>
      matchesPattern(rule.tenant, scope.tenant) &&
      matchesPattern(rule.agent, scope.agent) &&
      matchesPattern(rule.task, scope.task) &&
      ((rule.tools ?? []).some((t) => t === "*" || t === tool.name) || (rule.classes ?? []).includes(tool.effect as GovernedClass)));
  };
}
