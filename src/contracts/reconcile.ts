/**
 * Where reconciliation keeps what it learns: findings, confirmations, receipts and scan
 * cursors. Each ledger store implements it in its own file (memory, SQLite, PostgreSQL), in
 * the same database as the ledger, and reaches it as `ledger.reconcile`. Every store passes
 * the same contract suite (src/testing/contract-suites/reconcile.ts).
 *
 * Rules every store keeps:
 * - A finding is stored once per id. Recording it again only refreshes `lastSeenAt`,
 *   `timesSeen` and its evidence (summary, ledger snapshot, downstream records, differences):
 *   its status never changes, so a resolved finding stays resolved whatever later scans see.
 * - `resolveFinding` moves open → resolved exactly once; the first resolution is kept.
 * - A confirmation is stored once per (tool, tenant, key, ref); a receipt once per id. Of
 *   concurrent writers of one, exactly one is told it created it.
 * - Times are the store's clock (the ledger's `now()`).
 */
import type { Json } from "../core/json.js";
import type { Confirmation, Finding, FindingKind, FindingReport, FindingStatus, ReceiptInput, StoredReceipt } from "./findings.js";

export interface FindingQuery {
  readonly status?: FindingStatus;
  readonly kind?: FindingKind;
  readonly tool?: string;
  readonly tenant?: string;
  readonly key?: string;
  /** At most this many, oldest first (default 100). */
  readonly limit?: number;
}

/** What `countFindings` counts: the findings matching every filter given. */
export type FindingCountQuery = Omit<FindingQuery, "limit">;

export interface Resolution {
  /** What the person found or did. Required: a resolution without a reason helps nobody later. */
  readonly note: string;
  /** Who resolved it (free text: a user name, "auto"). */
  readonly by?: string;
}

export type ConfirmationQuery =
  /** The confirmations of one ledger record. */
  | { readonly tool: string; readonly tenant: string; readonly key: string }
  /** The confirmation (if any) of one downstream record. */
  | { readonly tool: string; readonly ref: string };

export interface ReconcileStore {
  /** Inserts the finding open when its id is new; otherwise refreshes it (see the rules above). */
  recordFinding(report: FindingReport): Promise<{ readonly finding: Finding; readonly created: boolean }>;
  getFinding(id: string): Promise<Finding | undefined>;
  listFindings(query?: FindingQuery): Promise<Finding[]>;
  /**
   * The exact number of findings matching every filter given, never capped (one COUNT in the SQL
   * stores; the open ones walk their partial index, a key its index).
   */
  countFindings(query?: FindingCountQuery): Promise<number>;
  /**
   * open → resolved. `changed: false` when it was already resolved (its first resolution is
   * returned unchanged); `undefined` when there is no such finding.
   */
  resolveFinding(id: string, resolution: Resolution): Promise<{ readonly finding: Finding; readonly changed: boolean } | undefined>;
  /** Stores the confirmation unless one with the same (tool, tenant, key, ref) exists; true when it was new. */
  recordConfirmation(confirmation: Omit<Confirmation, "at">): Promise<boolean>;
  listConfirmations(query: ConfirmationQuery): Promise<Confirmation[]>;
  /**
   * Stores a receipt unless its id is known. `created: false` returns the stored one as it is
   * (compare its digest to tell a redelivery from a reused id).
   */
  recordReceipt(receipt: ReceiptInput & { readonly digest: string }): Promise<{ readonly receipt: StoredReceipt; readonly created: boolean }>;
  getReceipt(id: string): Promise<StoredReceipt | undefined>;
  /** Marks a receipt applied with what applying it did. Only the first call sets it; returns the stored receipt. */
  finishReceipt(id: string, outcome: Json): Promise<StoredReceipt | undefined>;
  /** A named scan cursor (opaque JSON to the store). */
  getCursor(name: string): Promise<Json | undefined>;
  putCursor(name: string, value: Json): Promise<void>;
}
