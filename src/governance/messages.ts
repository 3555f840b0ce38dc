/**
 * Every refusal governance gives the agent, in one place (docs/governance.md lists them).
 * Each starts with its EG_ code, says that nothing was executed, and tells the model what to
 * do next. They are tool_result contents with is_error: true.
 */
import { errorMessage } from "../core/errors.js";
import type { Scope } from "../core/keys.js";
import type { AnyTool } from "../core/tool.js";
import type { ApprovalRecord, Breaker, KillSwitch } from "../contracts/governance.js";
import { describePreview } from "./dry-run.js";

const iso = (ms: number) => new Date(ms).toISOString();

function switchScope(sw: KillSwitch): string {
  if (sw.tenant === null && sw.agent === null) return "everywhere";
  if (sw.tenant !== null && sw.agent !== null) return `for agent ${sw.agent} in tenant ${sw.tenant}`;
  return sw.tenant !== null ? `for tenant ${sw.tenant}` : `for agent ${sw.agent ?? ""}`;
}

export function killSwitchMessage(tool: AnyTool, sw: KillSwitch): string {
  return errorMessage("EG_KILL_SWITCH", `an operator has stopped every write and destructive call ${switchScope(sw)} with the kill switch ` +
    `(since ${iso(sw.since)}, by ${sw.by}${sw.reason === null ? "" : `: ${sw.reason}`}). This ${tool.name} call was not executed. ` +
    `Do not retry it or try another tool to get the same effect; tell the user that actions are paused.`);
}

export function notGrantedMessage(tool: AnyTool, scope: Scope, policySource: string): string {
  const who = scope.agent === undefined ? "" : ` to agent ${scope.agent}`;
  return errorMessage("EG_NOT_GRANTED", `${tool.name} (a ${tool.effect} tool) is not granted${who} in task ${scope.task} of tenant ${scope.tenant} ` +
    `by the policy (${policySource}). It was not executed. Do not retry it; tell the user this action needs a grant.`);
}

export function breakerOpenMessage(tool: AnyTool, breaker: Breaker): string {
  return errorMessage("EG_BREAKER_OPEN", `too many write and destructive calls: the rate breaker ${breaker.id} is open (${breaker.reason}; ` +
    `opened ${iso(breaker.openedAt)}) and an operator has been alerted. This ${tool.name} call was not executed. ` +
    `Stop making calls that change things; they will be refused until a person closes the breaker.`);
}

export function quotaExceededMessage(tool: AnyTool, q: { description: string; where: string; used: number; limit: number; amount: number; sum: string | undefined }): string {
  const asks = q.sum === undefined ? "this call would be one more" : `this call asks ${q.amount} more ${q.sum}`;
  return errorMessage("EG_QUOTA_EXCEEDED", `${tool.name} would pass its quota (${q.description}): ${q.where} has used ${q.used} of ${q.limit}, and ${asks}. ` +
    `It was not executed. Do not retry it; tell the user the limit was reached.`);
}

export function quotaInputMessage(tool: AnyTool, problem: string): string {
  return errorMessage("EG_QUOTA_EXCEEDED", `${tool.name} cannot be counted against its quota: ${problem}. It was not executed.`);
}

export function awaitingApprovalMessage(tool: AnyTool, approval: ApprovalRecord, created: boolean): string {
  const preview = approval.preview === null ? "" : ` Preview: ${describePreview(approval.preview)}.`;
  return errorMessage("EG_AWAITING_APPROVAL", `this ${tool.name} call needs a person's approval before it runs (${approval.reasons.join("; ")}). ` +
    `${created ? "Approval request" : "Its approval request"} ${approval.id} is pending until ${iso(approval.expiresAt)}.${preview} ` +
    `Nothing was executed. Repeat this same call (same tool_use id and input) later to run it once approved; ` +
    `do not make it under a new id or with other input, which would need a new approval.`);
}

export function approvalDeniedMessage(tool: AnyTool, approval: ApprovalRecord): string {
  return errorMessage("EG_APPROVAL_DENIED", `${approval.decidedBy ?? "an approver"} denied this ${tool.name} call (approval ${approval.id}` +
    `${approval.note === null ? "" : `: ${approval.note}`}). It was not executed and will not be. Do not retry it; tell the user.`);
}

export function approvalExpiredMessage(tool: AnyTool, approval: ApprovalRecord): string {
  const what = approval.decidedAt === null ? "nobody decided on its approval request" : "it was approved but not run in time";
  return errorMessage("EG_APPROVAL_EXPIRED", `this ${tool.name} call was not executed: ${what} (${approval.id}) before ${iso(approval.expiresAt)}. ` +
    `It will not run under this approval. If it is still needed, ask the user, then make the call again under a new id.`);
}

export function dryRunFailedMessage(tool: AnyTool, problem: string): string {
  return errorMessage("EG_DRY_RUN_FAILED", `the dry run of ${tool.name}, needed to ask a person for approval, failed: ${problem}. ` +
    `Nothing was executed and no approval was requested.`);
}
