/**
 * effectgate tools as Vercel AI SDK tools. The SDK's `toolCallId` is the call's key, so the
 * SDK's own duplicate paths (the same approval messages sent twice, a client resending a turn, a
 * resumed stream) replay the recorded result instead of running the effect again.
 */
import { EffectgateError, errorMessage } from "../../core/errors.js";
import { repeatPolicyOf } from "../../core/repeats.js";
import type { StandardSchemaV1 } from "../../core/standard-schema.js";
import { defineTool, type Tool, type ToolContext, type ToolSpec } from "../../core/tool.js";
import type { Gate } from "../../root/create-gate.js";
import type { ToolAnswer, ToolCall } from "../../root/tool-calls.js";
import { requireCallId, ToolCallRefused } from "../shared.js";
import { recordSdkApproval } from "./approvals.js";
import { CollapsedCalls, modelOutputWith, type ToModelOutput } from "./model-output.js";
import { contextOf, type AiSdkExecuteOptions, type AiSdkScope, type AiSdkTool } from "./types.js";

/** An AI SDK tool's execute: a value, a promise, or an async iterable of preliminary results whose last is the result. */
type SdkExecute = (input: never, options: AiSdkExecuteOptions) => unknown;

/** What the adapter keeps of a tool made by fromAiSdkTool: the SDK's own execute and the fields the SDK reads besides. */
interface SdkSource {
  readonly execute: SdkExecute;
  /** ai 7: a description that is a function of the tool's context (a string one is the gate tool's description). */
  readonly description?: unknown;
  /** ai 7: the context schema the SDK validates the tool's context with before execute sees it. */
  readonly contextSchema?: unknown;
  /** The tool's own conversion of a result for the model. */
  readonly toModelOutput?: ToModelOutput;
}

// Keyed by the effectgate tool (the gate holds that same object).
const sdkSources = new WeakMap<object, SdkSource>();

export interface AiSdkToolOptions<Context = unknown> {
  /** The call's tenant and task from the SDK's context. Must give the same scope every time a call is made. */
  readonly scope: AiSdkScope<Context>;
  /**
   * An approval given through the SDK (a `tool-approval-response` with `approved: true` in the
   * messages) is recorded as the durable decision for that exact call (its digest), by "ai-sdk".
   * Default false: only a person through the CLI or console, or the gate's `approver`, decides;
   * leave it so where the client that sends messages is not trusted to approve.
   */
  readonly acceptSdkApprovals?: boolean;
}

/**
 * The gate's tool `name` as an AI SDK tool: `execute` runs through the gate keyed by
 * `toolCallId`; `needsApproval` asks effectgate's durable approvals (so the SDK's
 * `tool-approval-request` appears exactly when a person must still decide). A refused call
 * (awaiting approval, kill switch, quota…) throws a ToolCallRefused whose message the SDK
 * hands the model as the tool error.
 */
