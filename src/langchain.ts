/**
 * effectgate/langchain: effectgate tools for LangChain and LangGraph (`@langchain/core` and
 * `@langchain/langgraph`, optional peer dependencies: install them yourself). See
 * docs/adapters.md.
 *
 *   import { langchainTool } from "effectgate/langchain";
 *   const tools = new ToolNode([langchainTool(gate, createTicket, { scope: (config) => ({ tenant: "acme", task: config.configurable?.thread_id }) })]);
 *
 * Each call is keyed by its tool call id, so a ToolNode that re-runs a batch after an interrupt
 * does not run a sibling's effect again; approvals interrupt the graph while pending. For
 * `createAgent`, `effectgateMiddleware` does the same for tools registered with `fromLangChainTool`,
 * and `effectgateHumanInTheLoop` stands in for LangChain's humanInTheLoopMiddleware.
 */
import { ToolMessage } from "@langchain/core/messages";
import { tool, ToolInputParsingException, type StructuredToolInterface } from "@langchain/core/tools";
import { Validator } from "@langchain/core/utils/json_schema";
import { interrupt } from "@langchain/langgraph";
import { createMiddleware, type AgentMiddleware } from "langchain";
import type { Gate } from "./root/create-gate.js";
import { langchainToolWith, type AnyGateTool, type LangChainToolOptions } from "./adapters/langchain/tool.js";
import { fromLangChainToolWith, type LangChainToolSpec } from "./adapters/langchain/wrap.js";
import type { Tool } from "./core/tool.js";
import { effectgateMiddlewareWith, type EffectgateMiddlewareOptions, type MiddlewareKit } from "./adapters/langchain/middleware.js";
import { humanInTheLoopWith, type AfterModelKit, type HumanInTheLoopOptions } from "./adapters/langchain/human-in-the-loop.js";

export { toolCallIdOf, type LangChainToolOptions } from "./adapters/langchain/tool.js";
export { NO_RETRYABLE_TOOL, retryableTools, type EffectgateMiddlewareOptions } from "./adapters/langchain/middleware.js";
export type { LangChainToolSpec } from "./adapters/langchain/wrap.js";
export type { ApprovalInterrupt } from "./adapters/langchain/approval.js";
export type {
  HitlActionRequest, HitlDecision, HitlDecisionType, HitlRequest, HitlResponse, HumanInTheLoopOptions, ReviewConfig,
} from "./adapters/langchain/human-in-the-loop.js";
export type { ScopeOf } from "./adapters/shared.js";

const kit: MiddlewareKit = {
  tool, interrupt, ToolMessage, ToolInputParsingException, createMiddleware: createMiddleware as unknown as MiddlewareKit["createMiddleware"],
};

/**
 * The effectgate tool for a LangChain tool you already wrote (`tool(func, { name, schema })`), given
 * its effect class: register it with `createGate({ tools })` and run it through effectgateMiddleware
 * (or langchainTool). Its input is checked before anything runs: a zod schema by the gate, a JSON
 * Schema with LangChain's own validator, so a bad input is EG_INVALID_INPUT with the issues.
 */
export function fromLangChainTool(source: StructuredToolInterface, spec: LangChainToolSpec): Tool {
  return fromLangChainToolWith({ Validator }, source, spec);
}

/** The LangChain tool for an effectgate tool, keyed by the tool call id (the tool must also be among the gate's tools). */
export function langchainTool(gate: Gate, gated: AnyGateTool, options: LangChainToolOptions): StructuredToolInterface {
  return langchainToolWith(kit, gate, gated, options);
}

/**
 * A `createAgent` middleware that runs the gate's tools (registered with `fromLangChainTool`) by
 * their tool call id; put it last in `middleware` (innermost). See src/adapters/langchain/middleware.ts.
 */
export function effectgateMiddleware(gate: Gate, options: EffectgateMiddlewareOptions): AgentMiddleware {
  return effectgateMiddlewareWith(kit, gate, options);
}

/**
 * LangChain's `humanInTheLoopMiddleware` on effectgate's durable approvals: the same interrupt
 * (a HITLRequest naming each call's `approvalId`) and resume (`{ decisions, by }`), with the
 * decision recorded in effectgate's store and the call released only by the gate. Pair it with
 * effectgateMiddleware (or langchainTool tools). See src/adapters/langchain/human-in-the-loop.ts.
 */
export function effectgateHumanInTheLoop(gate: Gate, options: HumanInTheLoopOptions): AgentMiddleware {
  const afterModelKit: AfterModelKit = { interrupt, createMiddleware: createMiddleware as unknown as AfterModelKit["createMiddleware"] };
  return humanInTheLoopWith(afterModelKit, gate, options) as AgentMiddleware;
}
