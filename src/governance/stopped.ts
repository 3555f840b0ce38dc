/**
 * Which write and destructive tools governance would refuse for a scope right now, before any
 * call is made: an SDK adapter drops them from the tools it offers the model (AI SDK
 * `prepareStep`), so the model is not invited to call a tool that cannot run. Read only: nothing
 * is counted or charged. Quotas are not listed (they depend on each call's input).
 */
import type { Scope } from "../core/keys.js";
import type { AnyTool } from "../core/tool.js";
import type { Breaker, GovernanceStore, KillSwitch } from "../contracts/governance.js";
import type { GrantCheck } from "./grants.js";
import { breakerOpenMessage, killSwitchMessage, notGrantedMessage } from "./messages.js";
import { breakerScopes } from "./scopes.js";

/** A tool that would be refused for this scope, why, and the refusal its call would get. */
export interface StoppedTool {
  readonly tool: string;
  readonly reason: "kill_switch" | "breaker_open" | "not_granted";
  /** The `EG_…` refusal a call of this tool would be answered with now. */
  readonly message: string;
}

export interface StopSources {
  readonly store: GovernanceStore | undefined;
  readonly isGranted: GrantCheck;
  readonly policySource: string;
}

/** The stops that apply to a scope, read once (one kill-switch read, one list of open breakers). */
export async function stopsFor(sources: StopSources, scope: Scope): Promise<{ killSwitch: KillSwitch | undefined; breaker: Breaker | undefined }> {
  if (!sources.store) return { killSwitch: undefined, breaker: undefined };
  const killSwitch = await sources.store.activeKillSwitch(scope.tenant, scope.agent);
  if (killSwitch) return { killSwitch, breaker: undefined };
  const mine = new Set(breakerScopes(scope));
  const breaker = (await sources.store.listBreakers()).find((b) => b.state === "open" && b.tenant === scope.tenant && mine.has(b.scope));
  return { killSwitch, breaker };
}

/** The refusal governance would give this tool in this scope for any input, if it stops it now. */
export function stopOf(sources: StopSources, tool: AnyTool, scope: Scope, stops: Awaited<ReturnType<typeof stopsFor>>): StoppedTool | undefined {
  if (tool.effect === "read") return undefined;
  if (stops.killSwitch) return { tool: tool.name, reason: "kill_switch", message: killSwitchMessage(tool, stops.killSwitch) };
  if (!sources.isGranted(tool, scope)) return { tool: tool.name, reason: "not_granted", message: notGrantedMessage(tool, scope, sources.policySource) };
  if (stops.breaker) return { tool: tool.name, reason: "breaker_open", message: breakerOpenMessage(tool, stops.breaker) };
  return undefined;
}

export async function stoppedTools(sources: StopSources, tools: Iterable<AnyTool>, scope: Scope): Promise<StoppedTool[]> {
  const stops = await stopsFor(sources, scope);
  const stopped: StoppedTool[] = [];
  for (const tool of tools) {
    const stop = stopOf(sources, tool, scope, stops);
    if (stop) stopped.push(stop);
  }
  return stopped;
}
