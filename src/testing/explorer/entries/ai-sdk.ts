/**
 * The AI SDK entry: each call reaches the gate the way `generateText` (ai 6) runs a tool. The
 * SDK's own MockLanguageModelV3 answers with the call as a tool call; the SDK validates its input
 * with the tool's schema, asks the adapter's `needsApproval`, and runs `execute` with its options
 * (toolCallId, messages, abortSignal). A call a person must approve first comes back as a
 * `tool-approval-request`; the client approves it in the SDK and sends the next turn, in which
 * the SDK runs the approved call (the gate still releases it only on effectgate's own durable
 * approval, which the schedule's person decides on the ledger). What the model is given (the tool
 * result or the tool error) is the answer.
 *
 * Loaded only when a schedule asks for the "ai-sdk" entry: it imports `ai` (an optional peer).
 */
import { generateText, type ModelMessage, type ToolSet } from "ai";
import { MockLanguageModelV3 } from "ai/test";
import { aiSdkTool } from "../../../ai-sdk.js";
import { EffectgateError } from "../../../core/errors.js";
import { errorResult, renderResult, resultBlock, type ToolResultBlock, type ToolUseBlock } from "../../../core/blocks.js";
import { toJson } from "../../../core/json.js";
import type { Scope } from "../../../core/keys.js";
import type { StandardSchemaV1 } from "../../../core/standard-schema.js";
import type { Gate } from "../../../root/create-gate.js";
import type { AskEntry } from "./entry.js";

const USAGE = {
  inputTokens: { total: 1, noCache: 1, cacheRead: undefined, cacheWrite: undefined },
  outputTokens: { total: 1, text: 1, reasoning: undefined },
};

/** A model whose one answer is `content` (tool calls end the step with "tool-calls"). */
function modelSaying(content: readonly ({ type: "tool-call"; toolCallId: string; toolName: string; input: string } | { type: "text"; text: string })[]) {
  const calls = content.some((c) => c.type === "tool-call");
  return new MockLanguageModelV3({
    doGenerate: async () => ({ content: [...content], finishReason: { unified: calls ? "tool-calls" : "stop", raw: undefined }, usage: USAGE, warnings: [] }),
  });
}

/** The adapter's tools, one set per gate and scope (a worker's gate lives as long as its process). */
const toolsOf = new WeakMap<Gate, Map<string, ToolSet>>();

function tools(gate: Gate, scope: Scope): ToolSet {
  let byScope = toolsOf.get(gate);
  if (!byScope) toolsOf.set(gate, (byScope = new Map<string, ToolSet>()));
  const id = `${scope.tenant}\u0001${scope.task}`;
  let set = byScope.get(id);
  if (!set) {
    set = Object.fromEntries([...gate.tools.keys()].map((name) => {
      const sdkTool = aiSdkTool(gate, name, { scope: () => scope });
      return [name, { ...sdkTool, inputSchema: describedAsObject(sdkTool.inputSchema as StandardSchemaV1) }];
    }));
    byScope.set(id, set);
  }
  return set;
}

/**
 * The tool's Standard Schema with a JSON Schema for the SDK to describe the tool to the model by
 * (the explorer's simulated tools validate by hand and have none; the mock model reads none). The
 * SDK still validates each call's input with the schema's own `validate`.
 */
function describedAsObject(schema: StandardSchemaV1): StandardSchemaV1 {
  const jsonSchema = () => ({ type: "object", additionalProperties: true });
  return { "~standard": { ...schema["~standard"], jsonSchema: { input: jsonSchema, output: jsonSchema } } as StandardSchemaV1["~standard"] };
}

interface Part {
  readonly type: string;
  readonly toolCallId?: string;
  /** A tool-approval-request names its call here. */
  readonly toolCall?: { readonly toolCallId?: string };
  readonly approvalId?: string;
  readonly output?: unknown;
  readonly error?: unknown;
}

/** What the model reads for one tool output part of a tool message (`tool-result` with its ToolResultOutput). */
function fromModelOutput(id: string, output: unknown): ToolResultBlock {
  const o = output as { type?: string; value?: unknown; reason?: string } | undefined;
  switch (o?.type) {
    case "text":
      return resultBlock(id, String(o.value), false);
    case "json":
      return resultBlock(id, renderResult(toJson(o.value)), false);
    case "error-text":
      return resultBlock(id, String(o.value), true);
    case "error-json":
      return resultBlock(id, renderResult(toJson(o.value)), true);
    default:
      return errorResult(id, "EG_BAD_CONTENT", `the AI SDK gave the model an output the explorer cannot read: ${JSON.stringify(output)?.slice(0, 200)}`);
  }
}

export const aiSdkEntry: AskEntry = {
  kind: "ask",
  name: "ai-sdk",
  async answer(gate, call, scope) {
    try {
      return await turns(gate, call, scope);
    } catch (err) {
      // The SDK rejects the whole generateText when needsApproval throws (a ledger fault in
      // gate.approvalFor): the application sees effectgate's error and sends the turn again.
      if (err instanceof EffectgateError) return resultBlock(call.id, err.message, true);
      throw err;
    }
  },
};

async function turns(gate: Gate, call: ToolUseBlock, scope: Scope): Promise<ToolResultBlock> {
  {
    const set = tools(gate, scope);
    const toolCall = { type: "tool-call" as const, toolCallId: call.id, toolName: call.name, input: JSON.stringify(call.input) };
    const prompt: ModelMessage[] = [{ role: "user", content: "go" }];
    const first = await generateText({ model: modelSaying([toolCall]), tools: set, messages: prompt });
    const parts = first.content as readonly Part[];
    const own = parts.find((p) => (p.toolCallId ?? p.toolCall?.toolCallId) === call.id && (p.type === "tool-result" || p.type === "tool-error" || p.type === "tool-approval-request"));
    if (own?.type === "tool-result") return resultBlock(call.id, typeof own.output === "string" ? own.output : renderResult(toJson(own.output)), false);
    if (own?.type === "tool-error") return resultBlock(call.id, own.error instanceof Error ? own.error.message : String(own.error), true);
    if (own?.type !== "tool-approval-request" || own.approvalId === undefined) {
      return errorResult(call.id, "EG_BAD_CONTENT", `generateText gave no result for ${call.id} (its parts: ${parts.map((p) => p.type).join(", ")})`);
    }
    // The client approves in the SDK and sends the next turn: the SDK runs the approved call first.
    const approved: ModelMessage = { role: "tool", content: [{ type: "tool-approval-response", approvalId: own.approvalId, approved: true }] };
    const second = await generateText({ model: modelSaying([{ type: "text", text: "done" }]), tools: set, messages: [...prompt, ...first.response.messages, approved] });
    for (const message of second.response.messages) {
      if (message.role !== "tool") continue;
      for (const part of message.content as readonly Part[]) {
        if (part.type === "tool-result" && part.toolCallId === call.id) return fromModelOutput(call.id, part.output);
      }
    }
    return errorResult(call.id, "EG_BAD_CONTENT", `the approved turn of generateText gave no result for ${call.id}`);
  }
}
