/**
 * Anthropic-shaped content blocks, as the Messages API uses them. The gate reads
 * `tool_use` blocks from an assistant message's content and answers each with a
 * `tool_result` block carrying the same id.
 */
import { EffectgateError, errorMessage, type ErrorCode } from "./errors.js";
import type { Json } from "./json.js";

export interface ToolUseBlock {
  readonly type: "tool_use";
  readonly id: string;
  readonly name: string;
  readonly input: unknown;
}

export interface ToolResultBlock {
  readonly type: "tool_result";
  readonly tool_use_id: string;
  readonly content: string;
  readonly is_error: boolean;
}

/** One tool_use block found in content, well-formed or not (a malformed one still gets an answer). */
export type FoundToolUse =
  | { readonly ok: true; readonly block: ToolUseBlock }
  | { readonly ok: false; readonly id: string; readonly problem: string };

/** Picks the tool_use blocks out of an assistant content array, in order; other blocks are passed over. */
export function findToolUses(content: unknown): FoundToolUse[] {
  if (!Array.isArray(content)) {
    const hint =
      typeof content === "object" && content !== null && Array.isArray((content as { content?: unknown }).content)
        ? " (got a message object: pass message.content)"
        : "";
    throw new EffectgateError("EG_BAD_CONTENT", `runToolUses needs the assistant message's content array${hint}; got ${describe(content)}`);
  }
  const found: FoundToolUse[] = [];
  content.forEach((raw: unknown, index) => {
    if (typeof raw !== "object" || raw === null) return;
    const block = raw as Record<string, unknown>;
    if (block.type !== "tool_use") return;
    const id = typeof block.id === "string" ? block.id : "";
    const where = `tool_use block ${index}`;
    if (id === "") found.push({ ok: false, id, problem: `${where} has no id (a string is required), so it cannot be answered or deduplicated` });
    else if (typeof block.name !== "string" || block.name === "") found.push({ ok: false, id, problem: `${where} (${id}) has no tool name` });
    else if (typeof block.input !== "object" || block.input === null || Array.isArray(block.input)) {
      found.push({ ok: false, id, problem: `${where} (${id}) input must be a JSON object, got ${describe(block.input)}` });
    } else found.push({ ok: true, block: { type: "tool_use", id, name: block.name, input: block.input } });
  });
  return found;
}

export function resultBlock(toolUseId: string, content: string, isError: boolean): ToolResultBlock {
  return { type: "tool_result", tool_use_id: toolUseId, content, is_error: isError };
}

function describe(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  return typeof value;
}

/**
 * An `is_error` result whose content starts with its code: `EG_…: message`. Every error result
 * the gate and its features give is built here, so a misspelt code does not type-check.
 */
export function errorResult(toolUseId: string, code: ErrorCode, message: string): ToolResultBlock {
  return resultBlock(toolUseId, errorMessage(code, message), true);
}

/** The code an error result starts with, if it is one of effectgate's. */
export function errorCodeOf(block: Pick<ToolResultBlock, "content" | "is_error">): string | undefined {
  return block.is_error ? /^(EG_[A-Z_]+): /.exec(block.content)?.[1] : undefined;
}

/** The stored result as tool_result content: strings as they are, anything else as JSON. */
export function renderResult(result: Json | null): string {
  return typeof result === "string" ? result : JSON.stringify(result);
}
