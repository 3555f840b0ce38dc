/**
 * The OpenAI Agents SDK entry: each call reaches the gate the way the SDK's run loop runs a
 * function tool. The SDK asks the tool's `needsApproval(runContext, input, callId)` first (the
 * adapter files effectgate's durable request there); a call that needs a person interrupts the
 * run, the person approves it in the SDK (`state.approve`) and the run is resumed, which
 * `invoke`s the tool: the SDK's own `tool().invoke(runContext, argumentsJson, details)`, whose
 * parser reads the model's JSON and whose error function turns a throw into the model's text.
 * The gate still releases such a call only on effectgate's own approval (the schedule's person).
 *
 * Loaded only when a schedule asks for the "openai-agents" entry: it imports `@openai/agents`.
 */
import { RunContext } from "@openai/agents";
import { agentsTool, type AgentsFunctionTool } from "../../../openai-agents.js";
import { EffectgateError } from "../../../core/errors.js";
import { resultBlock, type ToolResultBlock, type ToolUseBlock } from "../../../core/blocks.js";
import type { Scope } from "../../../core/keys.js";
import type { Gate } from "../../../root/create-gate.js";
import type { AskEntry } from "./entry.js";

/** The JSON schema the SDK shows the model (the explorer's tools take `{ ref, amount }`); the gate validates with the tool's own schema. */
const PARAMETERS = {
  type: "object",
  properties: { ref: { type: "string" }, amount: { type: "number" } },
  required: ["ref", "amount"],
  additionalProperties: false,
} as const;

const toolsOf = new WeakMap<Gate, Map<string, AgentsFunctionTool>>();

function sdkTool(gate: Gate, name: string, scope: Scope): AgentsFunctionTool {
  let byKey = toolsOf.get(gate);
  if (!byKey) toolsOf.set(gate, (byKey = new Map<string, AgentsFunctionTool>()));
  const id = `${scope.tenant}\u0001${scope.task}\u0001${name}`;
  let made = byKey.get(id);
  if (!made) {
    const gated = gate.tools.get(name);
    if (!gated) throw new Error(`the gate has no tool ${name}`);
    made = agentsTool(gate, gated, { scope: () => scope, parameters: PARAMETERS, strict: false });
    byKey.set(id, made);
  }
  return made;
}

/** Whether the text the model gets is a refusal: effectgate's `EG_…:` text, or the SDK's error text for a throw. */
const ERROR_TEXT = /^(EG_[A-Z_]+: |An error occurred while running the tool)/;

export const openAiAgentsEntry: AskEntry = {
  kind: "ask",
  name: "openai-agents",
  async answer(gate, call, scope) {
    try {
      return await run(gate, call, scope);
    } catch (err) {
      // needsApproval throwing (a ledger fault in gate.approvalFor) rejects the SDK's run: the application sees it and runs again.
      if (err instanceof EffectgateError) return resultBlock(call.id, err.message, true);
      throw err;
    }
  },
};

async function run(gate: Gate, call: ToolUseBlock, scope: Scope): Promise<ToolResultBlock> {
  const tool = sdkTool(gate, call.name, scope);
  const runContext = new RunContext<unknown>({});
  const argumentsJson = JSON.stringify(call.input);
  // Asked before every run of the call, its first and each resume (approved or not, the SDK then invokes on resume).
  if (typeof tool.needsApproval === "function") await tool.needsApproval(runContext, call.input, call.id);
  const output: unknown = await tool.invoke(runContext, argumentsJson, {
    toolCall: { type: "function_call", callId: call.id, name: call.name, arguments: argumentsJson },
  } as never);
  const text = typeof output === "string" ? output : JSON.stringify(output);
  return resultBlock(call.id, text, ERROR_TEXT.test(text));
}
