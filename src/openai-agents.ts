/**
 * effectgate/openai-agents: effectgate tools for the OpenAI Agents SDK (`@openai/agents`, an
 * optional peer dependency: install it yourself). See docs/adapters-openai-langchain.md.
 *
 *   import { agentsTool } from "effectgate/openai-agents";
 *   const agent = new Agent({ name: "billing", tools: [agentsTool(gate, charge, { scope: (rc) => rc.context.scope })] });
 *
 * Each call is keyed by the SDK's call id, so resuming one saved RunState twice runs the tool once.
 */
import { tool } from "@openai/agents";
import type { Gate } from "./root/create-gate.js";
import { agentsToolWith, type AgentsFunctionTool, type AgentsToolFactory, type AgentsToolOptions, type AnyGateTool } from "./adapters/openai-agents.js";

export { callIdOf, type AgentsFunctionTool, type AgentsToolOptions } from "./adapters/openai-agents.js";

/** The SDK tool for an effectgate tool (which must also be among the gate's tools). */
export function agentsTool<C = unknown>(gate: Gate, gated: AnyGateTool, options: AgentsToolOptions<C>): AgentsFunctionTool<C> {
  return agentsToolWith(tool as unknown as AgentsToolFactory, gate, gated, options);
}
