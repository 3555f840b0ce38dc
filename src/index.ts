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
export { memoryLedger, type MemoryLedgerOptions } from "./ledger/memory.js";
export { sqliteLedger, type SqliteLedgerOptions } from "./ledger/sqlite.js";
export { fileCheckpoint } from "./checkpoint/file.js";
export { ledgerCheckpoint } from "./checkpoint/ledger.js";
export type { AgentCheckpoint, CheckpointStore } from "./checkpoint/checkpoint.js";
export { ToolRejected, OutcomeUnknown, ToolTimeout, classifyError, type ErrorKind } from "./gate/outcome.js";
export type { RetryPolicy, ProbePolicy } from "./gate/policy.js";
