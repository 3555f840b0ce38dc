/**
 * Where governance counts: a call's task, session, agent and tenant as stable strings
 * (`task:acme/t-1`). Parts are URI-encoded so `a/b` + `c` never collides with `a` + `b/c`.
 */
import type { Scope } from "../core/keys.js";

export type ScopeLevel = "task" | "session" | "agent" | "tenant";

export function scopeKey(level: ScopeLevel, scope: Scope): string {
  const tenant = encodeURIComponent(scope.tenant);
  switch (level) {
    case "task":
      return `task:${tenant}/${encodeURIComponent(scope.task)}`;
    case "session":
      // A scope without a session is its own session: the task.
      return `session:${tenant}/${encodeURIComponent(scope.session ?? scope.task)}`;
    case "agent":
      // Calls that name no agent share one agent bucket per tenant.
      return `agent:${tenant}/${encodeURIComponent(scope.agent ?? "")}`;
    case "tenant":
      return `tenant:${tenant}`;
  }
}

/** Every scope a call belongs to that a breaker can stop: its task, its agent, its tenant. */
export function breakerScopes(scope: Scope): string[] {
  return [scopeKey("task", scope), scopeKey("agent", scope), scopeKey("tenant", scope)];
}

/** In words, for messages: "task t-1", "agent support-bot", "tenant acme". */
export function describeScope(level: ScopeLevel, scope: Scope): string {
  switch (level) {
    case "task":
      return `task ${scope.task}`;
    case "session":
      return scope.session === undefined ? `task ${scope.task} (its session)` : `session ${scope.session}`;
    case "agent":
      return scope.agent === undefined ? "calls without an agent name" : `agent ${scope.agent}`;
    case "tenant":
      return `tenant ${scope.tenant}`;
  }
}
