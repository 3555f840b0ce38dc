/**
 * effectgate: effectively-once side effects for AI-agent tool calls. This entry holds what an
 * agent author uses; the stores, operator functions, test helpers and the HTTP middleware have
 * entries of their own (effectgate/sqlite, /postgres, /operator, /testing, /server).
 *
 *   import { createGate, defineTool } from "effectgate";
 *
 * Importing it loads no native addon: the default SQLite ledger loads its driver when the file
 * is first opened.
 */
export { createGate, DEFAULT_LEDGER_PATH, type Gate, type GateOptions, type RecoverySummary } from "./root/create-gate.js";
export type { Alert, GateStats } from "./gate/alerts.js";
export type { RunToolOptions, ToolAnswer, ToolCall } from "./root/tool-calls.js";
export type { ApprovalStatus } from "./governance/govern.js";
export type { StoppedTool } from "./governance/stopped.js";
export type { CallObservation, CallOutcome, GateObserver, ObservedCall, ObservedOutcome, ProbeOutcome } from "./gate/observe.js";
export { stderrLogger, type Logger } from "./core/logger.js";
export {
  defineTool,
  type AnyTool, type KeyStrategy, type Tool, type ToolContext, type ToolSpec,
} from "./core/tool.js";
export type { EffectClass } from "./core/effect-class.js";
export type { Json } from "./core/json.js";
export type { DownstreamRecord, DryRunPreview, FieldDifference, LookupContext, LookupWindow, ProbeResult, RecordedCall } from "./core/hooks.js";
export type { SandboxSpec } from "./core/sandbox-spec.js";
export type { RepeatAction, RepeatPolicy } from "./core/repeats.js";
export type { ProbePolicy, RetryPolicy } from "./core/policies.js";
export type { StandardSchemaV1 } from "./core/standard-schema.js";
export type { ToolResultBlock, ToolUseBlock } from "./core/blocks.js";
export { deriveKey, type Scope } from "./core/keys.js";
export { EffectgateError, isEffectgateError, type ErrorCode, type ErrorOutcome } from "./core/errors.js";
export { classifyError, FENCE_HEADER, LeaseLost, OutcomeUnknown, ToolRejected, ToolTimeout, type ErrorKind } from "./core/outcome.js";
export type { CallState } from "./core/states.js";
export type { Stores } from "./contracts/stores.js";
export type { AgentCheckpoint, CheckpointStore } from "./contracts/checkpoints.js";
export { memoryLedger, type MemoryLedgerOptions } from "./stores/memory/index.js";
export { fileCheckpoint, type FileCheckpointOptions } from "./checkpoint/file.js";
export { ledgerCheckpoint } from "./checkpoint/stored.js";
export type { Policy } from "./governance/policy.js";
export type { Approver } from "./governance/govern.js";
export type { ApprovalDecision } from "./governance/approvals.js";
export type { ApprovalRecord } from "./contracts/governance.js";
export { awaitingApproval } from "./governance/awaiting.js";
export { SagaError } from "./saga/errors.js";
export type {
  ApproveNonCompensable, NonCompensableStep, Saga, SagaOptions, SagaRecoverySummary, SagaStatus, StepOptions,
} from "./saga/types.js";
export type { ReconcileOptions, ReconcileSummary, ToolScan } from "./reconcile/scan.js";
