/**
 * What an operator (or an approval bot, or the web console) does to governance state, as
 * library calls on a ledger: the CLI's `kill`, `breaker` and `approvals` commands do the same.
 */
import { EffectgateError } from "../core/errors.js";
import type { Stores } from "../contracts/stores.js";
import { decideApproval, type ApprovalDecision, type DecideResult } from "./approvals.js";
import type { ApprovalCountQuery, ApprovalQuery, ApprovalRecord, Breaker, GovernanceStore, KillSwitch, KillTarget } from "../contracts/governance.js";

export function governanceOf(ledger: Stores): GovernanceStore {
  if (!ledger.governance) throw new EffectgateError("EG_BAD_POLICY", `the ledger ${ledger.location} keeps no governance state`);
  return ledger.governance;
}

/** Turns a kill switch on or off (`{}`: every tenant and agent). Returns whether anything changed. */
export function setKillSwitch(ledger: Stores, on: boolean, target: KillTarget, meta: { by: string; reason?: string }, now = Date.now()): Promise<boolean> {
  return governanceOf(ledger).setKillSwitch(target, on, meta, now);
}

export function listKillSwitches(ledger: Stores): Promise<KillSwitch[]> {
  return governanceOf(ledger).listKillSwitches();
}

export function getApproval(ledger: Stores, id: string): Promise<ApprovalRecord | undefined> {
  return governanceOf(ledger).getApproval(id);
}

export function listApprovals(ledger: Stores, query: ApprovalQuery = {}): Promise<ApprovalRecord[]> {
  return governanceOf(ledger).listApprovals(query);
}

/** How many requests match every filter given: exact, never capped (`countApprovals(ledger, { state: "pending" })`). */
export function countApprovals(ledger: Stores, query: ApprovalCountQuery = {}): Promise<number> {
  return governanceOf(ledger).countApprovals(query);
}

/** Approves or denies a pending request (see decideApproval for expiry). */
export function decideCall(ledger: Stores, id: string, decision: ApprovalDecision, now = Date.now()): Promise<DecideResult> {
  return decideApproval(governanceOf(ledger), id, decision, now);
}

export function listBreakers(ledger: Stores, options: { includeClosed?: boolean; limit?: number } = {}): Promise<Breaker[]> {
  return governanceOf(ledger).listBreakers(options);
}

/** How many rate breakers are open (with `includeClosed`, how many there are): exact, never capped. */
export function countBreakers(ledger: Stores, options: { includeClosed?: boolean } = {}): Promise<number> {
  return governanceOf(ledger).countBreakers(options);
}

export function closeBreaker(ledger: Stores, id: string, by: string, now = Date.now()): Promise<Breaker | undefined> {
  return governanceOf(ledger).closeBreaker(id, by, now);
}
