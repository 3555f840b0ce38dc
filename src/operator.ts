/**
 * effectgate/operator: what a person (or a bot, or the web console) does to a ledger, as
 * library calls; the `effectgate` CLI does the same. Each takes the ledger's `Stores`.
 *
 *   import { sqliteLedger } from "effectgate/sqlite";
 *   import { listApprovals, decideCall } from "effectgate/operator";
 *   const ledger = sqliteLedger(".effectgate/ledger.db", { create: false });
 *   for (const a of await listApprovals(ledger, { state: "pending" })) console.log(a.id, a.tool, a.preview);
 */
export {
  setKillSwitch, listKillSwitches, listApprovals, countApprovals, decideCall, listBreakers, countBreakers, closeBreaker, governanceOf,
} from "./governance/operator.js";
export { decideApproval, type ApprovalDecision, type DecideResult } from "./governance/approvals.js";
export { loadPolicyFile, parsePolicyText } from "./governance/policy-file.js";
export { parsePolicy } from "./governance/policy-schema.js";
export { DEFAULT_POLICY_FILE, DEFAULT_APPROVAL_TTL_MS } from "./governance/policy.js";
export type {
  Policy, GrantRule, QuotaRule, QuotaPer, RateLimitRule, RatePer, ApprovalRule, Condition, GovernedClass, NamePattern,
} from "./governance/policy.js";
export type {
  ApprovalCountQuery, ApprovalMove, ApprovalQuery, ApprovalRecord, ApprovalState, Breaker, GovernanceStore, KillSwitch, KillTarget, NewApproval,
  QuotaCharge, QuotaCounter, QuotaVerdict, RateCount, RateVerdict,
} from "./contracts/governance.js";
export { listQueue, countQueue, showQueueItem, resolveCall, type CallResolution, type QueueDetail, type QueueItem, type QueueKind, type QueueQuery } from "./reconcile/queue.js";
export { reconcile, DEFAULT_SETTLE_MS, DEFAULT_SKEW_MS, type ReconcileOptions, type ReconcileSummary, type ReconcileTarget, type ToolScan } from "./reconcile/scan.js";
export { applyReceipt, type AppliedReceipt, type ReceiptOutcome } from "./reconcile/receipt.js";
export {
  FINDING_KINDS,
  type Confirmation, type Finding, type FindingKind, type FindingReport, type FindingSource, type FindingStatus, type LedgerSnapshot,
  type ReceiptInput, type StoredReceipt,
} from "./contracts/findings.js";
export type { ConfirmationQuery, FindingCountQuery, FindingQuery, ReconcileStore, Resolution } from "./contracts/reconcile.js";
export { requestSagaCompensation, resolveSaga, type SagaResolution } from "./saga/operator.js";
export { SAGA_STATES, STEP_STATES } from "./contracts/saga-states.js";
export { stepKey as sagaStepKey, compensationKey as sagaCompensationKey } from "./saga/keys.js";
export type {
  Approval as SagaStepApproval, Compensation, OnAbandon, SagaEvent, SagaEventKind, SagaLog, SagaQuery, SagaRecord, SagaState,
  SagaStepRecord, StepState,
} from "./contracts/sagas.js";
export { CALL_STATES, type CallState } from "./core/states.js";
export type {
  CallCount, CallCountQuery, CallRecord, CallStore, ChangeCursor, ChangesQuery, ClaimRequest, ClaimResult, ListCursor, ListQuery, RecordUpdate, TakeOverRequest,
} from "./contracts/calls.js";
export type { CheckpointRecords } from "./contracts/checkpoints.js";
export type { Stores } from "./contracts/stores.js";
