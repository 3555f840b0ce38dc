/**
 * The LangChain entry: each call reaches the gate the way a `createAgent` agent runs a tool. A
 * real agent (langchain 1.x) with the SDK's own fake model, whose turn is the call as a tool call,
 * and a checkpointer: its tool node invokes the adapter's `langchainTool` with the tool call
 * (`config.toolCall.id` is the key), and the ToolMessage it adds is the answer. A call that needs
 * a person pauses the graph (`interrupt()` with effectgate's request): the agent is told to ask
 * again, as an application would resume the thread once the person decided.
 *
 * Loaded only when a schedule asks for the "langchain" entry: it imports `langchain`,
 * `@langchain/core` and `@langchain/langgraph` (optional peers).
 */
import { AIMessage, type BaseMessage } from "@langchain/core/messages";
import type { StructuredToolInterface } from "@langchain/core/tools";
import { MemorySaver } from "@langchain/langgraph";
import { createAgent, fakeModel } from "langchain";
import { langchainTool } from "../../../langchain.js";
import { EffectgateError, errorMessage } from "../../../core/errors.js";
import { errorResult, resultBlock, type ToolResultBlock, type ToolUseBlock } from "../../../core/blocks.js";
import type { Scope } from "../../../core/keys.js";
import type { Gate } from "../../../root/create-gate.js";
import type { AskEntry } from "./entry.js";

const toolsOf = new WeakMap<Gate, Map<string, StructuredToolInterface>>();

function toolFor(gate: Gate, name: string, scope: Scope): StructuredToolInterface {
  let byKey = toolsOf.get(gate);
  if (!byKey) toolsOf.set(gate, (byKey = new Map<string, StructuredToolInterface>()));
  const id = `${scope.tenant}\u0001${scope.task}\u0001${name}`;
  let made = byKey.get(id);
  if (!made) {
    const gated = gate.tools.get(name);
    if (!gated) throw new Error(`the gate has no tool ${name}`);
    byKey.set(id, (made = langchainTool(gate, gated, { scope: () => scope })));
  }
  return made;
}

let threads = 0;

/** One ToolMessage as the explorer's agent reads it. */
function answerOf(id: string, message: { content: unknown; status?: string }): ToolResultBlock {
  const text = typeof message.content === "string" ? message.content : JSON.stringify(message.content);
  return resultBlock(id, text, message.status === "error");
}

export const langchainEntry: AskEntry = {
  kind: "ask",
  name: "langchain",
  async answer(gate, call, scope) {
    try {
      return await turn(gate, call, scope);
    } catch (err) {
      // A ledger fault in the adapter's approval check (before the tool runs) fails the graph's step: the application runs it again.
      if (err instanceof EffectgateError) return resultBlock(call.id, err.message, true);
      throw err;
    }
  },
};

async function turn(gate: Gate, call: ToolUseBlock, scope: Scope): Promise<ToolResultBlock> {
  const model = fakeModel()
    .respondWithTools([{ id: call.id, name: call.name, args: call.input as Record<string, unknown> }])
    .respond(new AIMessage("done"));
  const agent = createAgent({ model, tools: [toolFor(gate, call.name, scope)], checkpointer: new MemorySaver() });
  const out = await agent.invoke({ messages: [{ role: "user", content: "go" }] }, { configurable: { thread_id: `explorer-${++threads}` } });
  const interrupts = (out as { __interrupt__?: { value?: { approvalId?: string } }[] }).__interrupt__ ?? [];
  const paused = interrupts[0]?.value;
  if (paused) {
    return resultBlock(call.id, errorMessage("EG_AWAITING_APPROVAL",
      `the graph paused before ${call.name} ran: its approval request ${paused.approvalId ?? "?"} waits for a person (LangGraph interrupt). Nothing was executed; resume the thread once it is decided.`), true);
  }
  const messages = (out as { messages: BaseMessage[] }).messages;
  const answer = messages.find((m) => m.getType() === "tool" && (m as unknown as { tool_call_id?: string }).tool_call_id === call.id);
  if (!answer) return errorResult(call.id, "EG_BAD_CONTENT", `the agent added no ToolMessage for ${call.id}`);
  return answerOf(call.id, answer);
}
