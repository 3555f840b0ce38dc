/**
 * The LangChain pieces the adapter uses, handed in by the entry (src/langchain.ts) so nothing
 * under src/adapters loads LangChain at runtime: `tool` and `ToolMessage` from `@langchain/core`,
 * `interrupt` from `@langchain/langgraph`.
 */
import type { ToolMessage } from "@langchain/core/messages";
import type { StructuredToolInterface } from "@langchain/core/tools";
import type { ToolRunnableConfig } from "@langchain/core/tools";

export type { ToolRunnableConfig };

export interface LangChainKit {
  /** `tool(func, { name, description, schema })` from `@langchain/core/tools`. */
  readonly tool: (
    func: (input: unknown, config: ToolRunnableConfig) => Promise<string | ToolMessage>,
    fields: { name: string; description: string; schema: unknown },
  ) => StructuredToolInterface;
  /** `interrupt(value)` from `@langchain/langgraph`: pauses the graph until it is resumed with `Command({ resume })`. */
  readonly interrupt: (value: unknown) => unknown;
  /** `ToolInputParsingException` from `@langchain/core/tools`: LangChain's refusal of an input its schema rejects. */
  readonly ToolInputParsingException: abstract new (...args: never[]) => Error;
  /** The `ToolMessage` class from `@langchain/core/messages`. */
  readonly ToolMessage: new (fields: { content: string; tool_call_id: string; name: string; status: "success" | "error" }) => ToolMessage;
}
