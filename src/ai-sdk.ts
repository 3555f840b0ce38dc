/**
 * effectgate/ai-sdk: effectgate tools for the Vercel AI SDK (`ai` 6 and 7). See docs/adapters.md.
 *
 *   import { aiSdkTools, dropStoppedTools } from "effectgate/ai-sdk";
 *   const tools = aiSdkTools(gate, { scope: () => ({ tenant: user.id, task: chat.id }) });
 *   await generateText({ model, tools, prepareStep: dropStoppedTools(gate, tools, { scope }), messages });
 *
 * `ai` is an optional peer dependency; this entry imports nothing of it at run time.
 */
export { aiSdkTool, aiSdkTools, fromAiSdkTool, type AiSdkToolOptions } from "./adapters/ai-sdk/tools.js";
export { approvalResponses, sdkStatusOf, toolApproval, type AiSdkApprovalResponse, type AiSdkApprovalStatus } from "./adapters/ai-sdk/approvals.js";
export { dropStoppedTools, type StepInfo } from "./adapters/ai-sdk/prepare-step.js";
export type { AiSdkCallInfo, AiSdkExecuteOptions, AiSdkScope, AiSdkTool } from "./adapters/ai-sdk/types.js";
export { ToolCallRefused } from "./adapters/shared.js";
export { answerToolCalls, type AiSdkToolResultPart } from "./adapters/ai-sdk/resume.js";
