/** Which tools a quota, rate-limit or approval rule covers: one tool, one class, or every governed tool. */
import type { AnyTool } from "../core/tool.js";
import type { GovernedClass } from "./policy.js";

export interface ToolSelector {
  readonly tool?: string;
  readonly class?: GovernedClass;
}

export function selects(rule: ToolSelector, tool: AnyTool): boolean {
  if (tool.effect === "read") return false;
  if (rule.tool !== undefined && rule.tool !== tool.name) return false;
  if (rule.class !== undefined && rule.class !== tool.effect) return false;
  return true;
}

/** "charge_card", "destructive tools", "write and destructive tools". */
export function describeSelector(rule: ToolSelector): string {
  if (rule.tool !== undefined) return rule.tool;
  if (rule.class !== undefined) return `${rule.class} tools`;
  return "write and destructive tools";
}

/** The default id part naming what a rule covers. */
export function selectorId(rule: ToolSelector): string {
  return rule.tool ?? rule.class ?? "all";
}
