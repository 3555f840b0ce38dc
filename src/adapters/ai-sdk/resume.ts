/**
 * Resuming after a crash. The AI SDK keeps a step's tool calls in memory until the step ends, so
 * an app checkpoints the assistant message that holds them before they run (in
 * `experimental_onToolCallStart` (ai 6) / `onToolExecutionStart` (ai 7), see docs/adapters.md).
 * A fresh process answers those calls with `answerToolCalls`: each goes through the gate under
 * its own `toolCallId`, so an effect that already happened is reused (replayed, or settled by its
 * probe), never made again. Append the returned `tool` message and call the SDK again.
 */
import { ToolCallRefused } from "../shared.js";
import { partsOf, type AiSdkTool } from "./types.js";

/** A `tool-result` part as the SDK's model messages hold one. */
export interface AiSdkToolResultPart {
  readonly type: "tool-result";
  readonly toolCallId: string;
  readonly toolName: string;
  readonly output: { readonly type: "json"; readonly value: unknown } | { readonly type: "error-text"; readonly value: string };
}

/**
 * Answers every `tool-call` part of `assistant` (a checkpointed assistant message) with the given
 * adapter tools, as one `tool` message. `messages`/`context`: what the SDK would have passed the
 * tools (the conversation before the assistant message; the run's context).
 */
export async function answerToolCalls(
  tools: Readonly<Record<string, AiSdkTool>>,
  assistant: unknown,
  run: { readonly messages: readonly unknown[]; readonly context?: unknown; readonly abortSignal?: AbortSignal },
): Promise<{ role: "tool"; content: AiSdkToolResultPart[] }> {
  const calls = partsOf(assistant).filter((p) => p.type === "tool-call") as unknown as { toolCallId: string; toolName: string; input: unknown }[];
  const content = await Promise.all(calls.map(async (call): Promise<AiSdkToolResultPart> => {
    const tool = tools[call.toolName];
    if (!tool) return { type: "tool-result", toolCallId: call.toolCallId, toolName: call.toolName, output: { type: "error-text", value: `no tool named ${call.toolName}` } };
    try {
      const options = { toolCallId: call.toolCallId, messages: run.messages, context: run.context, experimental_context: run.context, ...(run.abortSignal ? { abortSignal: run.abortSignal } : {}) };
      let value: unknown = await tool.execute(call.input, options);
      if (typeof value === "object" && value !== null && Symbol.asyncIterator in value) {
        for await (const chunk of value as AsyncIterable<unknown>) value = chunk;
      }
      return { type: "tool-result", toolCallId: call.toolCallId, toolName: call.toolName, output: { type: "json", value } };
    } catch (err) {
      const text = err instanceof ToolCallRefused || err instanceof Error ? err.message : String(err);
      return { type: "tool-result", toolCallId: call.toolCallId, toolName: call.toolName, output: { type: "error-text", value: text } };
    }
  }));
  return { role: "tool", content };
}
