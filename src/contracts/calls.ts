/**
 * The call store contract: one record per gated call, written compare-and-set. The gate knows
 * only this interface; the memory, SQLite and PostgreSQL stores implement it and all pass the
 * same contract suite (src/testing/contract-suites/calls.ts).
 *
 * Rules every store keeps:
 * - One record per (tenant, key). Every read and write names the tenant.
 * - `claim` is atomic: of any number of concurrent claims for one key, exactly one
 *   returns `claimed: true`.
 * - Writes are compare-and-set on `version`: a write against a stale version changes
 *   nothing and returns `undefined`. Every successful write bumps `version`, except
 *   `renewLease`, which only extends the current owner's lease.
 * - Leases are judged by the store's own clock.
 * - A write has reached the store's durability level before its promise resolves.
 * - Damage is never read as absence: a corrupt or unreadable store rejects with
 *   EG_LEDGER_CORRUPT / EG_LEDGER_UNAVAILABLE.
 */
import type { CallState } from "../core/states.js";
import type { EffectClass } from "../core/effect-class.js";
import type { Json } from "../core/json.js";

export interface CallRecord {
  readonly tenant: string;
  readonly key: string;
  readonly tool: string;
  readonly effect: EffectClass;
  readonly task: string;
  /** The tool_use id of the call that first claimed the key. */
  readonly toolUseId: string;
  /** SHA-256 of the canonical {tool, input}: same key + different fingerprint is a mismatch. */
  readonly fingerprint: string;
  /**
   * SHA-256 of the canonical {tool, input the tool runs with} (the input as its schema parsed it:
   * fields it strips dropped, defaults filled in): what the intent windows compare (ToolSpec.repeats).
   * The fingerprint where the claim gave none, and in records made before schema version 9.
   */
  readonly intent: string;
  /** The input as stored (fields the tool marks `redact` replaced by "[redacted]"). */
  readonly input: Json;
  readonly inputRedacted: boolean;
  readonly state: CallState;
  /** The tool's result, once completed. */
  readonly result: Json | null;
  /** Why the call failed or needs a human. */
  readonly error: string | null;
  readonly owner: string | null;
  /** Epoch ms on the store's clock; null when nobody holds the call. */
  readonly leaseExpiresAt: number | null;
  /**
   * How many times the call was claimed to run: the first claim and every re-run. A crash
   * between a claim and the tool's start cannot be told from a crash during the tool, so this
   * counts starts that may or may not have reached the tool.
   */
  readonly attempts: number;
  /**
   * The fencing token of the call's current holder: 1 on the first claim (or the claimant's own,
   * see ClaimRequest), one more on every take-over, never lower. The tool gets it as `ctx.fence`;
   * a downstream that keeps the highest fence per key refuses a holder that lost its lease.
   */
  readonly fence: number;
  /**
   * The last moment a run of the tool may have sent a request, on the store's clock: the claim, a
   * counted re-run, the end of a run whose outcome is unknown (`sendEnded`), or, at a take-over,
   * the replaced holder's death (no later than its lease's end). A request may land until this +
   * the tool's settleMs: only then does a probe's "absent" allow a re-send.
   */
  readonly startedAt: number;
  /** Random, given by the store to each claim: a record removed and claimed again never has the same one. */
  readonly claimToken: string;
  readonly version: number;
  readonly createdAt: number;
  readonly updatedAt: number;
}

/** What a claim writes: the call's identity and input, and who holds it for how long (a new record is `in_progress`, attempt 1). */
export type ClaimRequest = Pick<CallRecord, "tenant" | "key" | "tool" | "effect" | "task" | "toolUseId" | "fingerprint" | "input" | "inputRedacted"> & {
  /** The call's intent (CallRecord.intent); the fingerprint when not given. */
  readonly intent?: string;
  readonly owner: string;
  readonly leaseMs: number;
  /** The fence the record starts with (default 1; the Idempotency-Key middleware records its caller's). */
  readonly fence?: number;
};

export type ClaimResult =
  /** The key was new: the record is `in_progress`, owned by the claimant, attempts = 1. */
  | { readonly claimed: true; readonly record: CallRecord }
  /** The key exists: its record as it stands. Nothing was changed. */
  | { readonly claimed: false; readonly record: CallRecord };

