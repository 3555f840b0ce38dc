/**
 * The Anthropic SDK entry: each call reaches the gate through the SDK's own tool runner
 * (`client.beta.messages.toolRunner`), with the adapter's runnable tool. The Messages API is a
 * `fetch` handed to the client (no network): its first reply is the call as a `tool_use`, the
 * runner parses the input, runs the tool with its context (`toolUse`, `signal`) and turns a throw
 * into an `is_error` tool_result; the runner's next request carries that tool_result, which is
 * the answer. A call waiting for approval is answered EG_AWAITING_APPROVAL (the adapter's
 * `waitForApproval` polls on real time, so it is not used: the agent asks again instead).
 *
 * Loaded only when a schedule asks for the "anthropic" entry: it imports `@anthropic-ai/sdk`.
 */
import Anthropic from "@anthropic-ai/sdk";
import { anthropicTool, type AnthropicRunnableTool } from "../../../anthropic.js";
import { EffectgateError } from "../../../core/errors.js";
import { errorResult, resultBlock, type ToolResultBlock, type ToolUseBlock } from "../../../core/blocks.js";
import type { Scope } from "../../../core/keys.js";
import type { Gate } from "../../../root/create-gate.js";
import type { AskEntry } from "./entry.js";

const INPUT_SCHEMA = { type: "object", properties: { ref: { type: "string" }, amount: { type: "number" } }, required: ["ref", "amount"] };

const toolsOf = new WeakMap<Gate, Map<string, AnthropicRunnableTool>>();

function runnable(gate: Gate, name: string, scope: Scope): AnthropicRunnableTool {
  let byKey = toolsOf.get(gate);
  if (!byKey) toolsOf.set(gate, (byKey = new Map<string, AnthropicRunnableTool>()));
  const id = `${scope.tenant}\u0001${scope.task}\u0001${name}`;
  let made = byKey.get(id);
  if (!made) byKey.set(id, (made = anthropicTool(gate, name, { scope: () => scope, jsonSchemas: { [name]: INPUT_SCHEMA } })));
  return made;
}

interface SentBlock {
  readonly type: string;
  readonly tool_use_id?: string;
  readonly content?: unknown;
  readonly is_error?: boolean;
}

function message(id: string, content: readonly Record<string, unknown>[]) {
  const calls = content.some((b) => b.type === "tool_use");
  return {
    id, type: "message", role: "assistant", model: "claude-explorer", content,
    stop_reason: calls ? "tool_use" : "end_turn", stop_sequence: null, usage: { input_tokens: 1, output_tokens: 1 },
  };
}

/** The text of tool_result content: a string, or its text blocks joined. */
function textOf(content: unknown): string {
  if (typeof content === "string") return content;
  if (Array.isArray(content)) return content.map((b: { type?: string; text?: string }) => (b.type === "text" ? b.text ?? "" : JSON.stringify(b))).join("");
  return JSON.stringify(content);
}

export const anthropicEntry: AskEntry = {
  kind: "ask",
  name: "anthropic",
  async answer(gate, call, scope) {
    try {
      return await runOnce(gate, call, scope);
    } catch (err) {
      if (err instanceof EffectgateError) return resultBlock(call.id, err.message, true);
      throw err;
    }
  },
};

/** One ask in flight: the call the Messages API answers with, and the tool_result the runner sent for it. */
interface Asked {
  readonly call: ToolUseBlock;
  answered?: ToolResultBlock;
}

const asked = new Map<string, Asked>();
let asks = 0;
let replies = 0;

/** The ask each reply of the fake API continues (the runner's next turn names it as the thread's previous message). */
const byReply = new Map<string, Asked>();

/**
 * The Messages API (a `fetch` handed to the SDK): a turn that starts a conversation is answered
 * with its ask's call as a tool_use; the runner's next turn (continuing that reply's thread, or
 * with the whole history) carries the tool_result for it, which is kept, and ends the turn.
 */
async function messagesApi(_url: string | URL | Request, init?: RequestInit): Promise<Response> {
  const sent = JSON.parse(typeof init?.body === "string" ? init.body : "{}") as { messages?: { role: string; content: unknown }[]; thread?: { previous_message_id?: string } };
  const messages = sent.messages ?? [];
  const previous = sent.thread?.previous_message_id;
  const starts = asked.get(textOf(messages[0]?.content));
  const id = `msg_explorer_${++replies}`;
  let content: Record<string, unknown>[] = [{ type: "text", text: "done" }];
  if (starts && messages.length === 1 && previous === undefined) {
    byReply.set(id, starts);
    content = [{ type: "tool_use", id: starts.call.id, name: starts.call.name, input: starts.call.input }];
  } else {
    const ask = previous === undefined ? starts : byReply.get(previous);
    if (previous !== undefined) byReply.delete(previous);
    const blocks = messages.flatMap((m) => (m.role === "user" && Array.isArray(m.content) ? (m.content as SentBlock[]) : []));
    const result = ask && blocks.find((b) => b.type === "tool_result" && b.tool_use_id === ask.call.id);
    if (ask && result) ask.answered = resultBlock(ask.call.id, readCode(textOf(result.content)), result.is_error === true);
  }
  return new Response(JSON.stringify(message(id, content)), { status: 200, headers: { "content-type": "application/json", "request-id": `req_${id}` } });
}

/** The runner writes a thrown error as `Error: <message>`; the model reads effectgate's code right after it. */
function readCode(text: string): string {
  return /^Error: EG_[A-Z_]+: /.test(text) ? text.slice("Error: ".length) : text;
}

let client: Anthropic | undefined;

async function runOnce(gate: Gate, call: ToolUseBlock, scope: Scope): Promise<ToolResultBlock> {
  client ??= new Anthropic({ apiKey: "explorer", baseURL: "http://explorer.invalid", fetch: messagesApi, maxRetries: 0 });
  const id = `go #${++asks}`;
  const ask: Asked = { call };
  asked.set(id, ask);
  try {
    const runner = client.beta.messages.toolRunner({
      model: "claude-explorer", max_tokens: 64, max_iterations: 2,
      messages: [{ role: "user", content: id }],
      tools: [runnable(gate, call.name, scope)],
    });
    await runner.runUntilDone();
  } finally {
    asked.delete(id);
  }
  return ask.answered ?? errorResult(call.id, "EG_BAD_CONTENT", `the Anthropic tool runner sent no tool_result for ${call.id}`);
}
