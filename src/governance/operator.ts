/**
 * What an operator (or an approval bot, or the web console) does to governance state, as
 * library calls on a ledger: the CLI's `kill`, `breaker` and `approvals` commands do the same.
 */
import { EffectgateError } from "../core/errors.js";
import type { Ledger } from "../contracts/calls.js";
import type { ToolResultBlock } from "../core/blocks.js";
import { decideApproval, type ApprovalDecision, type DecideResult } from "./approvals.js";
import type { ApprovalQuery, ApprovalRecord, Breaker, GovernanceStore, KillSwitch, KillTarget } from "../contracts/governance.js";

export function governanceOf(ledger: Ledger): GovernanceStore {
  if (!ledger.governance) throw new EffectgateError("EG_BAD_POLICY", `the ledger ${ledger.location} keeps no governance state`);
  return ledger.governance;
}

/** Turns a kill switch on or off (`{}`: every tenant and agent). Returns whether anything changed. */
export function setKillSwitch(ledger: Ledger, on: boolean, target: KillTarget, meta: { by: string; reason?: string }, now = Date.now()): Promise<boolean> {
  return governanceOf(ledger).setKillSwitch(target, on, meta, now);
}

export function listKillSwitches(ledger: Ledger): Promise<KillSwitch[]> {
  return governanceOf(ledger).listKillSwitches();
}

export function listApprovals(ledger: Ledger, query: ApprovalQuery = {}): Promise<ApprovalRecord[]> {
  return governanceOf(ledger).listApprovals(query);
}

/** Approves or denies a pending request (see decideApproval for expiry). */
export function decideCall(ledger: Ledger, id: string, decision: ApprovalDecision, now = Date.now()): Promise<DecideResult> {
  return decideApproval(governanceOf(ledger), id, decision, now);
}

export function listBreakers(ledger: Ledger, options: { includeClosed?: boolean } = {}): Promise<Breaker[]> {
  return governanceOf(ledger).listBreakers(options);
}

export function closeBreaker(ledger: Ledger, id: string, by: string, now = Date.now()): Promise<Breaker | undefined> {
  return governanceOf(ledger).closeBreaker(id, by, now);
}

/** The approval request id in an EG_AWAITING_APPROVAL result, or undefined for any other result (to suspend a run until it is decided). */
export function awaitingApproval(block: Pick<ToolResultBlock, "content" | "is_error">): string | undefined {
  if (!block.is_error || !block.content.startsWith("EG_AWAITING_APPROVAL:")) return undefined;
  return /\b(apr_[0-9a-f]+)\b/.exec(block.content)?.[1];
}