/**
 * An earlier call a new one repeats (the same tenant, task and intent under another key): one
 * still unsettled (`in_progress`, `uncertain`, `needs_human`) whatever its age, or one `completed`
 * at most `windowMs` ago (its last change, on the store's clock). See ToolSpec.repeats.
 */
export interface RepeatQuery {
  readonly tenant: string;
  readonly task: string;
  /** The new call's intent (CallRecord.intent). */
  readonly intent: string;
  /** The new call's own key: a record is never a repeat of itself. */
  readonly key: string;
  readonly windowMs: number;
}

/** What `claimUnlessRepeated` answers when the call repeats an earlier one: nothing was written. */
export interface Repeated {
  readonly claimed: false;
  /** The earliest call it repeats, as it stands. */
  readonly repeats: CallRecord;
}

/** A call answered without running its tool (a repeat refused or collapsed): recorded settled, so every replay gets this answer. */
export interface Answer {
  readonly state: "completed" | "failed";
  readonly result: Json | null;
  readonly error: string | null;
}

/** What `claimUnlessHalted` answers while a kill switch covers the call: nothing was written. */
export interface Halted {
  readonly claimed: false;
  readonly halted: true;
}

export interface RecordUpdate {
  readonly state: CallState;
  readonly result?: Json | null;
  readonly error?: string | null;
  /** Set the holder; `null` releases the call (lease cleared too). */
  readonly owner?: string | null;
  /** New lease length from now, for the (new) owner. */
  readonly leaseMs?: number;
  /** Count one more start of the tool (and set `startedAt` to now). */
  readonly countAttempt?: boolean;
  /** The holder's run of the tool just ended or was cancelled with its outcome unknown: `startedAt` becomes now. */
  readonly sendEnded?: boolean;
}

export interface TakeOverRequest {
  readonly tenant: string;
  readonly key: string;
  readonly version: number;
  readonly owner: string;
  readonly leaseMs: number;
  /**
   * Take the call even though its lease has not expired: only when the caller has proven
   * the holder dead (same host, process gone).
   */
  readonly holderIsDead?: boolean;
  /** The new holder's fence: at least one more than the current one (default: exactly one more). */
  readonly fence?: number;
}

/** A place in the list order (`listOrder`): the last record of the page before. */
export interface ListCursor {
  readonly createdAt: number;
  readonly tenant: string;
  readonly key: string;
}

/** What `list` filters by (every filter given must hold) and where a page starts. */
export interface ListQuery {
  readonly tenant?: string;
  readonly state?: CallState;
  readonly tool?: string;
  /** One key, in every tenant (operators looking a call up). */
  readonly key?: string;
  /** Only the calls of this task. */
  readonly task?: string;
  /** Only calls created at or after this time (epoch ms on the store's clock). */
  readonly createdFrom?: number;
  /** Only calls created at or before this time (epoch ms on the store's clock). */
  readonly createdTo?: number;
  /**
   * Only records after this one in the list order (keyset paging: pass the last record of the
   * previous page). Pages are places in the order, not offsets: a record added meanwhile never
   * moves a listed one to another page, so paging on never repeats or skips a record.
   */
  readonly after?: ListCursor;
  /** At most this many, oldest first: by creation time, then tenant and key byte by byte (`listOrder`), in every store (default 100). */
  readonly limit?: number;
}

/** What `countByStateAndEffect` counts: every call, or one tenant's. */
export interface CallCountQuery {
  readonly tenant?: string;
}

/** How many calls are in one state with one effect class. */
export interface CallCount {
  readonly state: CallState;
  readonly effect: EffectClass;
  readonly count: number;
}

/** Where an incremental scan stopped: the last record it read, in (updatedAt, tenant, key) order. */
export interface ChangeCursor {
  readonly at: number;
  readonly tenant: string;
  readonly key: string;
}

export interface ChangesQuery {
  /** The tool whose records to list. */
  readonly tool: string;
  /** Only records after this one in (updatedAt, tenant, key) order (tenant and key compared byte by byte); default: from the start. */
  readonly after?: ChangeCursor;
  /** Only records with updatedAt at or before this time (the store's clock). */
  readonly until?: number;
  /** At most this many (default 100). */
  readonly limit?: number;
}

