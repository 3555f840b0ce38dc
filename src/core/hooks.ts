/**
 * The shapes of the hooks a tool can carry besides `execute`: what a probe answers, what a dry
 * run previews, and what reconciliation's `lookup` reads from a downstream system. They live in
 * core because a tool definition names them; the features that call the hooks import them here.
 */
import type { Json } from "./json.js";

/** A probe's answer to "did this call's effect happen?" */
export type ProbeResult<R> = { status: "done"; result: R } | { status: "absent" } | { status: "running" };

/** What a dry run says a call would do (validated by dry-run.ts). */
export interface DryRunPreview {
  /** e.g. "would_delete", "would_charge". */
  readonly effect: string;
  readonly would_affect: { readonly [key: string]: Json };
  readonly reversible: boolean;
}

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
