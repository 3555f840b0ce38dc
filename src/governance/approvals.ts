/**
 * Durable approvals. A call that needs a person's approval is stored as a pending request
 * (tool, input, dry-run preview, who asked, when) and answered EG_AWAITING_APPROVAL; an
 * approver decides through the CLI, `decideApproval`, or the gate's `approver` callback.
 *
 * An approval is bound to a digest of the exact tenant, key, tool, canonical input and policy
 * version, and its id is derived from that digest: the same call always finds the same
 * request, and approving one call can never release another with different arguments (that
 * call has its own digest, hence its own request). States move only along APPROVAL_MOVES,
 * compare-and-set, so a request is decided once and an approval consumed once.
 */
import { canonicalJson, sha256Hex } from "../core/keys.js";
import type { ApprovalRecord, GovernanceStore } from "../contracts/governance.js";

export function approvalDigest(call: { tenant: string; key: string; tool: string; input: unknown; policyVersion: string }): string {
  return sha256Hex(canonicalJson({ tenant: call.tenant, key: call.key, tool: call.tool, input: call.input, policyVersion: call.policyVersion }));
}

export function approvalId(digest: string): string {
  return `apr_${digest.slice(0, 24)}`;
}

/** A decision from a person (CLI, console) or from the gate's `approver` callback. */
export interface ApprovalDecision {
  readonly approve: boolean;
  /** Who decided; recorded with the time. */
  readonly by: string;
  readonly note?: string;
}

export type DecideResult =
  | { readonly ok: true; readonly approval: ApprovalRecord }
  | { readonly ok: false; readonly reason: "not_found" | "already_decided" | "expired"; readonly approval?: ApprovalRecord };

/**
 * Approves or denies a pending request. An approval is valid, from the moment it is given, for
 * as long as the request was allowed to wait; a request past its expiry is marked expired and
 * cannot be approved.
 */
export async function decideApproval(store: GovernanceStore, id: string, decision: ApprovalDecision, now: number): Promise<DecideResult> {
  for (;;) {
    const current = await store.getApproval(id);
    if (!current) return { ok: false, reason: "not_found" };
    if (current.state !== "pending") return { ok: false, reason: "already_decided", approval: current };
    if (now >= current.expiresAt) {
      const expired = await store.moveApproval(id, "pending", { to: "expired" }, now);
      if (!expired) continue;
      return { ok: false, reason: "expired", approval: expired };
    }
    const moved = await store.moveApproval(id, "pending", decision.approve
      ? { to: "approved", by: decision.by, ...(decision.note === undefined ? {} : { note: decision.note }), expiresAt: now + (current.expiresAt - current.requestedAt) }
      : { to: "denied", by: decision.by, ...(decision.note === undefined ? {} : { note: decision.note }) }, now);
    if (moved) return { ok: true, approval: moved };
    // Someone else decided (or it expired) meanwhile: read it again and report that.
  }
}

/** Marks a pending or approved request expired when its time has come; returns the record as it now stands. */
export async function expireIfDue(store: GovernanceStore, approval: ApprovalRecord, now: number): Promise<ApprovalRecord> {
  if ((approval.state !== "pending" && approval.state !== "approved") || now < approval.expiresAt) return approval;
  const expired = await store.moveApproval(approval.id, approval.state, { to: "expired" }, now);
  return expired ?? (await store.getApproval(approval.id)) ?? approval;
}
