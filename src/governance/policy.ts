/**
 * The governance policy as a typed object (the same shape as `effectgate.policy.json`; see
 * docs/governance.md). `createGate({ policy })` takes this object or the path of a policy file.
 *
 * Reads are free: `read` tools are never governed. Everything below concerns `write` and
 * `destructive` calls.
 */
import type { Json } from "../core/json.js";

/** A class of tool governance applies to. */
export type GovernedClass = "write" | "destructive";

/**
 * A name to match: exact, or with `*` standing for any run of characters (`"refund-*"`).
 * A selector left out matches everything.
 */
export type NamePattern = string;

/** Grants: write and destructive tools are denied unless some grant that matches the call's scope names the tool or its class. */
export interface GrantRule {
  readonly tenant?: NamePattern;
  readonly agent?: NamePattern;
  readonly task?: NamePattern;
  /** Tool names, or "*" for every tool. */
  readonly tools?: readonly string[];
  /** Every tool of these classes. */
  readonly classes?: readonly GovernedClass[];
}

/** Where a quota counts: per task, per session (Scope.session; the task when the scope has none), per agent or per tenant. */
export type QuotaPer = "task" | "session" | "agent" | "tenant";

export interface QuotaRule {
  /** Names the counter (default: derived from per/tool/class/sum, e.g. "task/charge_card/sum:amount"). Keep it when editing the rule, or the count starts again. */
  readonly id?: string;
  readonly per: QuotaPer;
  /** Only this tool's calls (default: every governed tool of `class`, or all). */
  readonly tool?: string;
  readonly class?: GovernedClass;
  /** At most this many calls, or this total of `sum`. */
  readonly limit: number;
  /** Dot path of a numeric input field (e.g. "amount"): the quota sums it instead of counting calls. */
  readonly sum?: string;
}

/** Where a rate breaker counts, and what it stops while open. */
export type RatePer = "task" | "agent" | "tenant";

export interface RateLimitRule {
  readonly id?: string;
  readonly per: RatePer;
  readonly tool?: string;
  readonly class?: GovernedClass;
  /** More calls than this within `windowMs` opens the breaker. */
  readonly limit: number;
  readonly windowMs: number;
}

/** A declarative condition on the call's input (`{ "field": "amount", "gt": 100 }`). */
export type Condition =
  | {
      /** Dot path into the input. */
      readonly field: string;
      readonly gt?: number;
      readonly gte?: number;
      readonly lt?: number;
      readonly lte?: number;
      readonly eq?: Json;
      readonly ne?: Json;
      readonly in?: readonly Json[];
      readonly exists?: boolean;
    }
  | { readonly all: readonly Condition[] }
  | { readonly any: readonly Condition[] }
  | { readonly not: Condition };

export interface ApprovalRule {
  readonly tool?: string;
  readonly class?: GovernedClass;
  /** Default: always. In code, a function of the validated input may stand in for the declarative form. */
  readonly when?: Condition | ((input: unknown) => boolean);
  /** Shown to the approver and the agent (default: the condition in words). */
  readonly reason?: string;
}

export interface Policy {
  /** Bound into every approval (default: a hash of the policy). Changing the policy changes it, so old approvals no longer release calls. */
  readonly version?: string;
  /** Omitted: every tool handed to the gate is granted. `[]`: no write or destructive tool is. */
  readonly grants?: readonly GrantRule[];
  readonly quotas?: readonly QuotaRule[];
  readonly rateLimits?: readonly RateLimitRule[];
  readonly approvals?: {
    /** How long a request waits for a decision, and an approval for its call (default 24 h). */
    readonly ttlMs?: number;
    /** Destructive calls always need approval; these rules add others. */
    readonly rules?: readonly ApprovalRule[];
  };
  /** Tools whose effect cannot be undone (an e-mail sent): every call needs approval, and sagas cannot compensate them. */
  readonly nonCompensable?: readonly string[];
}

export const DEFAULT_APPROVAL_TTL_MS = 24 * 60 * 60 * 1000;

/** The file the CLI and docs name by default. */
export const DEFAULT_POLICY_FILE = "effectgate.policy.json";
