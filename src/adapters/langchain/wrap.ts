/**
 * A tool the user already wrote for LangChain (`tool(func, { name, schema })` from
 * `@langchain/core/tools`), made an effectgate tool by giving its effect class (and optionally a
 * probe, a dry run…). The effectgate tool goes to `createGate({ tools })`; `langchainTool` then
 * gives LangChain a tool of the same name whose first run calls the user's tool through the gate.
 */
import type { StructuredToolInterface } from "@langchain/core/tools";
import type { StandardSchemaV1 } from "../../core/standard-schema.js";
import { anyJsonObject, isStandardSchema } from "../shared.js";
import { defineTool, type Tool, type ToolSpec } from "../../core/tool.js";

/** What effectgate needs to know about the tool: its effect class and the hooks it has. */
export type LangChainToolSpec = Omit<ToolSpec<StandardSchemaV1, unknown>, "name" | "description" | "input" | "execute">;

const sources = new WeakMap<object, StructuredToolInterface>();

/** The LangChain tool behind an effectgate tool made by fromLangChainTool. */
export function langchainSourceOf(tool: object): StructuredToolInterface | undefined {
  return sources.get(tool);
}

/**
 * The effectgate tool for a LangChain tool. On a recovery in a fresh process (after a probe said
 * the effect is absent), the gate invokes the LangChain tool without the graph's config.
 */
export function fromLangChainTool(source: StructuredToolInterface, spec: LangChainToolSpec): Tool {
  const tool = defineTool({
    ...spec,
    name: source.name,
    description: source.description,
    input: isStandardSchema(source.schema) ? source.schema : anyJsonObject,
    execute: (value: unknown) => source.invoke(value as never),
  });
  sources.set(tool, source);
  return tool;
}
