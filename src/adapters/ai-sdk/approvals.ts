/**
 * effectgate's durable approvals behind the AI SDK's own approval surface:
 * - `toolApproval` (ai 7): the call-level approval function, answering from the durable request;
 * - `approvalResponses`: the `tool-approval-response` parts for requests a person decided
 *   elsewhere (`effectgate approvals approve ID` in another process), to send back to the SDK;
 * - `recordSdkApproval`: an approval given through the SDK, recorded as the durable decision
 *   (only when the adapter is told to accept them).
 * An approval is bound to the call's digest (tenant, key, tool, canonical input): approving one
 * call never releases another, and a call whose input changed asks again.
 */
import type { Scope } from "../../core/keys.js";
import { decideCall } from "../../governance/operator.js";
import type { ApprovalStatus } from "../../governance/govern.js";
import type { Gate } from "../../root/create-gate.js";
import type { ToolCall } from "../../root/tool-calls.js";
import { partsOf, roleOf, type AiSdkScope } from "./types.js";

/** ai 7 `ToolApprovalStatus`, the object form. */
export type AiSdkApprovalStatus =
  | { readonly type: "not-applicable" }
  | { readonly type: "approved" | "denied" | "user-approval"; readonly reason?: string };

/** How a durable approval's state reads as an AI SDK approval status. */
export function sdkStatusOf(status: ApprovalStatus): AiSdkApprovalStatus {
  switch (status.state) {
    case "not_needed":
    case "refused": // running it gives the refusal, with its reason, as the tool's error
      return { type: "not-applicable" };
    case "none":
      return { type: "user-approval", reason: `needs approval (${status.reasons.join("; ")}): effectgate approvals approve ${status.id}` };
    case "pending":
      return { type: "user-approval", reason: `effectgate approval ${status.id} (${status.record.reasons.join("; ")}): effectgate approvals approve ${status.id}` };
    case "approved":
    case "consumed":
      return { type: "approved", reason: `approved by ${status.record.decidedBy ?? "an approver"} (${status.id})` };
    case "denied":
      return { type: "denied", reason: `denied by ${status.record.decidedBy ?? "an approver"}${status.record.note === null ? "" : `: ${status.record.note}`} (${status.id})` };
    case "expired":
      return { type: "denied", reason: `the approval request ${status.id} expired undecided` };
  }
}

/**
 * The call-level `toolApproval` of ai 7 (`generateText({ toolApproval: toolApproval(gate, { scope }) })`):
 * a durable request is filed for each call that needs one (the SDK then emits its
 * `tool-approval-request`, reason naming the request id), and a call a person approved or denied
 * elsewhere is answered so. Tools the gate does not know are not-applicable.
 */
export function toolApproval<Context = unknown>(gate: Gate, options: { readonly scope: AiSdkScope<Context> }) {
  return async (request: {
    readonly toolCall: { readonly toolCallId: string; readonly toolName: string; readonly input: unknown };
    readonly messages?: readonly unknown[];
    readonly toolsContext?: unknown;
    readonly runtimeContext?: unknown;
  }): Promise<AiSdkApprovalStatus> => {
    const { toolCallId, toolName, input } = request.toolCall;
    if (!gate.tools.has(toolName)) return { type: "not-applicable" };
    const toolContext = typeof request.toolsContext === "object" && request.toolsContext !== null
      ? (request.toolsContext as Record<string, unknown>)[toolName] : undefined;
    // The tool's own context first, as execute sees it (ai 7 hands execute no runtime context).
    const context = (toolContext ?? request.runtimeContext) as Context | undefined;
    const scope = await options.scope({ toolCallId, toolName, messages: request.messages ?? [], context });
    return sdkStatusOf(await gate.approvalFor({ id: toolCallId, name: toolName, input }, scope));
  };
}

/** One `tool-approval-response` part, as the SDK reads it from a `tool` message. */
export interface AiSdkApprovalResponse {
  readonly type: "tool-approval-response";
  readonly approvalId: string;
  readonly approved: boolean;
  readonly reason?: string;
}

/**
 * After a run stopped at `tool-approval-request`s: the responses for the requests a person has
 * decided in effectgate since (from the CLI, the console or the `approver`), as a `tool` message
 * to append to the messages before calling the SDK again. Undefined when nothing is decided yet.
 * `messages`: the conversation so far, including the assistant message with the requests (ai 7:
 * `result.responseMessages`, which holds every step's; ai 6: `result.response.messages`).
 * `context`: what the scope function gets as `context`, as the tools got it (default none).
 */
export async function approvalResponses<Context = unknown>(
  gate: Gate, messages: readonly unknown[], options: { readonly scope: AiSdkScope<Context>; readonly context?: Context },
): Promise<{ role: "tool"; content: AiSdkApprovalResponse[] } | undefined> {
  const calls = new Map<string, { name: string; input: unknown }>();
  const requests: { approvalId: string; toolCallId: string }[] = [];
  const answered = new Set<string>();
  for (const message of messages) {
    for (const part of partsOf(message)) {
      const p = part as { type: string; toolCallId?: string; toolName?: string; input?: unknown; approvalId?: string };
      if (p.type === "tool-call" && typeof p.toolCallId === "string" && typeof p.toolName === "string") calls.set(p.toolCallId, { name: p.toolName, input: p.input });
      if (p.type === "tool-approval-request" && typeof p.approvalId === "string" && typeof p.toolCallId === "string") requests.push({ approvalId: p.approvalId, toolCallId: p.toolCallId });
      if ((p.type === "tool-approval-response" && typeof p.approvalId === "string")) answered.add(p.approvalId);
    }
  }
  const content: AiSdkApprovalResponse[] = [];
  for (const request of requests) {
    const call = calls.get(request.toolCallId);
    if (answered.has(request.approvalId) || !call || !gate.tools.has(call.name)) continue;
    const scope = await options.scope({ toolCallId: request.toolCallId, toolName: call.name, messages, context: options.context });
    const status = sdkStatusOf(await gate.approvalFor({ id: request.toolCallId, name: call.name, input: call.input }, scope, { file: false }));
    if (status.type === "approved" || status.type === "denied") {
      content.push({ type: "tool-approval-response", approvalId: request.approvalId, approved: status.type === "approved", ...(status.reason === undefined ? {} : { reason: status.reason }) });
    }
  }
  return content.length > 0 ? { role: "tool", content } : undefined;
}

/**
 * The SDK approved this call (a `tool-approval-response` with `approved: true` for the request
 * of this `toolCallId` in the last `tool` message): record it as the durable decision, so the gate
 * releases this exact call. Does nothing when the messages hold no such response.
 */
export async function recordSdkApproval(gate: Gate, call: ToolCall, scope: Scope, messages: readonly unknown[]): Promise<void> {
  const approvalIds = new Set<string>();
  for (const message of messages) {
    if (roleOf(message) !== "assistant") continue;
    for (const part of partsOf(message)) if (part.type === "tool-approval-request" && part.toolCallId === call.id && part.approvalId) approvalIds.add(part.approvalId);
  }
  const last = messages.at(-1);
  if (approvalIds.size === 0 || roleOf(last) !== "tool") return;
  const response = partsOf(last).find((p) => p.type === "tool-approval-response" && p.approvalId !== undefined && approvalIds.has(p.approvalId));
  if (response?.approved !== true) return;
  const status = await gate.approvalFor(call, scope);
  if (status.state === "pending") {
    await decideCall(gate.ledger, status.id, { approve: true, by: "ai-sdk", note: `tool-approval-response ${response.approvalId ?? ""}` });
  }
}
