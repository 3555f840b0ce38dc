/**
 * What every SDK adapter shares: the scope function, the text an answer gives the model, and
 * the error an adapter throws where its SDK wants a throw. Each SDK's own code sits beside this
 * file (src/adapters/<sdk>/) behind its entry (src/<sdk>.ts); nothing here imports an SDK.
 */
import type { Scope } from "../core/keys.js";
import { renderResult } from "../core/blocks.js";
import type { ErrorCode } from "../core/errors.js";
import { collapsedPreamble } from "../core/repeats.js";
import type { StandardSchemaV1 } from "../core/standard-schema.js";
import type { ToolAnswer } from "../root/tool-calls.js";

/**
 * The scope (tenant, task, agent) of a call, from the SDK's run context (AI SDK `context`,
 * OpenAI `RunContext`, LangGraph `config`…). Must give the same scope for a call every time it is
 * made, or its replay lands on another record.
 */
export type ScopeOf<Context> = (context: Context) => Scope | Promise<Scope>;

/**
 * The answer as the model should read it: the result as text (strings as they are), after the line
 * saying so when it is an earlier call's result (repeats: collapse), or the error with what to do.
 */
export function answerText(answer: ToolAnswer): string {
  if (!answer.ok) return withoutStackTrace(answer.message);
  return (answer.collapsed === undefined ? "" : collapsedPreamble(answer.collapsed)) + renderResult(answer.result);
}

/** A stack frame line as V8 prints it: `    at fn (file:///…/x.js:1:2)`, `    at /…/x.ts:67:88`, `    at async Promise.all (index 0)`. */
const STACK_FRAME = /^\s*at (?:.+ \((?:.+:\d+:\d+|<anonymous>|native|index \d+)\)|\S+:\d+:\d+)\s*$/;

/**
 * An error's text as the model may read it: without stack frames, which carry the machine's file
 * paths and say nothing the model can act on. A tool's or an SDK's error can embed its cause's
 * stack in its message (LangChain's ToolInvocationError does), and the gate records messages as
 * they are; every adapter's model-visible error text passes through this.
 */
export function withoutStackTrace(text: string): string {
  if (!text.includes("\n")) return text;
  return text.split("\n").filter((line) => !STACK_FRAME.test(line)).join("\n");
}

/**
 * Thrown by an adapter where its SDK turns a thrown error into the tool's error result for the
 * model (the message is effectgate's full `EG_…` text). Carries the answer for code that catches it.
 */
export class ToolCallRefused extends Error {
  readonly code: ErrorCode | undefined;
  readonly approvalId: string | undefined;
  readonly answer: Extract<ToolAnswer, { ok: false }>;

  constructor(answer: Extract<ToolAnswer, { ok: false }>) {
    super(withoutStackTrace(answer.message));
    this.name = "ToolCallRefused";
    this.code = answer.code as ErrorCode | undefined;
    this.approvalId = answer.approvalId;
    this.answer = answer;
  }
}

/** The SDK's call id, checked: without one a call cannot be keyed, and running it could run it twice. */
export function requireCallId(id: unknown, sdk: string, field: string): string {
  if (typeof id === "string" && id !== "") return id;
  throw new TypeError(`effectgate: ${sdk} gave this tool call no ${field}; a call without an id cannot be deduplicated, so it was not run`);
}

/** Any JSON object: the input check for a wrapped SDK tool whose parameters are a JSON schema (the SDK's own parser checks them). */
export const anyJsonObject: StandardSchemaV1<Record<string, unknown>> = {
  "~standard": {
    version: 1,
    vendor: "effectgate",
    validate: (value) => typeof value === "object" && value !== null && !Array.isArray(value)
      ? { value: value as Record<string, unknown> }
      : { issues: [{ message: "the input must be a JSON object" }] },
  },
};

/** Whether an SDK tool's schema is a Standard Schema (zod, valibot, …) the gate can validate with itself. */
export const isStandardSchema = (value: unknown): value is StandardSchemaV1 =>
  typeof value === "object" && value !== null && "~standard" in value;
