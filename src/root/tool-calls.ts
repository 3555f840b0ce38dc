/**
 * One tool call run by an SDK's call id, for the adapters (effectgate/ai-sdk, /anthropic,
 * /openai-agents, /langchain): the same pipeline as `runToolUses`, answered with the recorded
 * result as a value (not only the tool_result text), and optionally with the SDK's own execute
 * for this call (a closure over that SDK's call options: messages, abort signal, run context).
 */
import { errorCodeOf, type ToolResultBlock } from "../core/blocks.js";
import { EffectgateError } from "../core/errors.js";
import { toJson, type Json } from "../core/json.js";
import { type Scope } from "../core/keys.js";
import type { AnyTool, ToolContext } from "../core/tool.js";
import type { Kernel } from "../gate/kernel.js";
import { prepareCall } from "../gate/prepare.js";
import { CallNote } from "../gate/observe.js";
import { judgeRepeat } from "../gate/repeats.js";
import { awaitingApproval } from "../governance/awaiting.js";
import type { ApprovalStatus, Governance } from "../governance/govern.js";

/** One call as an SDK gives it: its own call id, the tool's name, the model's input (a JSON object). */
export interface ToolCall {
  /** The SDK's call id (AI SDK `toolCallId`, Anthropic `tool_use.id`, OpenAI `callId`, LangChain `tool_call.id`): the default idempotency key. */
  readonly id: string;
  readonly name: string;
  readonly input: unknown;
}

export interface RunToolOptions {
  /**
   * Runs this call with this function instead of the registered tool's `execute` (every other hook,
   * the effect class, the schema and the key stay the tool's). For an SDK tool wrapped by an
   * adapter: a closure that hands the SDK's own call options to the user's execute. A replay,
   * recovery in another process, or a probe never calls it.
   */
  readonly execute?: (input: unknown, ctx: ToolContext) => unknown;
}

/** What one call came to. `block` is what `runToolUses` would have answered. */
export type ToolAnswer =
  | {
    readonly ok: true;
    /** The result as the ledger recorded it (JSON; the first run's result on a replay). */
    readonly result: Json;
    /**
     * Set when the tool's repeats policy (`collapse`) answered this call with an earlier call's
     * result instead of running it: the sentence saying so, for the model (the first answer only;
     * a replay of this call is answered from its own record). See `collapsedPreamble`.
     */
    readonly collapsed?: string;
    readonly block: ToolResultBlock;
  }
  | {
    readonly ok: false;
    /** The `EG_…` code the error starts with (EG_AWAITING_APPROVAL, EG_KILL_SWITCH, EG_TOOL_FAILED…). */
    readonly code: string | undefined;
    /** The text the model should see: what happened and what to do. */
    readonly message: string;
    /** The approval request's id when the call waits for a person (`effectgate approvals approve ID`). */
    readonly approvalId: string | undefined;
    readonly block: ToolResultBlock;
  };

export interface ToolCallSurface {
  readonly runTool: (call: ToolCall, scope: Scope, options?: RunToolOptions) => Promise<ToolAnswer>;
  readonly approvalFor: (call: ToolCall, scope: Scope, options?: { readonly file?: boolean }) => Promise<ApprovalStatus>;
}

export function toolCallSurface(kernel: Kernel, governance: Governance, checkScope: (scope: Scope) => void): ToolCallSurface {
  async function runTool(call: ToolCall, scope: Scope, options: RunToolOptions = {}): Promise<ToolAnswer> {
    checkScope(scope);
    if (scope.saga !== undefined) {
      throw new EffectgateError("EG_BAD_OPTION", "runTool does not run saga steps: use gate.runToolUses or gate.saga() for calls with scope.saga");
    }
    const registered = kernel.tools.get(call.name);
    // What the tool returned in this process, for a read (reads keep no record).
    let returned: { value: unknown } | undefined;
    let tool: AnyTool | undefined;
    if (registered && (options.execute !== undefined || registered.effect === "read")) {
      if (options.execute !== undefined && registered.sandbox !== undefined) {
        throw new EffectgateError("EG_BAD_OPTION", `${registered.name} runs sandboxed: an adapter cannot replace its execute`);
      }
      const run = options.execute ?? ((input: unknown, ctx: ToolContext) => registered.execute(input, ctx));
      tool = Object.freeze({
        ...registered,
        async execute(input: unknown, ctx: ToolContext) {
          const value: unknown = await run(input, ctx);
          returned = { value };
          return value;
        },
      });
    }
    const note = new CallNote();
    const block = await kernel.runCall({ type: "tool_use", id: call.id, name: call.name, input: call.input }, scope, tool ? { tool, note } : { note });
    if (block.is_error) return { ok: false, code: errorCodeOf(block), message: block.content, approvalId: awaitingApproval(block), block };
    if (registered?.effect === "read") return { ok: true, result: toJson(returned?.value), block };
    // A write or destructive call that succeeded has its record: the value is the recorded one, on a first run and on every
    // replay. The pipeline hands over the record it wrote or answered from; it is read back only when it had none in hand
    // (an outcome whose write is still being retried, a twin's record).
    const record = note.recorded ?? await recordOf(call, scope);
    if (record?.state === "completed") return { ok: true, result: record.result, ...(note.collapsed === undefined ? {} : { collapsed: note.collapsed }), block };
    // Unreachable unless the record moved meanwhile (compensated): answer with what the block said.
    return { ok: true, result: block.content, block };
  }

  async function recordOf(call: ToolCall, scope: Scope) {
    const prepared = await prepareCall(kernel.tools, { type: "tool_use", id: call.id, name: call.name, input: call.input }, scope);
    return prepared.ok ? await kernel.calls.get(scope.tenant, prepared.call.key) : undefined;
  }

  async function approvalFor(call: ToolCall, scope: Scope, options: { readonly file?: boolean } = {}): Promise<ApprovalStatus> {
    checkScope(scope);
    const prepared = await prepareCall(kernel.tools, { type: "tool_use", id: call.id, name: call.name, input: call.input }, scope);
    // A call that would be answered with an error needs nobody's approval: running it gives that error.
    if (!prepared.ok) return { state: "not_needed" };
    // A call the ledger knows is answered from it and is never put before a person again (an approved call resent: an SDK's
    // replay path); its request is reported as it stands (consumed), since SDKs re-check approval before they replay.
    const known = prepared.call.tool.effect !== "read" && (await kernel.calls.get(scope.tenant, prepared.call.key)) !== undefined;
    // The repeats policy is asked too, as the pipeline will ask it: a repeat it answers needs nobody, one it puts before a person is asked here.
    const repeat = known ? { kind: "none" as const } : await judgeRepeat(kernel.calls, governance, prepared.call);
    if (repeat.kind === "answered") return { state: "not_needed" };
    const governed = repeat.kind === "ask" ? { ...prepared.call, approvalReasons: repeat.reasons } : prepared.call;
    return governance.approvalStatus(governed, { file: !known && (options.file ?? true), known });
  }

  return { runTool, approvalFor };
}
