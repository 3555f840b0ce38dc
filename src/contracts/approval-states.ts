/**
 * An approval's states and the moves between them, as data: every store refuses any other
 * move, compare-and-set on the current state, so a request is decided once and consumed once.
 */
import type { ApprovalState } from "./governance.js";

/** The state table: pending → approved | denied | expired; approved → consumed | expired. */
export const APPROVAL_MOVES: Readonly<Record<ApprovalState, readonly ApprovalState[]>> = {
  pending: ["approved", "denied", "expired"],
  approved: ["consumed", "expired"],
  denied: [],
  expired: [],
  consumed: [],
};

export function canMoveApproval(from: ApprovalState, to: ApprovalState): boolean {
  return APPROVAL_MOVES[from].includes(to);
}
