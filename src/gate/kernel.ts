/**
 * The gate's kernel: the one narrow surface the features (sagas, the composition root) use to
 * run gated calls, instead of the gate's internals. It runs one call under a key, serialises the
 * calls of one key in this process, waits for another worker's call, and takes over a call
 * whose holder is gone, always by the same rules as a replay (resolve.ts). It depends on core
 * and the call store contract only.
 */
import type { ToolResultBlock, ToolUseBlock } from "../core/blocks.js";
import { EffectgateError } from "../core/errors.js";
import type { Scope } from "../core/keys.js";
import type { AnyTool } from "../core/tool.js";
import { realTime, sleepUnless, type TimeSource } from "../core/time.js";
import type { CallRecord, CallStore } from "../contracts/calls.js";
import type { ReconcileStore } from "../contracts/reconcile.js";
import type { Alert, GateStats } from "./alerts.js";
import type { FaultHook } from "./faults.js";
import type { Governor } from "./governor.js";
import { waitForHolder, type Waited } from "./holder.js";
import { newOwnerId } from "./owner.js";
import type { GateObserver } from "./observe.js";
import { runObserved } from "./observed.js";
import { runCall, type CallOverride } from "./pipeline.js";
import { recover, type CallRecoverySummary } from "./recover.js";
import { giveUpKept } from "./record.js";
import { resolveStale, type Resolved, type ResolveOptions } from "./resolve.js";
import { inflightId, singleFlight, type Call, type Runtime, type ToolPolicy } from "./runtime.js";

export type { Call, ToolPolicy } from "./runtime.js";
export type { Resolved, Resolution, ResolveOptions } from "./resolve.js";
export type { Waited } from "./holder.js";
export type { CallOverride } from "./pipeline.js";

export interface KernelOptions {
  readonly calls: CallStore;
  /** Where late replies that contradict a settled record are recorded as findings (the ledger's reconcile store). */
  readonly findings?: ReconcileStore;
  /** The tools by name (sandboxed ones already wrapped). */
  readonly tools: ReadonlyMap<string, AnyTool>;
  readonly governor?: Governor;
  /** This gate's owner id (default: a new one naming this host and process). */
  readonly owner?: string;
  readonly leaseMs: number;
  readonly waitMs: number;
  readonly faults?: FaultHook;
  /** Every clock reading and wait of the gate (default real time). */
  readonly time?: TimeSource;
  readonly random: () => number;
  readonly policyFor: (tool: AnyTool) => ToolPolicy;
  /** Counts the alert in `stats` first, then hands it on. */
  readonly alert: (alert: Alert) => void;
  readonly stats: GateStats;
  /** Told about every call (metrics, tracing); none by default, and then nothing is noted. */
  readonly observers?: readonly GateObserver[];
}

export interface Kernel {
  readonly calls: CallStore;
  readonly tools: ReadonlyMap<string, AnyTool>;
  readonly owner: string;
  readonly leaseMs: number;
  readonly waitMs: number;
  readonly time: TimeSource;
  readonly stats: Readonly<GateStats>;
  /** Runs one tool_use through the whole pipeline (pipeline.ts); never throws for a bad block or a failing tool. */
  runCall(block: ToolUseBlock, scope: Scope, override?: CallOverride): Promise<ToolResultBlock>;
  /** Runs `work` as the only work on this key in this gate, after whatever is already on it. */
  singleFlight<T>(tenant: string, key: string, work: () => Promise<T>): Promise<T>;
  /** Whether this gate is working on the key right now. */
  isBusy(tenant: string, key: string): boolean;
  /** Waits (until `waitMs` from now) while a live worker holds the call; says whether it is free, stale, still live or gone. */
  waitForHolder(record: CallRecord): Promise<Waited>;
  /** Takes over a call whose holder is gone and settles it by the replay rules (probe; at most one re-run, or none). Call inside `singleFlight`. */
  resolveStale(call: Call, record: CallRecord, options: ResolveOptions): Promise<Resolved>;
  /** Settles calls left held by dead workers or left uncertain. */
  recover(options?: { limit?: number }): Promise<CallRecoverySummary>;
  /** Waits for background work (late replies being recorded). */
  drain(): Promise<void>;
  readonly policyFor: (tool: AnyTool) => ToolPolicy;
  readonly alert: (alert: Alert) => void;
  /**
   * Gives background writes up to `drainMs` (default 5 s) to finish, stops those still failing
   * (each with a `record_gave_up` alert), then aborts the tool runs still going after their timeout.
   */
  close(drainMs?: number): Promise<void>;
}

/** How long close() lets outcomes still being written try, by default. */
export const DEFAULT_CLOSE_DRAIN_MS = 5_000;

async function drainBackground(rt: Runtime): Promise<void> {
  while (rt.background.size > 0) await Promise.allSettled([...rt.background]);
}

export function createKernel(options: KernelOptions): Kernel {
  if (!(options.leaseMs > 0)) throw new EffectgateError("EG_BAD_OPTION", `leaseMs must be a positive number of milliseconds, got ${String(options.leaseMs)}`);
  let startClosing!: () => void;
  const closing = { closed: false, promise: new Promise<void>((resolve) => (startClosing = resolve)) };
  const rt: Runtime = {
    calls: options.calls,
    findings: options.findings,
    governor: options.governor,
    tools: options.tools,
    owner: options.owner ?? newOwnerId(),
    leaseMs: options.leaseMs,
    waitMs: options.waitMs,
    faults: options.faults,
    stats: options.stats,
    inflight: new Map(),
    abandoned: new Set(),
    background: new Set(),
    closing,
    known: new Map(),
    startedUnwritten: new Set(),
    time: options.time ?? realTime,
    random: options.random,
    policyFor: options.policyFor,
    alert: options.alert,
  };
  const observers = options.observers ?? [];
  return {
    calls: rt.calls,
    tools: rt.tools,
    owner: rt.owner,
    leaseMs: rt.leaseMs,
    waitMs: rt.waitMs,
    time: rt.time,
    stats: rt.stats,
    runCall: observers.length === 0
      ? (block, scope, override) => runCall(rt, block, scope, override)
      : (block, scope, override) => runObserved(rt, observers, block, scope, override),
    singleFlight: (tenant, key, work) => singleFlight(rt, tenant, key, work),
    isBusy: (tenant, key) => rt.inflight.has(inflightId({ tenant, key })),
    waitForHolder: (record) => waitForHolder(rt, record, rt.time.monotonic() + rt.waitMs),
    resolveStale: (call, record, resolveOptions) => resolveStale(rt, call, record, resolveOptions),
    recover: (recoverOptions) => recover(rt, recoverOptions),
    drain: () => drainBackground(rt),
    policyFor: rt.policyFor,
    alert: rt.alert,
    async close(drainMs = DEFAULT_CLOSE_DRAIN_MS) {
      // Outcomes still being written get their chance first, within a bound: then they stop, each with a record_gave_up alert.
      if (rt.background.size > 0) await sleepUnless(rt.time, drainMs, drainBackground(rt));
      closing.closed = true;
      startClosing();
      giveUpKept(rt, "the gate was closed first");
      for (const controller of rt.abandoned) controller.abort(new Error("the gate was closed"));
    },
  };
}
