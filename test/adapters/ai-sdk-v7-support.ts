/** Scripted models for the ai 7 tests: the SDK's own MockLanguageModelV4 (from `ai/test` of ai 7), answering step by step. */
import { simulateReadableStream } from "ai-v7";
import { MockLanguageModelV4 } from "ai-v7/test";

type Content = Awaited<ReturnType<MockLanguageModelV4["doGenerate"]>>["content"][number];

const usage = {
  inputTokens: { total: 1, noCache: 1, cacheRead: undefined, cacheWrite: undefined },
  outputTokens: { total: 1, text: 1, reasoning: undefined },
};

export function toolCalls(...calls: { id: string; name: string; input: unknown }[]): Content[] {
  return calls.map((c): Content => ({ type: "tool-call", toolCallId: c.id, toolName: c.name, input: JSON.stringify(c.input) }));
}

export const text = (value: string): Content[] => [{ type: "text", text: value }];

/**
 * The script both models follow: the nth call gets `steps[n]` (the last one again once they run
 * out), ending with "tool-calls" when it asks for tools and with "stop" otherwise.
 */
function stepper(steps: Content[][]) {
  let n = 0;
  return () => {
    const content = steps[Math.min(n++, steps.length - 1)] ?? [];
    const finishReason = { unified: content.some((c) => c.type === "tool-call") ? "tool-calls" as const : "stop" as const, raw: undefined };
    return { content, finishReason };
  };
}

/** A model for generateText that follows the script. */
export function scriptedModel(steps: Content[][]): MockLanguageModelV4 {
  const next = stepper(steps);
  return new MockLanguageModelV4({ doGenerate: async () => ({ ...next(), usage, warnings: [] }) });
}

type StreamPart = Awaited<ReturnType<MockLanguageModelV4["doStream"]>>["stream"] extends ReadableStream<infer P> ? P : never;

/**
 * The same script for streamText: each step is streamed as the SDK's stream parts (a text as its
 * start, one delta and end; a tool call as one part).
 */
export function streamingModel(steps: Content[][]): MockLanguageModelV4 {
  const next = stepper(steps);
  return new MockLanguageModelV4({
    doStream: async () => {
      const { content, finishReason } = next();
      const chunks: StreamPart[] = [{ type: "stream-start", warnings: [] }];
      content.forEach((c, i) => {
        if (c.type === "text") chunks.push({ type: "text-start", id: `t${i}` }, { type: "text-delta", id: `t${i}`, delta: c.text }, { type: "text-end", id: `t${i}` });
        else chunks.push(c as StreamPart);
      });
      chunks.push({ type: "finish", finishReason, usage });
      return { stream: simulateReadableStream({ chunks }) };
    },
  });
}
