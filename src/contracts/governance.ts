/**
 * The governance store contract: the durable state behind kill switches, quotas, rate
 * breakers and approvals. Every ledger store implements it in its own file (memory, SQLite,
 * PostgreSQL) and reaches it as `ledger.governance`; one contract suite
 * (src/testing/contract-suites/governance.ts) runs against each.
 *
 * Rules every store keeps:
 * - `consumeQuota` and `hitRate` are atomic: of any number of workers sharing the store, the
 *   sum they admit never exceeds a limit (one SQLite transaction, one PostgreSQL statement).
 * - Both are idempotent per call (tenant + key): the same call charged or counted twice (a
 *   replay, a twin, a crash between two steps) counts once.
 * - Approvals move only along their state table (approvals.ts), compare-and-set on their
 *   current state: an approval is decided once and consumed once.
 * - Times are epoch ms passed in by the caller (`now`), so tests use injectable clocks.
 */
import type { EffectClass } from "../core/effect-class.js";
import type { Json } from "../core/json.js";
import type { DryRunPreview } from "../core/hooks.js";

// ---- kill switches ---------------------------------------------------------------------------

/** Which calls a kill switch stops. Neither field: every tenant and agent. */
export interface KillTarget {
  readonly tenant?: string;
  readonly agent?: string;
}

export interface KillSwitch {
  /** null: every tenant. */
  readonly tenant: string | null;
  /** null: every agent. */
  readonly agent: string | null;
  readonly by: string;
  readonly reason: string | null;
  readonly since: number;
}

// ---- quotas ----------------------------------------------------------------------------------

/** One counter a call charges: the rule's counter in the call's task, session, agent or tenant. */
export interface QuotaCharge {
  /** Stable id of the counter (rule id + where it counts), see quotas.ts. */
  readonly counter: string;
  readonly limit: number;
  /** 1 for a count; the input field's value for a sum. */
  readonly amount: number;
}

export type QuotaVerdict =
  /** `charged: false` when this call (tenant + key) was charged before: nothing was added again. */
  | { readonly ok: true; readonly charged: boolean }
  /** Nothing was charged, on any counter. */
  | { readonly ok: false; readonly counter: string; readonly used: number; readonly limit: number; readonly amount: number };

export interface QuotaCounter {
  readonly counter: string;
  readonly used: number;
  readonly updatedAt: number;
}

// ---- rate breakers ---------------------------------------------------------------------------

/** One sliding-window limit a call counts against. */
export interface RateCount {
  /** The breaker this window feeds: rule id + scope (e.g. `task:acme/t1`), see breakers.ts. */
  readonly breaker: string;
  /** The scope the breaker stops while open (`task:…`, `agent:…`, `tenant:…`). */
  readonly scope: string;
  readonly limit: number;
  readonly windowMs: number;
}

export interface Breaker {
  readonly id: string;
  readonly tenant: string;
  readonly scope: string;
  readonly state: "open" | "closed";
  /** Why it opened: the limit and window, in words. */
  readonly reason: string;
  readonly openedAt: number;
  readonly closedBy: string | null;
  readonly closedAt: number | null;
}

export type RateVerdict =
  | { readonly ok: true }
  /** Refused: `breaker` is open for one of the call's scopes. `opened`: this call opened it (raise the alert once). */
  | { readonly ok: false; readonly breaker: Breaker; readonly opened: boolean };

// ---- approvals -------------------------------------------------------------------------------

export type ApprovalState = "pending" | "approved" | "denied" | "expired" | "consumed";
export const APPROVAL_STATES: readonly ApprovalState[] = ["pending", "approved", "denied", "expired", "consumed"];

export interface ApprovalRecord {
  /** `apr_` + the start of the digest: the same call always gets the same id. */
  readonly id: string;
  readonly tenant: string;
  /** The call's idempotency key. */
  readonly key: string;
  readonly tool: string;
  readonly effect: EffectClass;
  readonly task: string;
  readonly agent: string | null;
  readonly toolUseId: string;
  /** The input as stored (fields the tool marks `redact` replaced by "[redacted]"). */
  readonly input: Json;
  readonly preview: DryRunPreview | null;
  /** Why the call needs approval (the rules that matched). */
  readonly reasons: readonly string[];
  /** SHA-256 of the canonical { tenant, key, tool, input, policyVersion }: the approval releases this call only. */
  readonly digest: string;
  readonly policyVersion: string;
  readonly state: ApprovalState;
  /** The agent (or "agent") and gate owner that asked. */
  readonly requestedBy: string;
  readonly requestedAt: number;
  /** Pending: decide before this. Approved: run before this. */
  readonly expiresAt: number;
  readonly decidedBy: string | null;
  readonly decidedAt: number | null;
  readonly note: string | null;
  readonly consumedAt: number | null;
}

