/**
 * Applying a downstream receipt (a webhook saying "I made this record with this key") to the
 * ledger, once its signature has been checked (src/root/receipts-endpoint.ts does that).
 *
 * - A receipt is stored once per id before it is applied, and marked applied after: the same
 *   receipt again changes nothing and gets the first outcome back; a receipt whose application
 *   was cut short (a crash) is applied again when it is redelivered, which is harmless because
 *   every write it makes is insert-once.
 * - The same id with other content is refused (`conflict`): it is not a redelivery.
 * - The receipt's record is judged like a scanned one (judge.ts): it confirms a completed call
 *   (stored as a confirmation) or opens a finding (orphan, duplicate, mismatch, unresolved).
 */
import type { Json } from "../core/json.js";
import type { CallRecord } from "../contracts/calls.js";
import type { Stores } from "../contracts/stores.js";
import type { Comparison } from "./compare.js";
import { emptyTally, judgeRecord, reportOrphan, type Judge } from "./judge.js";
import { receiptDigest } from "../contracts/finding-rules.js";
import { reconcileStoreOf } from "./scan.js";
import type { ReceiptInput, StoredReceipt } from "../contracts/findings.js";

/** What applying a receipt did. */
export interface ReceiptOutcome {
  /**
   * confirmed: it matched a completed call exactly. finding: it opened (or saw again) findings.
   * linked: it was linked to a call with no verdict yet (in progress, or a saga's compensation).
   */
  readonly result: "confirmed" | "finding" | "linked";
  /** The findings it recorded. */
  readonly findings: readonly string[];
  /** The state of the ledger's call for the key, when there is one. */
  readonly ledgerState: string | null;
}

export type AppliedReceipt =
  | { readonly kind: "applied"; readonly receipt: StoredReceipt; readonly outcome: ReceiptOutcome }
  /** Seen before: nothing changed; the first outcome. */
  | { readonly kind: "duplicate"; readonly receipt: StoredReceipt; readonly outcome: Json | null }
  /** The id was used before for a receipt with other content. Nothing changed. */
  | { readonly kind: "conflict"; readonly receipt: StoredReceipt };

export async function applyReceipt(ledger: Stores, comparison: Comparison, input: ReceiptInput): Promise<AppliedReceipt> {
  const store = reconcileStoreOf(ledger);
  const digest = receiptDigest(input);
  const { receipt, created } = await store.recordReceipt({ ...input, digest });
  if (!created) {
    if (receipt.digest !== digest) return { kind: "conflict", receipt };
    if (receipt.processedAt !== null) return { kind: "duplicate", receipt, outcome: receipt.outcome };
  }
  const { record } = input;
  const judge: Judge = {
    store, tool: input.tool, comparison, source: "receipt", tally: emptyTally(),
    async openFindings(tenant, key) {
      return (await store.listFindings({ status: "open", tool: input.tool, key, limit: 1000 })).filter((f) => f.tenant === tenant);
    },
  };
  const found: CallRecord[] = record.tenant !== undefined
    ? [await ledger.calls.get(record.tenant, record.key)].filter((r): r is CallRecord => r !== undefined)
    : await ledger.calls.list({ key: record.key, tool: input.tool, limit: 2 });
  const call = found.length === 1 ? found[0] : undefined;
  if (call && call.tool === input.tool) {
    await judgeRecord(judge, call, [record]);
  } else {
    const why = found.length > 1
      ? `its key is used by ${input.tool} calls in several tenants (${found.map((r) => r.tenant).join(", ")}) and the receipt names none`
      : call ? `the ledger's call with that key is a ${call.tool} call, not ${input.tool}` : "the ledger has no call with that key";
    await reportOrphan(judge, record, why);
  }
  const { tally } = judge;
  const outcome: ReceiptOutcome = {
    result: tally.findingIds.length > 0 ? "finding" : tally.confirmed > 0 ? "confirmed" : "linked",
    findings: tally.findingIds,
    ledgerState: call && call.tool === input.tool ? call.state : null,
  };
  const finished = await store.finishReceipt(input.id, outcome as unknown as Json);
  return { kind: "applied", receipt: finished ?? receipt, outcome };
}
