/** Scripted models for the AI SDK tests: the SDK's own MockLanguageModelV3 (ai 6), answering step by step. */
import { MockLanguageModelV3 } from "ai/test";
import type { LanguageModelV3Content } from "@ai-sdk/provider";

const usage = {
  inputTokens: { total: 1, noCache: 1, cacheRead: undefined, cacheWrite: undefined },
  outputTokens: { total: 1, text: 1, reasoning: undefined },
};

export function toolCalls(...calls: { id: string; name: string; input: unknown }[]) {
  return calls.map((c): LanguageModelV3Content => ({ type: "tool-call", toolCallId: c.id, toolName: c.name, input: JSON.stringify(c.input) }));
}

/**
 * A model that answers its nth call with `steps[n]` (the last one again once they run out):
 * tool calls end the step with "tool-calls", anything else with "stop".
 */
export function scriptedModel(steps: LanguageModelV3Content[][]) {
  let n = 0;
  return new MockLanguageModelV3({
    doGenerate: async () => {
      const content = steps[Math.min(n++, steps.length - 1)] ?? [];
      const calls = content.some((c) => c.type === "tool-call");
      return { content, finishReason: { unified: calls ? "tool-calls" : "stop", raw: undefined }, usage, warnings: [] };
    },
  });
}

export const text = (value: string): LanguageModelV3Content[] => [{ type: "text", text: value }];
