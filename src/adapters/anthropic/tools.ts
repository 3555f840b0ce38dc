/**
 * effectgate tools as runnable tools for the Anthropic SDK's tool runner
 * (`client.beta.messages.toolRunner`, @anthropic-ai/sdk ≥ 1.14). Each call runs through the gate
 * keyed by `context.toolUse.id`, so a tool the runner runs again for the same reply (its tool
 * response regenerated after `setMessagesParams`, a resumed loop, an eager start that the reply
 * then repeats) replays the recorded result instead of making the effect twice.
 *
 * Typed structurally: nothing here imports the SDK, and the runner accepts these as
 * `BetaRunnableTool`s (name, description, input_schema, parse, run).
 */
import { renderResult } from "../../core/blocks.js";
import { EffectgateError } from "../../core/errors.js";
import { collapsedPreamble } from "../../core/repeats.js";
import type { Json } from "../../core/json.js";
import type { Scope } from "../../core/keys.js";
import type { StandardSchemaV1 } from "../../core/standard-schema.js";
import { defineTool, type Tool, type ToolContext, type ToolSpec } from "../../core/tool.js";
import type { Gate } from "../../root/create-gate.js";
import type { ToolAnswer } from "../../root/tool-calls.js";
import { requireCallId, ToolCallRefused } from "../shared.js";

/** What the runner passes `run` besides the parsed input (BetaToolRunContext). */
export interface AnthropicRunContext {
  readonly toolUse: { readonly id: string; readonly name: string; readonly input: unknown };
  readonly signal?: AbortSignal | null | undefined;
}

export type AnthropicScope = (context: AnthropicRunContext) => Scope | Promise<Scope>;

/** Tool-result content as the runner takes it: a string or content blocks. */
export type AnthropicToolContent = string | Array<Record<string, unknown>>;

export interface AnthropicRunnableTool {
  readonly type: "custom";
  readonly name: string;
  readonly description: string;
  readonly input_schema: { readonly type: "object"; readonly [key: string]: unknown };
  parse(content: unknown): unknown;
  run(args: unknown, context?: AnthropicRunContext): Promise<AnthropicToolContent>;
}

export interface AnthropicToolOptions {
  /** The call's tenant and task (from your own closure, or the tool_use). Must give the same scope every time a call is made. */
  readonly scope: AnthropicScope;
  /**
   * A call that needs approval waits in `run`, asking the durable request every `pollMs`, until a
   * person decides (`effectgate approvals approve ID` in any process) or `timeoutMs` passes; the
   * rest of the batch runs meanwhile. Without it, such a call is answered at once with
   * EG_AWAITING_APPROVAL: pause the loop (see docs/adapters.md) and resume once it is decided.
   */
  readonly waitForApproval?: { readonly pollMs?: number; readonly timeoutMs?: number };
  /** The JSON Schema sent as `input_schema`, per tool name, where the tool's schema cannot give its own (`~standard.jsonSchema`). */
  readonly jsonSchemas?: Readonly<Record<string, Record<string, unknown>>>;
}

// The SDK tool's own run, for tools made by fromAnthropicTool (keyed by the effectgate tool).
type SdkRun = (args: unknown, context: AnthropicRunContext) => unknown;
const sdkRuns = new WeakMap<object, { run: SdkRun; parse: (content: unknown) => unknown }>();

/** The gate's tool `name` as a runnable tool for `client.beta.messages.toolRunner({ tools: [...] })`. */
export function anthropicTool(gate: Gate, name: string, options: AnthropicToolOptions): AnthropicRunnableTool {
  const tool = gate.tools.get(name);
  if (!tool) throw new EffectgateError("EG_BAD_OPTION", `the gate has no tool named ${JSON.stringify(name)} (its tools: ${[...gate.tools.keys()].join(", ")})`);
  const sdk = sdkRuns.get(tool);
  const inputSchema = options.jsonSchemas?.[name] ?? sdkSchemas.get(tool) ?? jsonSchemaOf(tool.input, name);
  return {
    type: "custom",
    name,
    description: tool.description ?? name,
    input_schema: inputSchema as AnthropicRunnableTool["input_schema"],
    // The gate validates the model's input itself (and answers a bad one as an error result): pass it on as given.
    parse: (content) => content,
    async run(_args, context) {
      const toolUse = context?.toolUse;
      const id = requireCallId(toolUse?.id, "the Anthropic tool runner", "context.toolUse.id");
      const runContext: AnthropicRunContext = { toolUse: toolUse!, signal: context?.signal };
      const scope = await options.scope(runContext);
      const call = { id, name, input: toolUse!.input };
      const execute = sdk === undefined ? undefined : (input: unknown, ctx: ToolContext) =>
        sdk.run(sdk.parse(input), { toolUse: toolUse!, signal: context?.signal ? AbortSignal.any([ctx.signal, context.signal]) : ctx.signal });
      let answer = await gate.runTool(call, scope, execute ? { execute } : {});
      if (!answer.ok && answer.code === "EG_AWAITING_APPROVAL" && options.waitForApproval) {
        answer = await waitAndRun(gate, call, scope, options.waitForApproval, execute, context?.signal ?? undefined);
      }
      if (!answer.ok) throw new ToolCallRefused(answer);
      return contentOf(answer.result, answer.collapsed);
    },
  };
}

