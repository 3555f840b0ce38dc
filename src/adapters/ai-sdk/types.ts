/**
 * The parts of the Vercel AI SDK (`ai` 6 and 7) this adapter touches, typed structurally so one
 * adapter serves both majors and nothing here imports `ai`: v7 passes the tool's context as
 * `context`, v6 as `experimental_context`; v7 decides approvals with the call-level
 * `toolApproval`, v6 (and v7, deprecated) with the tool's `needsApproval`.
 */
import type { Scope } from "../../core/keys.js";

/** What `execute` receives from the SDK (ToolExecutionOptions of v6 and v7). */
export interface AiSdkExecuteOptions {
  readonly toolCallId: string;
  readonly messages: readonly unknown[];
  readonly abortSignal?: AbortSignal;
  /** v7: the tool's context. */
  readonly context?: unknown;
  /** v6: the context passed to generateText / streamText. */
  readonly experimental_context?: unknown;
}

/** What the scope function sees of a call (or, in prepareStep, of a step: no call id then). */
export interface AiSdkCallInfo {
  readonly toolCallId?: string;
  readonly toolName?: string;
  readonly messages: readonly unknown[];
  /** v7 `context` (the tool's context) or v6 `experimental_context`; in v7 prepareStep / toolApproval, the runtime context. */
  readonly context: unknown;
}

export type AiSdkScope = (call: AiSdkCallInfo) => Scope | Promise<Scope>;

/** An AI SDK tool as this adapter builds it (assignable to `Tool` of ai 6 and 7). */
export interface AiSdkTool<Input = unknown> {
  readonly description?: string;
  /**
   * The effectgate tool's own Standard Schema (zod, valibot…), which the SDK validates with too.
   * `any`: the SDK's FlexibleSchema differs between majors, and the gate validates again anyway.
   */
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  readonly inputSchema: any;
  execute(input: Input, options: AiSdkExecuteOptions): Promise<unknown> | AsyncIterable<unknown>;
  needsApproval?(input: Input, options: Omit<AiSdkExecuteOptions, "abortSignal">): Promise<boolean>;
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
export function contextOf(options: Pick<AiSdkExecuteOptions, "context" | "experimental_context">): unknown {
  return options.context !== undefined ? options.context : options.experimental_context;
}
