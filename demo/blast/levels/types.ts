/**
 * What a protection level is. The demo runs the same workload through each level; a level only
 * decides how a worker answers one tool_use block (retries, keys, a ledger, probes, …), what a
 * fresh worker does after a crash, and what its own records say afterwards.
 *
 * Adding a level is adding one module that exports a `Level`, and listing it in ./index.ts.
 */
import type { Scope, ToolResultBlock, ToolUseBlock } from "effectgate";
import type { Urls } from "../tools.js";
import type { KillPoint, Workload } from "../workload.js";

/** Where a level's ledger lives, if it has one. */
export type StoreSpec =
  | { readonly kind: "sqlite"; readonly path: string }
  | { readonly kind: "postgres"; readonly url: string; readonly schema: string };

/** Hooks every level calls for each call it answers. */
export interface CallHooks {
  /** Named points of a call; at the planned one the worker is SIGKILLed (crash injection). Never returns then. */
  kill(point: KillPoint, toolUseId: string): void;
  /** Runs one request to a downstream, timing it: a call's overhead is its time minus the time spent in here. */
  downstream<T>(toolUseId: string, work: () => Promise<T>): Promise<T>;
}

export interface WorkerContext {
  readonly urls: Urls;
  /** The level's own directory, shared by its worker processes (ledger file, JSON files). */
  readonly dir: string;
  /** Names this worker process's own files: "steady" or "crash". */
  readonly role: string;
  readonly store: StoreSpec;
  readonly seed: number;
  readonly workload: Workload;
}

/** One worker's tool layer: answers one tool_use block with one tool_result block. */
export interface Executor {
  answer(block: ToolUseBlock, scope: Scope): Promise<ToolResultBlock>;
  close(): Promise<void>;
}

export interface LevelRuntime {
  /** A worker's tool layer. Each call gives an independent one (its own ledger connection and state): a twin worker gets its own. */
  executor(hooks: CallHooks): Promise<Executor>;
  /** Run when a worker process starts after a crash: settle what the killed one left behind. */
  recover(): Promise<void>;
  close(): Promise<void>;
}

export interface AuditContext {
  /** The level's directory (kept with EFFECTGATE_DEMO_KEEP=1: an audit may leave what it found there). */
  readonly dir: string;
  readonly urls: Urls;
  readonly store: StoreSpec;
  readonly workload: Workload;
}

/** What the level's own records say once the workers are done (a level without records has none). */
export interface LevelAudit {
  /** Calls waiting for a person: needs_human, compensation_failed, approvals pending. */
  readonly humanQueue: number;
  /** Calls left in_progress or uncertain: nobody resolved them and nobody was told. */
  readonly unresolved: number;
  /** Discrepancies between the ledger and the downstreams that reconciliation reported; null without reconciliation. */
  readonly discrepanciesFound: number | null;
}

export type Availability = { readonly available: true } | { readonly available: false; readonly waitingFor: string };

export interface Level {
  /** "0" … "6", or "ref" for the reference row. */
  readonly key: string;
  /** What the table prints: "naive uniform retry", "+ effect classes", … */
  readonly name: string;
  /** One sentence: what this level adds and what it does with a call. */
  readonly adds: string;
  available(): Promise<Availability>;
  /** Opens the level inside a worker process. */
  open(ctx: WorkerContext): Promise<LevelRuntime>;
  /** In the CLI process, after the workers: what the level's records say. */
  audit?(ctx: AuditContext): Promise<LevelAudit>;
}
