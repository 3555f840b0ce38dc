/**
 * effectgate as a `createAgent` middleware (`langchain`): `wrapToolCall` keyed by
 * `request.toolCall.id`, for agents whose tools are LangChain tools the user already wrote. Each
 * gated tool is registered with the gate through `fromLangChainTool(tool, { effect })`; a call of
 * it runs the rest of the middleware chain and the tool (`handler`) through the gate, so a replay
 * (a re-run node after an interrupt, a retry around this middleware) is answered from the ledger
 * with a ToolMessage, without calling the handler. Tools the gate does not have pass through.
 *
 * Order matters: put this middleware LAST (innermost). A retrying middleware outside it sees an
 * unknown outcome answered as a ToolMessage (nothing thrown, nothing to retry), and a retry
 * anyway lands on the same call id. A retrying middleware inside it would re-run the tool within
 * one gated run: restrict it to reads with `retryableTools(gate)`.
 */
import type { ToolMessage } from "@langchain/core/messages";
import type { AgentMiddleware } from "langchain";
import { OutcomeUnknown } from "../../core/outcome.js";
import type { Scope } from "../../core/keys.js";
import type { Gate } from "../../root/create-gate.js";
import { requireCallId } from "../shared.js";
import { awaitApproval } from "./approval.js";
import { answerMessage } from "./tool.js";
import type { LangChainKit } from "./types.js";

/** The parts of createAgent's tool call request the middleware reads. */
export interface MiddlewareToolRequest {
  readonly toolCall: { readonly id?: string | undefined; readonly name: string; readonly args: unknown };
  /** LangGraph's runtime: `context`, `configurable.thread_id`… */
  readonly runtime: unknown;
}

export interface MiddlewareKit extends LangChainKit {
  /** `createMiddleware` from `langchain`. */
  readonly createMiddleware: (config: {
    name: string;
    wrapToolCall: (request: MiddlewareToolRequest, handler: (request: MiddlewareToolRequest) => Promise<unknown>) => Promise<unknown>;
  }) => AgentMiddleware;
}

export interface EffectgateMiddlewareOptions {
  /** The scope of a call from LangGraph's runtime, e.g. `(rt) => ({ tenant: rt.context.tenant, task: rt.configurable.thread_id })`. */
  readonly scope: (runtime: { context?: unknown; configurable?: { thread_id?: string; [key: string]: unknown } }) => Scope | Promise<Scope>;
  /** Interrupt the graph while effectgate's approval is pending (default true); `false`: answer EG_AWAITING_APPROVAL. */
  readonly approvals?: boolean;
}

const isToolMessage = (value: unknown): value is ToolMessage =>
  typeof value === "object" && value !== null && (value as { getType?: () => string }).getType?.() === "tool";

/** What the handler's ToolMessage says, as the tool's result; an error message is an unknown outcome (the tool may have acted). */
async function runHandler(handler: () => Promise<unknown>): Promise<unknown> {
  const out = await handler();
  if (!isToolMessage(out)) throw new OutcomeUnknown("the tool answered with a graph Command, which effectgate cannot record as its result");
  if (out.status === "error") throw new OutcomeUnknown(`the tool answered with an error: ${typeof out.content === "string" ? out.content : JSON.stringify(out.content)}`);
  return out.content;
}

export function effectgateMiddlewareWith(kit: MiddlewareKit, gate: Gate, options: EffectgateMiddlewareOptions): AgentMiddleware {
  return kit.createMiddleware({
    name: "effectgate",
    async wrapToolCall(request, handler) {
      const { name, args } = request.toolCall;
      if (!gate.tools.has(name)) return handler(request);
      const id = requireCallId(request.toolCall.id, "LangChain", "toolCall.id");
      const call = { id, name, input: args };
      const scope = await options.scope(request.runtime as Parameters<EffectgateMiddlewareOptions["scope"]>[0]);
      if (options.approvals !== false) await awaitApproval(gate, kit.interrupt, call, scope);
      const answer = await gate.runTool(call, scope, { execute: () => runHandler(() => handler(request)) });
      return answerMessage(kit, answer, id, name);
    },
  });
}

/** No tool can have this name (tool names are `[a-zA-Z0-9_-]`): it stands for "no tool" in a list that must not be empty. */
export const NO_RETRYABLE_TOOL = "(effectgate: no read tools)";

/**
 * The names of the gate's read tools: the only ones a retrying middleware may retry
 * (`toolRetryMiddleware({ tools: retryableTools(gate) })`). Never empty: toolRetryMiddleware reads
 * an empty list as "every tool", so a gate without read tools gives a name no tool can have.
 */
export function retryableTools(gate: Gate): string[] {
  const reads = [...gate.tools.values()].filter((t) => t.effect === "read").map((t) => t.name);
  return reads.length > 0 ? reads : [NO_RETRYABLE_TOOL];
}
