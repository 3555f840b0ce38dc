export { createGate, DEFAULT_LEDGER_PATH, type Gate, type GateOptions } from "./gate/gate.js";
export type { ToolResultBlock, ToolUseBlock } from "./gate/blocks.js";
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
export type { CallRecord, ClaimRequest, ClaimResult, Ledger, ListQuery, RecordUpdate, TakeOverRequest } from "./ledger/contract.js";
export type { ChangeCursor, ChangesQuery } from "./ledger/contract.js";
export { reconcile, DEFAULT_SETTLE_MS, DEFAULT_SKEW_MS, type ReconcileOptions, type ReconcileSummary, type ReconcileTarget, type ToolScan } from "./reconcile/scan.js";
export { applyReceipt, type AppliedReceipt, type ReceiptOutcome } from "./reconcile/receipt.js";
export { listQueue, showQueueItem, resolveCall, type CallResolution, type QueueDetail, type QueueItem, type QueueKind, type QueueQuery } from "./reconcile/queue.js";
export type { ConfirmationQuery, FindingQuery, ReconcileStore, Resolution } from "./reconcile/contract.js";
export {
  FINDING_KINDS,
  type Confirmation, type DownstreamRecord, type FieldDifference, type Finding, type FindingKind, type FindingReport, type FindingSource,
  type FindingStatus, type LedgerSnapshot, type LookupContext, type LookupWindow, type ReceiptInput, type RecordedCall, type StoredReceipt,
} from "./reconcile/types.js";
export { memoryLedger, type MemoryLedgerOptions } from "./ledger/memory.js";
export { sqliteLedger, type SqliteLedgerOptions } from "./ledger/sqlite.js";
export { fileCheckpoint } from "./checkpoint/file.js";
export { ledgerCheckpoint } from "./checkpoint/ledger.js";
export type { AgentCheckpoint, CheckpointStore } from "./checkpoint/checkpoint.js";
export { ToolRejected, OutcomeUnknown, ToolTimeout, classifyError, type ErrorKind } from "./gate/outcome.js";
export type { RetryPolicy, ProbePolicy } from "./gate/policy.js";
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
export { memoryGovernance } from "./governance/memory.js";
export type {
  GovernanceStore, KillSwitch, KillTarget, QuotaCharge, QuotaVerdict, QuotaCounter, RateCount, RateVerdict, Breaker,
  ApprovalRecord, ApprovalState, ApprovalMove, ApprovalQuery, NewApproval, DryRunPreview,
} from "./governance/contract.js";
export type { SandboxSpec } from "./governance/sandbox-spec.js";
export { SagaError } from "./saga/errors.js";
export { SAGA_STATES, STEP_STATES } from "./saga/states.js";
export { stepKey as sagaStepKey, compensationKey as sagaCompensationKey } from "./saga/keys.js";
export { requestSagaCompensation, resolveSaga, type SagaResolution } from "./saga/operator.js";
export type {
  ApproveNonCompensable, NonCompensableStep, Saga, SagaOptions, SagaRecoverySummary, SagaStatus, StepOptions,
} from "./saga/types.js";
export type {
  Approval as SagaStepApproval, Compensation, OnAbandon, SagaEvent, SagaEventKind, SagaLog, SagaQuery, SagaRecord, SagaState,
  SagaStepRecord, StepState,
} from "./saga/contract.js";