export function aiSdkTool<Context = unknown>(gate: Gate, name: string, options: AiSdkToolOptions<Context>): AiSdkTool<unknown, Context> {
  const tool = gate.tools.get(name);
  if (!tool) throw new EffectgateError("EG_BAD_OPTION", `the gate has no tool named ${JSON.stringify(name)} (its tools: ${[...gate.tools.keys()].join(", ")})`);
  const source = sdkSources.get(tool);
  const sdkExecute = source?.execute;
  // Only a tool that collapses repeats (or has its own conversion) gets a toModelOutput: the others keep the SDK's default.
  const collapsed = repeatPolicyOf(tool)?.action === "collapse" ? new CollapsedCalls() : undefined;
  const toModelOutput = collapsed || source?.toModelOutput ? modelOutputWith(source?.toModelOutput, collapsed) : undefined;

  async function callOf(input: unknown, opts: Omit<AiSdkExecuteOptions<Context>, "abortSignal">): Promise<{ call: ToolCall; scope: Awaited<ReturnType<AiSdkScope>> }> {
    const id = requireCallId(opts.toolCallId, "the AI SDK", "toolCallId");
    const scope = await options.scope({ toolCallId: id, toolName: name, messages: opts.messages ?? [], context: contextOf(opts) });
    return { call: { id, name, input }, scope };
  }

  async function run(input: unknown, opts: AiSdkExecuteOptions<Context>, onChunk: (chunk: unknown) => void): Promise<ToolAnswer> {
    const { call, scope } = await callOf(input, opts);
    if (options.acceptSdkApprovals === true) await recordSdkApproval(gate, call, scope, opts.messages ?? []);
    const execute = sdkExecute === undefined ? undefined : (given: unknown, ctx: ToolContext) =>
      lastOf(sdkExecute(given as never, { ...opts, abortSignal: opts.abortSignal ? AbortSignal.any([ctx.signal, opts.abortSignal]) : ctx.signal }), onChunk);
    const answer = await gate.runTool(call, scope, execute ? { execute } : {});
    if (answer.ok && answer.collapsed !== undefined) collapsed?.note(call.id, answer.collapsed);
    return answer;
  }

  const streams = sdkExecute !== undefined && isAsyncGeneratorFunction(sdkExecute);
  const description = source?.description ?? tool.description;
  const sdkTool: AiSdkTool<unknown, Context> = {
    ...(description === undefined ? {} : { description }),
    // The wrapped tool's schema validates the context the user typed the adapter with (AiSdkToolOptions<Context>).
    ...(source?.contextSchema === undefined ? {} : { contextSchema: source.contextSchema as StandardSchemaV1<unknown, Context> }),
    inputSchema: tool.input,
    execute: streams
      ? (input, opts) => streamed((onChunk) => run(input, opts, onChunk))
      : async (input, opts) => resultOf(await run(input, opts, () => {})),
    ...(toModelOutput === undefined ? {} : { toModelOutput }),
    ...(tool.effect === "read" ? {} : {
      async needsApproval(input: unknown, opts: Omit<AiSdkExecuteOptions<Context>, "abortSignal">) {
        const { call, scope } = await callOf(input, opts);
        // True for every call a rule puts before a person, decided or not: the SDK asks again before it runs an
        // approved call from the messages (and treats false as "denied"); the gate itself releases only an approved one.
        const status = await gate.approvalFor(call, scope);
        return status.state !== "not_needed" && status.state !== "refused";
      },
    }),
  };
  return sdkTool;
}

/** Every tool of the gate (or the `only` ones) as AI SDK tools, by name: pass it as `tools` to generateText / streamText. */
export function aiSdkTools<Context = unknown>(gate: Gate, options: AiSdkToolOptions<Context> & { readonly only?: readonly string[] }): Record<string, AiSdkTool<unknown, Context>> {
  const names = options.only ?? [...gate.tools.keys()];
  return Object.fromEntries(names.map((name) => [name, aiSdkTool(gate, name, options)]));
}

/**
 * An effectgate tool made from a tool already written for the AI SDK (`tool({ inputSchema,
 * execute })`): give it a name, its effect class and, for a write, ideally a probe. Hand the
 * result to createGate, then use it through aiSdkTool / aiSdkTools: its execute then gets the
 * SDK's own options (messages, abort signal, context). Its `inputSchema` must be a Standard
 * Schema (zod 4, valibot, arktype), not `jsonSchema(...)`. An ai 7 tool keeps its `contextSchema`
 * and a description that is a function of its context.
 */
