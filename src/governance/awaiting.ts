/** Telling, in an agent loop, that a tool result is waiting for a person's approval. */
import { errorCodeOf, type ToolResultBlock } from "../core/blocks.js";

/** The approval request id in an EG_AWAITING_APPROVAL result, or undefined for any other result (to suspend a run until it is decided). */
export function awaitingApproval(block: Pick<ToolResultBlock, "content" | "is_error">): string | undefined {
  if (errorCodeOf(block) !== "EG_AWAITING_APPROVAL") return undefined;
  return /\b(apr_[0-9a-f]+)\b/.exec(block.content)?.[1];
}
