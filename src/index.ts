export { createGate, DEFAULT_LEDGER_PATH, type Gate, type GateOptions } from "./root/create-gate.js";
export type { ToolResultBlock, ToolUseBlock } from "./core/blocks.js";
export type { Alert, GateStats } from "./gate/runtime.js";
export type { RecoverySummary } from "./gate/recover.js";
export {
  defineTool,
  type AnyTool, type EffectClass, type Json, type KeyStrategy, type ProbeResult, type Tool, type ToolContext, type ToolSpec,
} from "./core/tool.js";
export { deriveKey, fingerprint, canonicalJson, type Scope } from "./core/keys.js";
export { EffectgateError, isEffectgateError, type ErrorCode, type ErrorOutcome } from "./core/errors.js";
export { CALL_STATES, type CallState } from "./core/states.js";
export type { StandardSchemaV1 } from "./core/standard-schema.js";
export type { CallRecord, ClaimRequest, ClaimResult, Ledger, ListQuery, RecordUpdate, TakeOverRequest } from "./contracts/calls.js";
export type { ChangeCursor, ChangesQuery } from "./contracts/calls.js";
export { reconcile, DEFAULT_SETTLE_MS, DEFAULT_SKEW_MS, type ReconcileOptions, type ReconcileSummary, type ReconcileTarget, type ToolScan } from "./reconcile/scan.js";
export { applyReceipt, type AppliedReceipt, type ReceiptOutcome } from "./reconcile/receipt.js";
export { listQueue, showQueueItem, resolveCall, type CallResolution, type QueueDetail, type QueueItem, type QueueKind, type QueueQuery } from "./reconcile/queue.js";
export type { ConfirmationQuery, FindingQuery, ReconcileStore, Resolution } from "./contracts/reconcile.js";
export {
  FINDING_KINDS,
  type Confirmation, type DownstreamRecord, type FieldDifference, type Finding, type FindingKind, type FindingReport, type FindingSource,
  type FindingStatus, type LedgerSnapshot, type LookupContext, type LookupWindow, type ReceiptInput, type RecordedCall, type StoredReceipt,
} from "./contracts/findings.js";
export { memoryLedger, type MemoryLedgerOptions } from "./stores/memory/calls.js";
export { sqliteLedger, type SqliteLedgerOptions } from "./stores/sqlite/calls.js";
export { fileCheckpoint } from "./checkpoint/file.js";
export { ledgerCheckpoint } from "./checkpoint/stored.js";
export type { AgentCheckpoint, CheckpointStore } from "./checkpoint/codec.js";
export { ToolRejected, OutcomeUnknown, ToolTimeout, classifyError, type ErrorKind } from "./core/outcome.js";
export type { RetryPolicy, ProbePolicy } from "./core/policies.js";
export type {
  Policy, GrantRule, QuotaRule, QuotaPer, RateLimitRule, RatePer, ApprovalRule, Condition, GovernedClass, NamePattern,
} from "./governance/policy.js";
export { DEFAULT_POLICY_FILE, DEFAULT_APPROVAL_TTL_MS } from "./governance/policy.js";
export { loadPolicyFile, parsePolicyText } from "./governance/policy-file.js";
export { parsePolicy } from "./governance/policy-schema.js";
export type { Approver } from "./governance/govern.js";
export { decideApproval, APPROVAL_MOVES, type ApprovalDecision, type DecideResult } from "./governance/approvals.js";
export {
  setKillSwitch, listKillSwitches, listApprovals, decideCall, listBreakers, closeBreaker, awaitingApproval, governanceOf,
} from "./governance/operator.js";
export { memoryGovernance } from "./stores/memory/governance.js";
export type {
  GovernanceStore, KillSwitch, KillTarget, QuotaCharge, QuotaVerdict, QuotaCounter, RateCount, RateVerdict, Breaker,
  ApprovalRecord, ApprovalState, ApprovalMove, ApprovalQuery, NewApproval, DryRunPreview,
} from "./contracts/governance.js";
export type { SandboxSpec } from "./core/sandbox-spec.js";
export { SagaError } from "./saga/errors.js";
export { SAGA_STATES, STEP_STATES } from "./contracts/saga-states.js";
export { stepKey as sagaStepKey, compensationKey as sagaCompensationKey } from "./saga/keys.js";
export { requestSagaCompensation, resolveSaga, type SagaResolution } from "./saga/operator.js";
export type {
  ApproveNonCompensable, NonCompensableStep, Saga, SagaOptions, SagaRecoverySummary, SagaStatus, StepOptions,
} from "./saga/types.js";
export type {
  Approval as SagaStepApproval, Compensation, OnAbandon, SagaEvent, SagaEventKind, SagaLog, SagaQuery, SagaRecord, SagaState,
  SagaStepRecord, StepState,
} from "./contracts/sagas.js";