export function fromAiSdkTool(
  name: string,
  sdkTool: {
    /** A string, or (ai 7) a function of the tool's context, which the SDK then calls as before. */
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    readonly description?: string | ((options: any) => string) | undefined;
    readonly contextSchema?: unknown;
    /** Checked when defined: it must be a Standard Schema (the AI SDK's own types do not say so). */
    readonly inputSchema: unknown;
    // The SDK types execute by its own input and options; any, so a tool of either major is accepted as it is.
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    readonly execute?: ((input: any, options: any) => unknown) | undefined;
    /** Kept: the adapter's tool converts results for the model with it. */
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    readonly toModelOutput?: ((options: any) => unknown) | undefined;
  },
  spec: Omit<ToolSpec<StandardSchemaV1, unknown>, "name" | "input" | "execute">,
): Tool<StandardSchemaV1, unknown> {
  const sdkExecute = sdkTool.execute as SdkExecute | undefined;
  if (typeof sdkExecute !== "function") {
    throw new EffectgateError("EG_BAD_TOOL_DEFINITION", `AI SDK tool ${JSON.stringify(name)} has no execute: a tool the client runs has no effect for the gate to guard`);
  }
  const tool = defineTool<StandardSchemaV1, unknown>({
    ...(typeof sdkTool.description === "string" ? { description: sdkTool.description } : {}),
    ...spec,
    name,
    input: sdkTool.inputSchema as StandardSchemaV1,
    // Run outside an SDK call (recovery re-running it with the same key after a probe said "absent"): no messages, no context.
    execute: (input, ctx) => lastOf(sdkExecute(input as never, { toolCallId: ctx.toolUseId, messages: [], abortSignal: ctx.signal }), () => {}),
  });
  sdkSources.set(tool, {
    execute: sdkExecute,
    ...(typeof sdkTool.description === "function" ? { description: sdkTool.description } : {}),
    ...(sdkTool.contextSchema === undefined ? {} : { contextSchema: sdkTool.contextSchema }),
    ...(typeof sdkTool.toModelOutput === "function" ? { toModelOutput: sdkTool.toModelOutput as ToModelOutput } : {}),
  });
  return tool;
}

function resultOf(answer: ToolAnswer): unknown {
  if (!answer.ok) throw new ToolCallRefused(answer);
  return answer.result;
}

/** A value, a promise or an async iterable (the SDK's preliminary results): its final value, each chunk passed on as it comes. */
async function lastOf(value: unknown, onChunk: (chunk: unknown) => void): Promise<unknown> {
  const awaited: unknown = await value;
  if (!isAsyncIterable(awaited)) return awaited;
  let last: unknown;
  let any = false;
  for await (const chunk of awaited) {
    last = chunk;
    any = true;
    onChunk(chunk);
  }
  if (!any) throw new Error(errorMessage("EG_TOOL_FAILED", "the tool's async iterable ended without yielding a result"));
  return last;
}

/**
 * The SDK's streaming shape: each preliminary chunk as the tool yields it (this run only; a
 * replay has none), then the recorded result, which the SDK takes as the final output.
 */
async function* streamed(run: (onChunk: (chunk: unknown) => void) => Promise<ToolAnswer>): AsyncGenerator<unknown> {
  const queue: unknown[] = [];
  let wake: (() => void) | undefined;
  let finished = false;
  const done = run((chunk) => {
    queue.push(chunk);
    wake?.();
  }).finally(() => {
    finished = true;
    wake?.();
  });
  // Awaited below, after the chunks: mark it handled so a rejection meanwhile is not reported as unhandled.
  done.catch(() => {});
  for (;;) {
    while (queue.length > 0) yield queue.shift();
    if (finished) break;
    await new Promise<void>((resolve) => (wake = resolve));
    wake = undefined;
  }
  yield resultOf(await done);
}

function isAsyncIterable(value: unknown): value is AsyncIterable<unknown> {
  return typeof value === "object" && value !== null && typeof (value as { [Symbol.asyncIterator]?: unknown })[Symbol.asyncIterator] === "function";
}

function isAsyncGeneratorFunction(fn: unknown): boolean {
  return typeof fn === "function" && (fn as { constructor?: { name?: string } }).constructor?.name === "AsyncGeneratorFunction";
}
