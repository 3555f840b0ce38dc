/**
 * effectgate/openai-agents: effectgate tools for the OpenAI Agents SDK (`@openai/agents` ≥ 0.14,
 * an optional peer dependency: install it yourself). See docs/adapters.md.
 *
 *   import { agentsTool } from "effectgate/openai-agents";
 *   const gate = createGate({ tools: [createTicket] });
 *   const agent = new Agent({ name: "support", tools: [agentsTool(gate, createTicket, { scope: (rc) => rc.context.scope })] });
 *
 * Each call is keyed by the SDK's call id, so resuming one saved RunState twice runs the tool once;
 * `needsApproval` is backed by effectgate's durable approvals.
 */
import { tool } from "@openai/agents";
import type { Gate } from "./root/create-gate.js";
import { agentsToolWith, type AgentsToolOptions } from "./adapters/openai-agents/tool.js";
import type { AgentsFunctionTool, AgentsToolFactory, AnyGateTool } from "./adapters/openai-agents/types.js";

export { callIdOf, interrupts, type AgentsToolOptions } from "./adapters/openai-agents/tool.js";
export { fromAgentsTool, type AgentsToolSource, type AgentsToolSpec } from "./adapters/openai-agents/wrap.js";
export type { AgentsFunctionTool, ToolCallDetails } from "./adapters/openai-agents/types.js";
export type { ScopeOf } from "./adapters/shared.js";

/** The SDK tool for an effectgate tool, keyed by the SDK's call id (the tool must also be among the gate's tools). */
export function agentsTool<C = unknown>(gate: Gate, gated: AnyGateTool, options: AgentsToolOptions<C>): AgentsFunctionTool<C> {
  return agentsToolWith(tool as unknown as AgentsToolFactory, gate, gated, options);
}
