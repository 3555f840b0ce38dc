/**
 * An effectgate tool as an OpenAI Agents SDK tool: `tool({ execute(input, runContext, details) })`
 * whose execute runs the call through the gate keyed by the SDK's call id
 * (`details.toolCall.callId`), scoped by a function of the run context.
 *
 * The duplicate path it closes: a saved `RunState` holds the model's pending calls, and every
 * resume of it runs their `execute`. Resume one saved state twice (a retried job, two workers, a
 * crash after the tool ran and before the new state was saved) and the SDK runs the approved tool
 * twice under the same call id; through the gate the second run is answered from the ledger.
 *
 * Approvals: `needsApproval` asks effectgate's durable approvals (`gate.approvalFor`), filing the
 * request on the first ask, so the run interrupts while a person has not approved, and the SDK asks
 * again on every resume: approve from `effectgate approvals approve ID` in any process, then resume
 * the saved state. The gate still checks the digest-bound approval when the call runs, so an
 * approval given only in the SDK (`state.approve`) never releases a call effectgate holds.
 */
import type { RunContext } from "@openai/agents";
import { EffectgateError } from "../../core/errors.js";
import type { AnyTool } from "../../core/tool.js";
import type { Gate } from "../../root/create-gate.js";
import type { ApprovalStatus } from "../../governance/govern.js";
import { answerText, requireCallId, type ScopeOf } from "../shared.js";
import { sourceOf } from "./wrap.js";
import type { AgentsFunctionTool, AgentsToolFactory, AnyGateTool, ToolCallDetails } from "./types.js";

export interface AgentsToolOptions<C> {
  /** The scope of a call from the run context, e.g. `(rc) => ({ tenant: rc.context.tenant, task: rc.context.conversationId })`. */
  readonly scope: ScopeOf<RunContext<C>>;
  /** The model-visible description (default: the tool's own, else its name). */
  readonly description?: string;
  /** The SDK's parameters, a zod object or a JSON schema (default: the tool's `input` when it is a zod object). The gate validates against `input` either way. */
  readonly parameters?: unknown;
  /** The SDK's strict mode (default: true for a zod object, false for `parameters` you give). */
  readonly strict?: boolean;
  /**
   * Interrupt the run through the SDK's approval surface while effectgate's approval is pending
   * (default true). With `false` the SDK never interrupts, and a call waiting for approval is
   * answered to the model with EG_AWAITING_APPROVAL.
   */
  readonly approvals?: boolean;
}

// A zod object is one the SDK takes as parameters as it is.
const isZodObject = (value: unknown): boolean =>
  typeof value === "object" && value !== null && typeof (value as { shape?: unknown }).shape === "object";

/** Whether the SDK should interrupt for this approval status: only while a person has yet to decide. */
export function interrupts(status: ApprovalStatus): boolean {
  return status.state === "pending" || status.state === "none";
}

/** The SDK's call id from `execute`'s details, or a refusal to run: without it there is no key. */
export function callIdOf(details: ToolCallDetails | undefined): string {
  return requireCallId(details?.toolCall?.callId, "the OpenAI Agents SDK", "details.toolCall.callId");
}

/**
 * The SDK tool for an effectgate tool (which must also be among the gate's tools). For a tool made
 * by `fromAgentsTool`, the SDK's parameters are the user's and each first run calls the user's
 * own execute with the SDK's run context and details.
 */
export function agentsToolWith<C>(factory: AgentsToolFactory, gate: Gate, tool: AnyGateTool, options: AgentsToolOptions<C>): AgentsFunctionTool<C> {
  const gated = tool as AnyTool;
  if (gate.tools.get(gated.name) === undefined) {
    throw new EffectgateError("EG_BAD_TOOL_DEFINITION", `tool ${JSON.stringify(gated.name)} is not among the gate's tools: pass it to createGate({ tools }) too`);
  }
  const source = sourceOf(gated);
  const parameters = options.parameters ?? source?.parameters ?? gated.input;
  if (options.parameters === undefined && source === undefined && !isZodObject(parameters)) {
    throw new EffectgateError("EG_BAD_TOOL_DEFINITION",
      `tool ${JSON.stringify(gated.name)}: its input is not a zod object, so give the adapter \`parameters\` (the JSON schema the SDK shows the model)`);
  }
  const scopeOf = (runContext: RunContext<unknown> | undefined) => {
    if (!runContext) throw new TypeError(`effectgate: ${gated.name} was called without a run context, so it has no scope; it was not run`);
    return options.scope(runContext as RunContext<C>);
  };
  // The SDK's tool() types its result by the context it infers (unknown here); the object is the same for any C. Whether the
  // `as` below is needed depends on the order TypeScript checks the program's files in, so lint would flip on it.
  // eslint-disable-next-line @typescript-eslint/no-unnecessary-type-assertion
  return factory({
    name: gated.name,
    description: options.description ?? gated.description ?? gated.name,
    parameters,
    strict: options.strict ?? source?.strict ?? isZodObject(parameters),
    ...(options.approvals === false ? {} : {
      async needsApproval(runContext, input, callId) {
        // No call id, no durable request to look up: leave it to the SDK's own surface.
        if (callId === undefined) return true;
        return interrupts(await gate.approvalFor({ id: callId, name: gated.name, input }, await scopeOf(runContext)));
      },
    }),
    // The SDK's parsed input is what needsApproval saw, so both name the same approval digest.
    async execute(input, runContext, details) {
      const id = callIdOf(details);
      const scope = await scopeOf(runContext);
      const own = source && { execute: (value: unknown) => source.execute(value as never, runContext, details) };
      return answerText(await gate.runTool({ id, name: gated.name, input }, scope, own ?? {}));
    },
  }) as AgentsFunctionTool<C>;
}