export interface CallStore {
  /** Where the records live, for messages: "memory", "sqlite:/path/ledger.db". */
  readonly location: string;
  claim(request: ClaimRequest): Promise<ClaimResult>;
  /**
   * `claim`, made only while no kill switch of this ledger's governance store covers the tenant
   * (and `agent`; `undefined` or "" is no agent): the check is part of the claim itself, atomic
   * with it and without a round trip of its own. Optional: offered by stores whose kill switches
   * live with their calls (the memory, SQLite and PostgreSQL ledgers).
   */
  claimUnlessHalted?(request: ClaimRequest, agent: string | undefined): Promise<ClaimResult | Halted>;
  /**
   * Intent windows (ToolSpec.repeats): the earliest call that `query` says the new one repeats.
   * Cost follows the calls of that task with that input (an index), not the ledger. The three
   * repeat methods come together; a store without them cannot enforce a tool's `repeats` policy.
   */
  findRepeat?(query: RepeatQuery): Promise<CallRecord | undefined>;
  /**
   * `claim`, made only while the call repeats no earlier one (`findRepeat` with this request's
   * tenant, task, intent and key): the check is atomic with the claim, so of two calls with
   * one input racing from two processes at most one is claimed and the other is told it repeats it.
   */
  claimUnlessRepeated?(request: ClaimRequest, windowMs: number): Promise<ClaimResult | Repeated>;
  /**
   * Records a call answered without running its tool: a new record straight in `answer.state`,
   * nobody holding it, no attempt counted. When the key exists it changes nothing and returns it.
   */
  claimAnswered?(request: ClaimRequest, answer: Answer): Promise<ClaimResult>;
  get(tenant: string, key: string): Promise<CallRecord | undefined>;
  /** Compare-and-set on `version`; `undefined` when the record moved on (or does not exist). */
  update(tenant: string, key: string, version: number, update: RecordUpdate): Promise<CallRecord | undefined>;
  /**
   * Make `owner` the holder of an `in_progress` or `uncertain` call that nobody holds, whose
   * lease expired, or whose holder is dead. Compare-and-set on `version`; the state stays.
   */
  takeOver(request: TakeOverRequest): Promise<CallRecord | undefined>;
  /** Extend the lease of an in_progress or uncertain call `owner` still holds at `version`. False when it no longer does. */
  renewLease(tenant: string, key: string, version: number, owner: string, leaseMs: number): Promise<boolean>;
  /**
   * Deletes a record (expired idempotency keys), compare-and-set on `version` and `claimToken`, so
   * a late remove never deletes the record of a later claim of the same key. False when it moved on or is gone.
   */
  remove(tenant: string, key: string, version: number, claimToken: string): Promise<boolean>;
  /**
   * The records matching every filter of `query`, in the list order, from `after` on. In the SQL
   * stores a page costs about the records on it, not the ledger: each filter has an index in the
   * list order (tenant, tool, task; a state the partial or state index; a key its index). Filters
   * given together walk one of those indexes and check the others on each record it holds.
   */
  list(query?: ListQuery): Promise<CallRecord[]>;
  /**
   * Exact counts of the calls (of `query.tenant`, or of every tenant) by state and effect class:
   * one row per (state, effect) pair that has calls, none for a pair without, in no particular
   * order. Never capped. The SQL stores answer with one grouped COUNT, which reads every call it
   * counts (all of them, or the tenant's through its index): for dashboards and metrics (the
   * console's blast radius), not for the call path.
   */
  countByStateAndEffect(query?: CallCountQuery): Promise<CallCount[]>;
  /**
   * Calls a recovery pass should look at: `uncertain`, and `in_progress` whose lease expired
   * (or, with `includeLive`, every `in_progress`). Cost grows with the number of such calls, not the ledger.
   */
  listUnsettled(options?: { limit?: number; includeLive?: boolean }): Promise<CallRecord[]>;
  /**
   * Reconciliation: the tool's records whose last change is after `after`, in (updatedAt,
   * tenant, key) order, leaving out `in_progress` ones (nothing to reconcile yet; they are listed
   * once they change). Cost follows the records returned, not the ledger (an index). Optional:
   * stores without it cannot be reconciled.
   */
  listChangedSince?(query: ChangesQuery): Promise<CallRecord[]>;
  /** The store's clock (epoch ms): leases are judged by it. */
  now(): Promise<number>;
}
