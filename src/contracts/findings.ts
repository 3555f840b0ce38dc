/**
 * Reconciliation's vocabulary: what a downstream system says it did (`DownstreamRecord`), the
 * differences a scan or a receipt finds between that and the ledger (`Finding`), and the
 * confirmations that matched. The ledger says what we believe happened; the downstream says
 * what did (DESIGN.md §2, docs/reconciliation.md).
 */
import type { CallState } from "../core/states.js";
import type { Json } from "../core/json.js";
import type { DownstreamRecord, FieldDifference } from "../core/hooks.js";

export const FINDING_KINDS = [
  /** The ledger says completed; the downstream has no record with that key. */
  "missing_downstream",
  /** The downstream has an effect the ledger does not know (or records as failed). */
  "orphan_downstream",
  /** The downstream has more than one record for one key. */
  "duplicate_downstream",
  /** A compared field differs between the ledger and the downstream. */
  "mismatch",
  /** The ledger itself does not know the outcome yet: `uncertain` or `needs_human`. */
  "unresolved",
] as const;

export type FindingKind = (typeof FINDING_KINDS)[number];

export type FindingStatus = "open" | "resolved";

/** Who found a difference: a pull scan (`lookup`), a pushed receipt (webhook), or a tool's reply that came after its call was settled. */
export const FINDING_SOURCES = ["scan", "receipt", "late_reply"] as const;

export type FindingSource = (typeof FINDING_SOURCES)[number];

export function isFindingSource(value: unknown): value is FindingSource {
  return (FINDING_SOURCES as readonly unknown[]).includes(value);
}

/** The ledger's side of a finding, as it stood when the finding was last seen. */
export interface LedgerSnapshot {
  readonly state: CallState;
  readonly input: Json;
  readonly result: Json | null;
  readonly error: string | null;
  readonly updatedAt: number;
}

/** A finding as it is recorded: what differs and the evidence. */
export interface FindingReport {
  /**
   * Derived from what differs (kind, tool, tenant, key and the evidence that identifies the
   * difference): the same difference seen again is the same finding, a new one is another.
   */
  readonly id: string;
  readonly kind: FindingKind;
  readonly tool: string;
  /** null when no ledger record matches (an orphan whose downstream record names no tenant). */
  readonly tenant: string | null;
  readonly key: string;
  /** One line for a person: what differs. */
  readonly summary: string;
  readonly ledger: LedgerSnapshot | null;
  readonly downstream: readonly DownstreamRecord[];
  readonly differences: readonly FieldDifference[];
  readonly source: FindingSource;
}

export interface Finding extends FindingReport {
  readonly status: FindingStatus;
  readonly firstSeenAt: number;
  readonly lastSeenAt: number;
  /** How many scans or receipts reported it (it is stored once). */
  readonly timesSeen: number;
  readonly resolvedAt: number | null;
  /** The note given when it was resolved. */
  readonly resolution: string | null;
  readonly resolvedBy: string | null;
}

/** A downstream record matched to a completed ledger record: the effect happened once, as recorded. */
export interface Confirmation {
  readonly tool: string;
  readonly tenant: string;
  readonly key: string;
  /** The downstream record's own id. */
  readonly ref: string;
  readonly source: FindingSource;
  readonly fields: { readonly [field: string]: Json } | null;
  /** When it was confirmed (the store's clock). */
  readonly at: number;
}

/** A downstream receipt (webhook) as received, after its signature was checked. */
export interface ReceiptInput {
  /** The receipt's own id (the sender's event id): the same receipt twice changes nothing. */
  readonly id: string;
  readonly tool: string;
  readonly record: DownstreamRecord;
}

export interface StoredReceipt {
  readonly id: string;
  /** SHA-256 of the canonical receipt: the same id with other content is refused. */
  readonly digest: string;
  readonly tool: string;
  readonly record: DownstreamRecord;
  readonly receivedAt: number;
  /** null until the receipt has been applied (a crash in between applies it again on redelivery). */
  readonly processedAt: number | null;
  /** What applying it did (see ReceiptOutcome), once processed. */
  readonly outcome: Json | null;
}
