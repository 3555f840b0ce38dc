/**
 * Reconciliation's vocabulary: what a downstream system says it did (`DownstreamRecord`), the
 * differences a scan or a receipt finds between that and the ledger (`Finding`), and the
 * confirmations that matched. The ledger says what we believe happened; the downstream says
 * what did (DESIGN.md §2, docs/reconciliation.md).
 */
import type { CallState } from "../core/states.js";
import type { Json } from "../core/tool.js";

/** A time window on the downstream's clock, epoch ms, both ends inclusive. */
export interface LookupWindow {
  readonly since: number;
  readonly until: number;
}

/** What a tool's `lookup` receives besides the window. */
export interface LookupContext {
  /** The tool being reconciled. */
  readonly tool: string;
  /** Aborted when the scan is given up (its caller's signal). */
  readonly signal: AbortSignal;
}

/** One effect as the downstream system records it (a charge, a ticket, a sent e-mail). */
export interface DownstreamRecord {
  /** The downstream's own id for the record (charge id, ticket number): unique per tool. */
  readonly ref: string;
  /** The idempotency key the effect was made with (the ledger key), as the downstream stored it. */
  readonly key: string;
  /** The tenant, when the downstream knows it (e.g. from metadata): the ledger is then looked up by (tenant, key). */
  readonly tenant?: string;
  /** When the downstream made the record (epoch ms, its clock). */
  readonly at?: number;
  /** The fields reconciliation compares (`reconcileFields`), e.g. `{ amount: 1200, currency: "EUR" }`. */
  readonly fields?: { readonly [field: string]: Json };
}

/** One field that differs between the ledger and the downstream. */
export interface FieldDifference {
  /** Dot path, e.g. `amount` or `total.value`. */
  readonly field: string;
  /** What the ledger holds (its stored result, else its stored input), `null` when absent. */
  readonly ledger: Json;
  /** What the downstream holds, `null` when absent. */
  readonly downstream: Json;
}

/** What the ledger holds for a call, as the comparison sees it. */
export interface RecordedCall {
  readonly input: Json;
  readonly result: Json | null;
}

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

/** Who found a difference: a pull scan (`lookup`) or a pushed receipt (webhook). */
export type FindingSource = "scan" | "receipt";

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
