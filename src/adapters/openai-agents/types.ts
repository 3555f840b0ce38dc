/**
 * The few OpenAI Agents SDK types the adapter names, taken from the SDK (type imports only: the
 * entry src/openai-agents.ts holds the one runtime import, `tool`).
 */
import type { FunctionTool, RunContext } from "@openai/agents";
import type { Tool } from "../../core/tool.js";

// The SDK's tool type carries its parameters' schema type; the adapter erases it, as the gate erases a tool's.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type AgentsFunctionTool<C = unknown> = FunctionTool<C, any, any>;

/** Any effectgate tool, whatever its input and result types. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type AnyGateTool = Tool<any, any>;

/** What the SDK hands `execute` beside the input: the model's call (`toolCall.callId`, `arguments`), an abort signal. */
export type ToolCallDetails = NonNullable<Parameters<FunctionTool["invoke"]>[2]>;

/** The options of the SDK's `tool()` the adapter uses. */
export interface AgentsToolDefinition {
  readonly name: string;
  readonly description: string;
  readonly parameters: unknown;
  readonly strict?: boolean;
  readonly needsApproval?: (runContext: RunContext<unknown>, input: unknown, callId?: string) => Promise<boolean>;
  readonly execute: (input: unknown, runContext?: RunContext<unknown>, details?: ToolCallDetails) => Promise<string>;
}

/** The SDK's `tool()` function, passed in by the entry so nothing under src/adapters loads the SDK. */
export type AgentsToolFactory = (definition: AgentsToolDefinition) => AgentsFunctionTool;
