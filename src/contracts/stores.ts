/**
 * One ledger: the stores of every concern, sharing one database (and so one clock and one
 * durability level). `createGate({ ledger })` takes this bundle; each feature reads only the
 * store it needs, and a bundle without an optional store cannot run that feature (sagas,
 * governance state, reconciliation), which the feature says by name.
 */
import type { CallStore } from "./calls.js";
import type { CheckpointRecords } from "./checkpoints.js";
import type { GovernanceStore } from "./governance.js";
import type { ReconcileStore } from "./reconcile.js";
import type { SagaLog } from "./sagas.js";

export interface Stores {
  /** Where the records live, for messages: "memory", "sqlite:/path/ledger.db", "postgres://…". */
  readonly location: string;
  readonly calls: CallStore;
  readonly checkpoints: CheckpointRecords;
  /** The saga log (see sagas.ts); without it the ledger cannot run sagas. */
  readonly sagas?: SagaLog;
  /** Kill switches, quota counters, rate breakers and approvals; without it only grants are enforced. */
  readonly governance?: GovernanceStore;
  /** Reconciliation's findings, confirmations, receipts and cursors. */
  readonly reconcile?: ReconcileStore;
  /** Closes the connection the stores share (a pool you passed in stays yours). */
  close(): Promise<void>;
}
