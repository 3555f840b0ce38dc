/** A tool's effective timeout, retry and probe settings: its own, else the gate's, else its effect class's default. */
import type { EffectClass } from "../core/effect-class.js";
import { DEFAULT_PROBE, DEFAULT_RETRY, DEFAULT_TIMEOUT_MS, type ProbePolicy, type RetryPolicy } from "../core/policies.js";
import type { AnyTool } from "../core/tool.js";
import type { ToolPolicy } from "./runtime.js";

export interface GatePolicies {
  readonly timeoutMs?: number;
  readonly retry?: Partial<Record<EffectClass, Partial<RetryPolicy>>>;
  readonly probe?: Partial<ProbePolicy>;
}

export function policyFor(gate: GatePolicies, tool: AnyTool): ToolPolicy {
  return {
    timeoutMs: tool.timeoutMs ?? gate.timeoutMs ?? DEFAULT_TIMEOUT_MS,
    retry: { ...DEFAULT_RETRY[tool.effect], ...gate.retry?.[tool.effect], ...tool.retry },
    probe: { ...DEFAULT_PROBE, ...gate.probe, ...tool.probeBudget },
  };
}
