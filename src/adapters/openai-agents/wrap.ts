/**
 * A tool the user already wrote for the OpenAI Agents SDK (the options they pass to `tool()`),
 * made an effectgate tool by giving its effect class (and optionally a probe, a dry run…). The
 * effectgate tool goes to `createGate({ tools })`; `agentsTool` then hands the SDK a tool whose
 * execute runs the user's own `execute(input, runContext, details)` through the gate.
 *
 * The user's execute is called directly, not through the SDK's `invoke`, because the SDK turns a
 * thrown error into an ordinary tool output: the gate must see the throw to know the outcome is
 * unknown (a timeout after the charge) rather than a success.
 */
import type { RunContext } from "@openai/agents";
import { defineTool, type Tool, type ToolSpec } from "../../core/tool.js";
import type { StandardSchemaV1 } from "../../core/standard-schema.js";
import { anyJsonObject, isStandardSchema } from "../shared.js";
import type { ToolCallDetails } from "./types.js";

/** The user's SDK tool options, as given to the SDK's `tool()`. */
export interface AgentsToolSource<I = unknown> {
  readonly name: string;
  readonly description: string;
  /** A zod object (validated by the gate as the tool's input) or a JSON schema (then any JSON object passes the gate). */
  readonly parameters: unknown;
  readonly strict?: boolean;
  execute(input: I, runContext?: RunContext<unknown>, details?: ToolCallDetails): unknown;
}

/** What effectgate needs to know about the tool: its effect class and the hooks it has. */
export type AgentsToolSpec = Omit<ToolSpec<StandardSchemaV1, unknown>, "name" | "description" | "input" | "execute">;

/** The SDK definition behind an effectgate tool made by fromAgentsTool. */
const sources = new WeakMap<object, AgentsToolSource<never>>();

export function sourceOf(tool: object): AgentsToolSource<never> | undefined {
  return sources.get(tool);
}

/**
 * The effectgate tool for an SDK tool's options. On a recovery in a fresh process (after a probe
 * said the effect is absent), the gate runs the user's execute without the SDK's run context.
 */
export function fromAgentsTool<I>(source: AgentsToolSource<I>, spec: AgentsToolSpec): Tool {
  const input = isStandardSchema(source.parameters) ? source.parameters : anyJsonObject;
  const tool = defineTool({
    ...spec,
    name: source.name,
    description: source.description,
    input,
    execute: (value: unknown) => source.execute(value as I, undefined, undefined),
  });
  sources.set(tool, source);
  return tool;
}
