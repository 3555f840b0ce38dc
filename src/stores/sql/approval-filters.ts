/**
 * The WHERE of an approvals listing or count, once for both SQL dialects: one term per filter
 * given, so each combination is its own statement. Never `(:x IS NULL OR x = :x)`: a statement
 * planned once for every value cannot use the index of a filter that may be absent. A state walks
 * approvals_by_state (migration 4), a key approvals_by_key (migration 8).
 */
import type { ApprovalCountQuery } from "../../contracts/governance.js";

/** `param` names the placeholder of each value, in the order they appear. */
export function approvalFilters(query: ApprovalCountQuery, param: (value: string) => string): string[] {
  const where: string[] = [];
  for (const column of ["state", "tenant", "key"] as const) {
    const value = query[column];
    if (value !== undefined) where.push(`${column} = ${param(value)}`);
  }
  return where;
}
