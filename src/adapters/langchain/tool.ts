/**
 * An effectgate tool as a LangChain tool (for a LangGraph `ToolNode`, `createAgent`, or any
 * runnable), keyed by the tool call's id (`config.toolCall.id`), scoped by a function of the
 * runnable config (e.g. its `thread_id`).
 *
 * The duplicate path it closes: a `ToolNode` runs a batch of tool calls in one node, and when one
 * of them interrupts (an approval) LangGraph re-runs the whole node on resume, so each sibling
 * runs again under the same call id. Through the gate the sibling's second run is answered from
 * the ledger. And since the gate answers an unknown outcome (a lost reply) with a result instead of
 * a throw, a retrying middleware (`toolRetryMiddleware`) has nothing to retry; if it retries
 * anyway, the same call id finds the ledger's record.
 */
import type { ToolRunnableConfig } from "@langchain/core/tools";
import type { StructuredToolInterface } from "@langchain/core/tools";
import { EffectgateError } from "../../core/errors.js";
import type { AnyTool, Tool } from "../../core/tool.js";
import type { Gate } from "../../root/create-gate.js";
import type { ToolAnswer } from "../../root/tool-calls.js";
import { answerText, requireCallId, type ScopeOf } from "../shared.js";
import { awaitApproval } from "./approval.js";
import type { LangChainKit } from "./types.js";
import { langchainSourceOf } from "./wrap.js";

export interface LangChainToolOptions {
  /** The scope of a call from the runnable config, e.g. `(config) => ({ tenant: "acme", task: config.configurable?.thread_id })`. */
  readonly scope: ScopeOf<ToolRunnableConfig>;
  /** The model-visible description (default: the tool's own, else its name). */
  readonly description?: string;
  /**
   * Interrupt the graph (`interrupt()`) while effectgate's approval is pending (default true). With
   * `false` such a call is answered to the model with EG_AWAITING_APPROVAL instead.
   */
  readonly approvals?: boolean;
}

/** Any effectgate tool, whatever its input and result types. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type AnyGateTool = Tool<any, any>;

/** The SDK's call id, or a refusal to run: without it there is no key. */
export function toolCallIdOf(config: ToolRunnableConfig | undefined): string {
  return requireCallId(config?.toolCall?.id, "LangChain", "toolCall.id (call the tool with a tool call, as ToolNode and createAgent do)");
}

/** The answer as a ToolMessage: success as the recorded result, an error with `status: "error"` and effectgate's text. */
export function answerMessage(kit: LangChainKit, answer: ToolAnswer, id: string, name: string) {
  return new kit.ToolMessage({ content: answerText(answer), tool_call_id: id, name, status: answer.ok ? "success" : "error" });
}

export function langchainToolWith(kit: LangChainKit, gate: Gate, tool: AnyGateTool, options: LangChainToolOptions): StructuredToolInterface {
  const gated = tool as AnyTool;
  if (gate.tools.get(gated.name) === undefined) {
    throw new EffectgateError("EG_BAD_TOOL_DEFINITION", `tool ${JSON.stringify(gated.name)} is not among the gate's tools: pass it to createGate({ tools }) too`);
  }
  const source = langchainSourceOf(gated);
  const made = kit.tool(async (input, config) => {
    const id = toolCallIdOf(config);
    const call = { id, name: gated.name, input };
    const scope = await options.scope(config);
    if (options.approvals !== false) await awaitApproval(gate, kit.interrupt, call, scope);
    // A wrapped LangChain tool runs with the graph's config, minus the tool call (which would make it answer a ToolMessage).
    const { toolCall: _call, ...rest } = config;
    const own = source && { execute: (value: unknown) => source.invoke(value as never, rest) };
    return answerMessage(kit, await gate.runTool(call, scope, own ?? {}), id, gated.name);
  }, {
    name: gated.name,
    description: options.description ?? gated.description ?? gated.name,
    schema: source?.schema ?? gated.input,
  });
  return answeringBadInput(kit, gate, made, options);
}

/**
 * LangChain checks a tool's input against its schema before the tool's function runs, and its
 * refusal reaches the model as "Error invoking tool …" with LangChain's stack trace (file paths
 * included). The tool answers such a call itself: through the gate, which says EG_INVALID_INPUT
 * with the issues (or, for a call the ledger holds, its recorded answer).
 */
function answeringBadInput(kit: LangChainKit, gate: Gate, made: StructuredToolInterface, options: LangChainToolOptions): StructuredToolInterface {
  const invoke = made.invoke.bind(made);
  const guarded = async (input: unknown, config?: ToolRunnableConfig): Promise<unknown> => {
    try {
      return await invoke(input as never, config);
    } catch (err) {
      const toolCall = input as { id?: unknown; args?: unknown; type?: unknown } | null;
      if (!(err instanceof kit.ToolInputParsingException) || toolCall?.type !== "tool_call") throw err;
      const id = requireCallId(toolCall.id, "LangChain", "toolCall.id");
      const answer = await gate.runTool({ id, name: made.name, input: toolCall.args }, await options.scope({ ...config, toolCall: toolCall as never }));
      return answerMessage(kit, answer, id, made.name);
    }
  };
  return Object.assign(made, { invoke: guarded });
}
