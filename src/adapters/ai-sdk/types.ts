/**
 * The parts of the Vercel AI SDK (`ai` 6 and 7) this adapter touches, typed structurally so one
 * adapter serves both majors and nothing here imports `ai`: v7 passes the tool's context as
 * `context`, v6 as `experimental_context`; v7 decides approvals with the call-level
 * `toolApproval`, v6 (and v7, deprecated) with the tool's `needsApproval`.
 *
 * `Context` is the type of the context the scope function reads. ai 7 types each tool's context
 * (`toolsContext`) from its tool: with `unknown` (the default) it takes the adapter's tools as
 * having none, so give the type (`aiSdkTools<MyContext>(…)`) to pass them a `toolsContext`.
 */
import type { Scope } from "../../core/keys.js";
import type { StandardSchemaV1 } from "../../core/standard-schema.js";

/** What `execute` receives from the SDK (ToolExecutionOptions of v6 and v7). */
export interface AiSdkExecuteOptions<Context = unknown> {
  readonly toolCallId: string;
  readonly messages: readonly unknown[];
  readonly abortSignal?: AbortSignal;
  /** v7: the tool's context (its entry of `toolsContext`). v7 hands a tool no runtime context. */
  readonly context?: Context;
  /** v6: the context passed to generateText / streamText. */
  readonly experimental_context?: unknown;
}

/** What the scope function sees of a call (or, in prepareStep, of a step: no call id then). */
export interface AiSdkCallInfo<Context = unknown> {
  readonly toolCallId?: string;
  readonly toolName?: string;
  readonly messages: readonly unknown[];
  /**
   * v6: `experimental_context`, everywhere. v7: the tool's context (its `toolsContext` entry) in
   * execute and toolApproval; where a tool has none, toolApproval and prepareStep give the runtime
   * context, which execute never sees: in ai 7, take the scope from the tool's context or a closure.
   */
  readonly context: Context | undefined;
}

export type AiSdkScope<Context = unknown> = (call: AiSdkCallInfo<Context>) => Scope | Promise<Scope>;

/** An AI SDK tool as this adapter builds it (assignable to `Tool` of ai 6 and 7). */
export interface AiSdkTool<Input = unknown, Context = unknown> {
  /**
   * A string, or (a wrapped ai 7 tool's own) a function of the tool's context. `any`: ai 6 types
   * it a string and ai 7 a string or function, and one tool must be assignable to both.
   */
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  readonly description?: any;
  /**
   * The effectgate tool's own Standard Schema (zod, valibot…), which the SDK validates with too.
   * `any`: the SDK's FlexibleSchema differs between majors, and the gate validates again anyway.
   */
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  readonly inputSchema: any;
  /**
   * ai 7: a wrapped tool's own context schema, kept so the SDK validates the context it hands
   * execute. Typed by `Context`, which is what ai 7 infers the tool's `toolsContext` entry from.
   */
  readonly contextSchema?: StandardSchemaV1<unknown, Context>;
  execute(input: Input, options: AiSdkExecuteOptions<Context>): Promise<unknown> | AsyncIterable<unknown>;
  needsApproval?(input: Input, options: Omit<AiSdkExecuteOptions<Context>, "abortSignal">): Promise<boolean>;
  /**
   * What the model is given for a result: a wrapped tool's own conversion, and the line saying a
   * collapsed repeat was not run. `any`: ai 6 and ai 7 each type it by their own ToolResultOutput.
   */
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  toModelOutput?(options: { readonly toolCallId: string; readonly input: Input; readonly output: unknown }): Promise<any>;
}

/** A part of a model message, as far as approvals need one. */
export interface AiSdkPart {
  readonly type: string;
  readonly toolCallId?: string;
  readonly approvalId?: string;
  readonly approved?: boolean;
}

export function partsOf(message: unknown): AiSdkPart[] {
  if (typeof message !== "object" || message === null) return [];
  const content = (message as { content?: unknown }).content;
  return Array.isArray(content) ? content.filter((p): p is AiSdkPart => typeof p === "object" && p !== null && typeof (p as AiSdkPart).type === "string") : [];
}

export function roleOf(message: unknown): string | undefined {
  return typeof message === "object" && message !== null ? (message as { role?: string }).role : undefined;
}

/** The context the SDK handed this call, in either major. */
export function contextOf<Context>(options: Pick<AiSdkExecuteOptions<Context>, "context" | "experimental_context">): Context | undefined {
  // v6 passes experimental_context untyped; the caller's Context says what it holds, as in v7.
  return options.context !== undefined ? options.context : (options.experimental_context as Context | undefined);
}
