/**
 * The gate's answer for one call, as an MCP tool result. A call the upstream answered comes back
 * as the upstream's own result (content, structuredContent, isError), replays included. Anything
 * the gateway says itself (a refusal, a wait, an unknown outcome) is an `isError: true` result
 * whose text starts with its EG_ code, says why and what to do.
 */
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import type { ToolResultBlock } from "../core/blocks.js";

export function toCallToolResult(block: ToolResultBlock): CallToolResult {
  if (block.is_error) return errorToolResult(block.content);
  let parsed: unknown;
  try {
    parsed = JSON.parse(block.content);
  } catch {
    return { content: [{ type: "text", text: block.content }] };
  }
  if (typeof parsed === "object" && parsed !== null && Array.isArray((parsed as { content?: unknown }).content)) return parsed as CallToolResult;
  return { content: [{ type: "text", text: block.content }] };
}

export function errorToolResult(text: string): CallToolResult {
  return { content: [{ type: "text", text }], isError: true };
}
