/**
 * effectgate/anthropic: effectgate tools for the Anthropic SDK's tool runner
 * (`client.beta.messages.toolRunner`). See docs/adapters.md.
 *
 *   import { anthropicTools } from "effectgate/anthropic";
 *   const runner = client.beta.messages.toolRunner({ model, max_tokens, messages,
 *     tools: anthropicTools(gate, { scope: () => ({ tenant: user.id, task: chat.id }) }) });
 *
 * `@anthropic-ai/sdk` is an optional peer dependency; this entry imports nothing of it.
 */
export {
  anthropicTool, anthropicTools, fromAnthropicTool,
  type AnthropicRunContext, type AnthropicRunnableTool, type AnthropicScope, type AnthropicToolContent, type AnthropicToolOptions,
} from "./adapters/anthropic/tools.js";
export { checkpointReply, waitingApprovals } from "./adapters/anthropic/loop.js";
export { ToolCallRefused } from "./adapters/shared.js";