export type NewApproval = Omit<ApprovalRecord, "state" | "decidedBy" | "decidedAt" | "note" | "consumedAt">;

export interface ApprovalMove {
  readonly to: ApprovalState;
  /** Who decided (approve / deny). */
  readonly by?: string;
  readonly note?: string;
  /** A new expiry (approve: the approval is valid this long from now). */
  readonly expiresAt?: number;
}

/** What `listApprovals` filters by: every filter given must hold. */
export interface ApprovalQuery {
  readonly state?: ApprovalState;
  readonly tenant?: string;
  /** The call's idempotency key: with `tenant`, the requests made for one call (without, that key in every tenant). */
  readonly key?: string;
  /** At most this many, oldest first (default 100). */
  readonly limit?: number;
}

/** What `countApprovals` counts: the requests matching every filter given. */
export type ApprovalCountQuery = Omit<ApprovalQuery, "limit">;

// ---- the store -------------------------------------------------------------------------------

export interface GovernanceStore {
  /** The kill switch that stops a call of this tenant and agent, if any (global, tenant, agent, or tenant + agent). One indexed read. */
  activeKillSwitch(tenant: string, agent: string | undefined): Promise<KillSwitch | undefined>;
  /** Sets (on) or clears (off) one switch. Returns whether anything changed. */
  setKillSwitch(target: KillTarget, on: boolean, meta: { readonly by: string; readonly reason?: string }, now: number): Promise<boolean>;
  listKillSwitches(): Promise<KillSwitch[]>;

  /** Current totals of these counters (absent: 0). Read only; the atomic check is `consumeQuota`. */
  quotaUsage(counters: readonly string[]): Promise<ReadonlyMap<string, number>>;
  /** Charges every counter, or none if any would pass its limit; once per (tenant, key). */
  consumeQuota(request: { readonly tenant: string; readonly key: string; readonly charges: readonly QuotaCharge[]; readonly now: number }): Promise<QuotaVerdict>;
  listQuotas(options?: { readonly prefix?: string; readonly limit?: number }): Promise<QuotaCounter[]>;

  /**
   * Counts the call (once per tenant + key) in each window. Refuses when a breaker is open for
   * any of `scopes`, or when counting the call would pass a window's limit (which opens that
   * breaker and counts nothing).
   */
  hitRate(request: {
    readonly tenant: string;
    readonly key: string;
    readonly scopes: readonly string[];
    readonly counts: readonly RateCount[];
    readonly now: number;
  }): Promise<RateVerdict>;
  listBreakers(options?: { readonly includeClosed?: boolean; readonly limit?: number }): Promise<Breaker[]>;
  /** How many breakers are open (with `includeClosed`, how many there are): exact, never capped. */
  countBreakers(options?: { readonly includeClosed?: boolean }): Promise<number>;
  /** Closes an open breaker and forgets its window (so the next call does not re-open it at once). */
  closeBreaker(id: string, by: string, now: number): Promise<Breaker | undefined>;

  /** Stores a new pending request, or returns the one with this id unchanged (`created: false`). */
  putApproval(request: NewApproval): Promise<{ readonly created: boolean; readonly approval: ApprovalRecord }>;
  getApproval(id: string): Promise<ApprovalRecord | undefined>;
  /** Oldest first (requested time, then id). In the SQL stores a state walks an index, and so does a key. */
  listApprovals(query?: ApprovalQuery): Promise<ApprovalRecord[]>;
  /**
   * The exact number of requests matching every filter given, never capped (one COUNT in the SQL
   * stores: the pending requests walk the state index, a call's the key index).
   */
  countApprovals(query?: ApprovalCountQuery): Promise<number>;
  /** Compare-and-set on the state: moves `id` from `from` to `move.to`; undefined when it was not in `from`. */
  moveApproval(id: string, from: ApprovalState, move: ApprovalMove, now: number): Promise<ApprovalRecord | undefined>;
}
