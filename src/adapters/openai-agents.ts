/**
 * The OpenAI Agents SDK (`@openai/agents`) adapter: an effectgate tool handed to an `Agent` as
 * the SDK's own `tool({ execute(input, runContext, details) })`, keyed by the SDK's call id
 * (`details.toolCall.callId`), scoped by a function of the run context.
 *
 * The duplicate path it closes: a saved `RunState` holds the model's calls, and resuming it runs
 * every pending call's `execute`. Resume the same saved state twice (a retried job, two workers,
 * a crash after the tool ran but before the new state was saved) and the SDK runs the approved
 * tool twice under the same call id. Through the gate the second run is answered from the ledger.
 *
 * Approvals: `needsApproval` asks effectgate's durable approvals (see approvals below), so a run
 * interrupts while the effectgate request is pending and a person can decide it from the CLI in
 * another process; the gate still checks the digest-bound approval when the call runs.
 *
 * This module type-imports the SDK only; the one runtime import (`tool`) is in the entry.
 */
import type { FunctionTool, RunContext } from "@openai/agents";
import type { ToolResultBlock } from "../core/blocks.js";
import { EffectgateError } from "../core/errors.js";
import type { Scope } from "../core/keys.js";
import type { AnyTool, Tool } from "../core/tool.js";
import type { Gate } from "../root/create-gate.js";
import { runSdkCall } from "./openai-agents-call.js";

// The SDK's tool types carry the parameters' schema type; the adapter erases it, as the gate erases a tool's.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type AgentsFunctionTool<C> = FunctionTool<C, any, string>;
/** Any effectgate tool, whatever its input and result types. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type AnyGateTool = Tool<any, any>;

/** What the SDK hands `execute` beside the input: the model's call (`toolCall.callId`, `arguments`), a signal. */
export type ToolCallDetails = NonNullable<Parameters<FunctionTool["invoke"]>[2]>;

/** The SDK's `tool()` function, passed in by the entry so this module stays free of the SDK at runtime. */
export type AgentsToolFactory = (options: {
  name: string;
  description: string;
  parameters: unknown;
  strict?: boolean;
  needsApproval?: (runContext: RunContext<unknown>, input: unknown, callId?: string) => Promise<boolean>;
  execute: (input: unknown, runContext?: RunContext<unknown>, details?: ToolCallDetails) => Promise<string>;
}) => AgentsFunctionTool<unknown>;

export interface AgentsToolOptions<C> {
  /** The scope of a call (tenant, task…) from the run context: `(rc) => ({ tenant: rc.context.tenant, task: rc.context.conversationId })`. */
  readonly scope: (runContext: RunContext<C>) => Scope;
  /** The model-visible description (default: the tool's own). */
  readonly description?: string;
  /**
   * The SDK's parameters: a zod object or a JSON schema. Default: the tool's `input` when it is a
   * zod object (the gate validates the input again against `input` either way).
   */
  readonly parameters?: unknown;
  /** The SDK's strict mode (default true for a zod object, false for a JSON schema given as `parameters`). */
  readonly strict?: boolean;
  /**
   * Decides whether the SDK interrupts the run for this call before `execute`. Supplied by
   * `durableApprovals` (effectgate's own requests); without it the SDK never interrupts and
   * the gate answers a call that needs approval with EG_AWAITING_APPROVAL.
   */
  readonly needsApproval?: (call: { id: string; name: string; input: unknown }, scope: Scope) => Promise<boolean>;
  /** How a tool_result becomes the SDK tool's output (default: its content; errors as `EG_…: message` text the model reads). */
  readonly output?: (result: ToolResultBlock) => string;
}

/** The SDK's call id, or a clear error: without it there is no key to make the call once. */
export function callIdOf(details: ToolCallDetails | undefined, tool: string): string {
  const id = details?.toolCall?.callId;
  if (typeof id !== "string" || id === "") {
    throw new EffectgateError("EG_BAD_CONTENT",
      `${tool} was called without the SDK's tool call (details.toolCall.callId), so it has no key to run once: call it through an Agent run, not invoke() by hand. Nothing was executed.`);
  }
  return id;
}

/** A zod object passes as SDK parameters as it is; anything else needs `parameters`. */
function parametersOf(tool: AnyTool, given: unknown): { parameters: unknown; strict: boolean } {
  if (given !== undefined) return { parameters: given, strict: false };
  const input = tool.input as unknown as { _zod?: unknown; shape?: unknown };
  if (typeof input === "object" && input !== null && typeof input.shape === "object") return { parameters: input, strict: true };
  throw new EffectgateError("EG_BAD_TOOL_DEFINITION",
    `tool ${JSON.stringify(tool.name)}: its input is not a zod object, so give the adapter \`parameters\` (a JSON schema the SDK sends the model)`);
}

/**
 * The SDK tool for an effectgate tool. The tool must also be among the gate's `tools`: the gate
 * runs it, and answers a replay of the same call id from its ledger.
 */
export function agentsToolWith<C>(factory: AgentsToolFactory, gate: Gate, tool: AnyGateTool, options: AgentsToolOptions<C>): AgentsFunctionTool<C> {
  const gated = tool as AnyTool;
  const { parameters, strict } = parametersOf(gated, options.parameters);
  const output = options.output ?? ((result: ToolResultBlock) => result.content);
  const needsApproval = options.needsApproval;
  return factory({
    name: gated.name,
    description: options.description ?? gated.description ?? gated.name,
    parameters,
    strict: options.strict ?? strict,
    ...(needsApproval === undefined ? {} : {
      needsApproval: async (runContext: RunContext<unknown>, input: unknown, callId?: string) => {
        if (callId === undefined) return true; // no id, no durable request to look up: ask the SDK's own surface
        return needsApproval({ id: callId, name: gated.name, input }, options.scope(runContext as RunContext<C>));
      },
    }),
    async execute(input, runContext, details) {
      const id = callIdOf(details, gated.name);
      if (!runContext) throw new EffectgateError("EG_BAD_CONTENT", `${gated.name} was called without a run context, so it has no scope. Nothing was executed.`);
      const scope = options.scope(runContext as RunContext<C>);
      // The SDK's parsed input, as needsApproval saw it, so both name the same approval digest.
      return output(await runSdkCall(gate, { id, name: gated.name, input }, scope));
    },
  }) as unknown as AgentsFunctionTool<C>;
}