/** Every tool of the gate (or the `only` ones) as runnable tools, in the gate's order. */
export function anthropicTools(gate: Gate, options: AnthropicToolOptions & { readonly only?: readonly string[] }): AnthropicRunnableTool[] {
  return (options.only ?? [...gate.tools.keys()]).map((name) => anthropicTool(gate, name, options));
}

/**
 * An effectgate tool from a runnable tool already written for the SDK (`betaZodTool({...})`):
 * give it its effect class (and for a write, ideally a probe); hand it to createGate and use it
 * through anthropicTool(s). Its `run` then gets the runner's context; outside a runner (recovery
 * re-running the call after a probe said "absent") it gets a context naming the same call.
 * `input` must be a Standard Schema of the same input (betaZodTool keeps only the JSON Schema).
 */
export function fromAnthropicTool<S extends StandardSchemaV1>(
  sdkTool: {
    readonly name: string;
    readonly description?: string | undefined;
    readonly input_schema?: unknown;
    // The SDK types run by its own input and context; any, so tools of any SDK version are accepted as they are.
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    run(args: any, context?: any): unknown;
    parse?(content: unknown): unknown;
  },
  spec: Omit<ToolSpec<S, unknown>, "name" | "execute"> & { readonly input: S },
): Tool<S, unknown> {
  const run: SdkRun = (args, context) => sdkTool.run(args, context);
  const parse = (content: unknown) => (typeof sdkTool.parse === "function" ? sdkTool.parse(content) : content);
  const tool = defineTool<S, unknown>({
    ...(sdkTool.description === undefined ? {} : { description: sdkTool.description }),
    ...spec,
    name: sdkTool.name,
    execute: async (input, ctx) => run(parse(input), { toolUse: { id: ctx.toolUseId, name: sdkTool.name, input }, signal: ctx.signal }),
  });
  sdkRuns.set(tool, { run, parse });
  if (typeof sdkTool.input_schema === "object" && sdkTool.input_schema !== null) sdkSchemas.set(tool, sdkTool.input_schema as Record<string, unknown>);
  return tool;
}
const sdkSchemas = new WeakMap<object, Record<string, unknown>>();

/** Waits for a person's decision on the call's durable request, then runs it (or answers the refusal). */
async function waitAndRun(
  gate: Gate, call: { id: string; name: string; input: unknown }, scope: Scope, wait: { pollMs?: number; timeoutMs?: number },
  execute: ((input: unknown, ctx: ToolContext) => unknown) | undefined, signal: AbortSignal | undefined,
): Promise<ToolAnswer> {
  const pollMs = wait.pollMs ?? 500;
  const deadline = Date.now() + (wait.timeoutMs ?? 10 * 60_000);
  for (;;) {
    const status = await gate.approvalFor(call, scope, { file: false });
    const decided = status.state !== "pending" && status.state !== "none";
    if (decided || Date.now() >= deadline || signal?.aborted === true) return gate.runTool(call, scope, execute ? { execute } : {});
    await new Promise((resolve) => setTimeout(resolve, pollMs));
  }
}

/**
 * A result as tool_result content: content blocks as they are (an array of `{ type }` objects),
 * strings as they are, anything else as JSON; after the line saying so for a collapsed repeat.
 */
function contentOf(result: Json, collapsed: string | undefined): AnthropicToolContent {
  const said = collapsed === undefined ? "" : collapsedPreamble(collapsed);
  if (Array.isArray(result) && result.length > 0 && result.every((b) => typeof b === "object" && b !== null && !Array.isArray(b) && typeof b.type === "string")) {
    const blocks = result as Array<Record<string, unknown>>;
    return said === "" ? blocks : [{ type: "text", text: said.trimEnd() }, ...blocks];
  }
  return said + renderResult(result);
}

/** The tool's input schema as JSON Schema, from the Standard JSON Schema interface (zod ≥ 4.2, valibot, arktype). */
function jsonSchemaOf(schema: StandardSchemaV1, name: string): Record<string, unknown> {
  const standard = schema["~standard"] as { jsonSchema?: { input?: (options: { target: string }) => Record<string, unknown> } };
  const json = standard.jsonSchema?.input?.({ target: "draft-2020-12" });
  if (!json || json.type !== "object") {
    throw new EffectgateError("EG_BAD_OPTION",
      `the input schema of ${name} gives no JSON Schema of an object (~standard.jsonSchema); pass one as jsonSchemas[${JSON.stringify(name)}]`);
  }
  const { $schema: _drop, ...rest } = json;
  return rest;
}
