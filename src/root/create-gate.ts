/**
 * `createGate`: the effects gate in front of an agent's tools.
 *
 * Guarantees, and where they end (read before relying on them):
 * - A call's claim is durable before its tool starts, and its outcome is durable before
 *   its result is returned (SQLite default: fsync'd; see `sqliteLedger` for the faster option).
 * - The same key (by default the tool_use id) executes at most once while the outcome is
 *   known. Replays get the recorded result verbatim; a concurrent twin waits for it.
 * - A tool can run a second time for one key only when its first run's outcome was lost
 *   (crash, lost record) AND either the tool is `read`, or its `probe` answered "absent".
 *   The second run gets the same `ctx.idempotencyKey`, so a downstream that honours the
 *   key still applies the effect once. A write tool without a probe is never re-run: its
 *   call goes to `needs_human`.
 * - If the effect happens but recording fails, the agent still gets the true result and an
 *   operator alert is raised; recovery later probes the call.
 */
import { findToolUses, errorResult, type ToolResultBlock } from "../core/blocks.js";
import { EffectgateError } from "../core/errors.js";
import type { EffectClass } from "../core/effect-class.js";
import type { Scope } from "../core/keys.js";
import type { ProbePolicy, RetryPolicy } from "../core/policies.js";
import type { TimeSource } from "../core/time.js";
import type { AnyTool, Tool } from "../core/tool.js";
import type { AgentCheckpoint, CheckpointStore } from "../contracts/checkpoints.js";
import type { Stores } from "../contracts/stores.js";
import { alertToLogger, alertToStderr, type Alert, type GateStats } from "../gate/alerts.js";
import type { GateObserver } from "../gate/observe.js";
import type { Logger } from "../core/logger.js";
import type { FaultHook } from "../gate/faults.js";
import { createKernel } from "../gate/kernel.js";
import { repeatMethods } from "../gate/repeats.js";
import { newOwnerId } from "../gate/owner.js";
import type { CallRecoverySummary } from "../gate/recover.js";
import { policyFor } from "../gate/tool-policy.js";
import { createGovernance, type ApprovalStatus, type Approver } from "../governance/govern.js";
import type { StoppedTool } from "../governance/stopped.js";
import type { Policy } from "../governance/policy.js";
import { sandboxed } from "../governance/sandbox.js";
import { reconcile, type ReconcileOptions, type ReconcileSummary } from "../reconcile/scan.js";
import { runSagaToolUse } from "../saga/agent.js";
import type { SagaRuntime } from "../saga/engine.js";
import type { SagaFaultHook } from "../saga/faults.js";
import { recoverSagas } from "../saga/recover.js";
import { createSaga, stopSagaHeartbeats } from "../saga/saga.js";
import type { ApproveNonCompensable, Saga, SagaOptions, SagaRecoverySummary } from "../saga/types.js";
import { sqliteLedger } from "../stores/sqlite/index.js";
import { toolCallSurface, type RunToolOptions, type ToolAnswer, type ToolCall } from "./tool-calls.js";

export const DEFAULT_LEDGER_PATH = ".effectgate/ledger.db";

export interface GateOptions {
  // Tools of any schema and result type; the gate treats them alike. `any` (not `unknown`)
  // because a tool's execute/key functions take its own input type, which `unknown` would reject.
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  readonly tools: readonly Tool<any, any>[];
  /** Default: SQLite at `.effectgate/ledger.db` in the working directory. */
  readonly ledger?: Stores;
  /** How long a claim stays ours without renewal (default 30 s). Renewed while the tool runs. */
  readonly leaseMs?: number;
  /** How long a call waits for a twin held by another worker before answering EG_IN_PROGRESS (default: leaseMs). */
  readonly waitMs?: number;
  /**
   * How long `close()` lets outcomes whose ledger write failed keep trying before it stops them,
   * each with a `record_gave_up` alert (default 5 s). 0 stops them at once.
   */
  readonly closeDrainMs?: number;
  /** Default time after which a call's outcome counts as unknown and its probe is asked (default 30 s; tools may override). */
  readonly timeoutMs?: number;
  /** Retry policy per effect class (defaults: read 3 tries with jitter, write 3 where harmless, destructive 1). */
  readonly retry?: Partial<Record<EffectClass, Partial<RetryPolicy>>>;
  /** How often and how patiently to probe a call whose outcome is unknown (default 6 tries, 200 ms doubling to 5 s). */
  readonly probe?: Partial<ProbePolicy>;
  /** Jitter source for retry backoff (default Math.random); tests pass a seeded one. */
  readonly random?: () => number;
  /** Called for each operator alert (default: to `logger`, else one JSON line on stderr). */
  readonly onAlert?: (alert: Alert) => void;
  /**
   * Where alerts go when there is no `onAlert`: a pino-compatible logger (`logger.error(obj, msg)`),
   * so the application routes them (default: JSON lines on stderr).
   */
  readonly logger?: Logger;
  /** Told about every call and alert: metrics (effectgate/prometheus), tracing (effectgate/otel), your own. */
  readonly observers?: readonly GateObserver[];
  /** Test hook: named points where a crash or delay can be injected (see effectgate/testing). */
  readonly faults?: FaultHook;
  /**
   * Governance (docs/governance.md): grants, quotas, rate limits, approval rules, as an object or
   * the path of an `effectgate.policy.json`. Without one, every tool handed to the gate is granted,
   * destructive calls still need approval, and the ledger's kill switches still apply.
   */
  readonly policy?: Policy | string;
  /** Decides new approval requests in code (return undefined to leave one to a person, e.g. `effectgate approvals approve ID`). */
  readonly approver?: Approver;
  /** The clock governance judges rate windows and approval expiry by (default `time.wall`, i.e. Date.now); tests pass their own. */
  readonly clock?: () => number;
  /**
   * Every clock reading and wait of the gate: leases, timeouts, probe pauses, settle horizons
   * (default real time). For deterministic tests: the fault explorer (effectgate/testing) passes a
   * simulated one. Give the ledger the same clock (`clock` of memoryLedger / sqliteLedger).
   */
  readonly time?: TimeSource;
  /**
   * Sagas (docs/sagas.md): decides whether a saga step that cannot be undone may run. Without it
   * such steps are refused (the step does not run and the saga compensates). A saga may override it.
   */
  readonly approveNonCompensable?: ApproveNonCompensable;
  /** Test hook: named points in a saga's steps and compensations (see effectgate/testing `killAt`). */
  readonly sagaFaults?: SagaFaultHook;
}

/** What `gate.recover()` did: the calls it settled, and (run first) the sagas. */
export interface RecoverySummary extends CallRecoverySummary {
  /** What it did with sagas (see src/saga/recover.ts). Absent when it found none to look at. */
  readonly sagas?: SagaRecoverySummary;
}

export interface Gate {
  /**
   * Answers every tool_use block of an assistant message's `content` with one tool_result
   * block, in order (calls run concurrently). Never throws for a bad block or a failing
   * tool: each becomes an `is_error` result that says what happened and what to do.
   */
  runToolUses(content: readonly unknown[], scope: Scope): Promise<ToolResultBlock[]>;
  /**
   * Runs one tool call given by an agent SDK (the adapters use it), keyed by the SDK's call id
   * unless the tool's key strategy says otherwise: the same pipeline and guarantees as
   * `runToolUses`, answered with the recorded result as a value. Never throws for a bad call or a
   * failing tool (the answer says what happened); throws EG_BAD_CONTENT for a bad scope.
   */
  runTool(call: ToolCall, scope: Scope, options?: RunToolOptions): Promise<ToolAnswer>;
  /**
   * Where this call's durable approval stands, for an SDK's own approval surface: `not_needed`
   * (no rule asks for one), `refused` (governance refuses it anyway: kill switch, grant, breaker),
   * or the request's state (`pending`, `approved`, `denied`, `expired`, `consumed`: a call the
   * ledger already has reports its request as it stands and is never filed again). Files the
   * request (running its dry run) when none exists, unless `file: false` (then `none`). Runs nothing.
   */
  approvalFor(call: ToolCall, scope: Scope, options?: { readonly file?: boolean }): Promise<ApprovalStatus>;
  /** The write and destructive tools that a kill switch, a missing grant or an open rate breaker stops in this scope now (read only). */
  stoppedTools(scope: Scope): Promise<StoppedTool[]>;
  /** The tools handed to the gate, by name (sandboxed ones as wrapped). */
  readonly tools: ReadonlyMap<string, AnyTool>;
  /** Settles calls left `in_progress` by dead workers or left `uncertain` (see RecoverySummary). */
  recover(options?: { limit?: number }): Promise<RecoverySummary>;
  /** Loads a checkpoint and answers its pending tool_use through the ledger. */
  resume(store: CheckpointStore): Promise<{ checkpoint: AgentCheckpoint | undefined; toolResults: ToolResultBlock[] }>;
  /**
   * Waits for background work to finish: replies that arrive after a call timed out are
   * still recorded, and this resolves once those that have arrived are. Call before exit.
   */
  drain(): Promise<void>;
  /**
   * Holds the ledger against what the tools' downstream systems actually did (each tool's
   * `lookup`): an incremental scan that stores and returns the differences it finds. See
   * docs/reconciliation.md.
   */
  reconcile(options?: ReconcileOptions): Promise<ReconcileSummary>;
  /**
   * A saga: a workflow of named steps, each a gated call, whose completed steps are compensated
   * in reverse order when one fails; durable in the ledger, so a crashed driver resumes it by
   * running the same code again, and `recover()` finishes an interrupted compensation. Tool calls
   * with `scope.saga` set form a saga too. See docs/sagas.md.
   */
  saga(id: string, scope: Scope, options?: SagaOptions): Saga;
  readonly ledger: Stores;
  /** This gate's owner id, as written on its claims. */
  readonly owner: string;
  readonly stats: Readonly<GateStats>;
  /** Closes the ledger if the gate opened it (a ledger you passed in stays yours to close). */
  close(): Promise<void>;
}

/**
 * A tool that asks for a `repeats` policy on a ledger whose call store cannot enforce one is refused
 * at once, by name. The destructive tools' default policy applies where the store offers it.
 */
function checkRepeatsSupported(tools: ReadonlyMap<string, AnyTool>, ledger: Stores): void {
  if (repeatMethods(ledger.calls)) return;
  const asking = [...tools.values()].filter((tool) => tool.repeats !== undefined && tool.repeats !== false).map((tool) => tool.name);
  if (asking.length > 0) {
    throw new EffectgateError("EG_BAD_OPTION",
      `the tools ${asking.join(", ")} set a repeats policy, but the ledger ${ledger.location} cannot enforce one ` +
        "(its call store has no findRepeat / claimUnlessRepeated / claimAnswered): use the memory, SQLite or PostgreSQL ledger, or remove repeats");
  }
}

export function createGate(options: GateOptions): Gate {
  const tools = new Map<string, AnyTool>();
  for (const tool of options.tools) {
    if (tools.has(tool.name)) throw new EffectgateError("EG_BAD_TOOL_DEFINITION", `two tools are named ${JSON.stringify(tool.name)}`);
    // A tool marked `sandbox` runs its execute in a child process under Node's permission model.
    tools.set(tool.name, sandboxed(tool as AnyTool, policyFor(options, tool as AnyTool).timeoutMs));
  }
  const leaseMs = options.leaseMs ?? 30_000;
  if (!(leaseMs > 0)) throw new EffectgateError("EG_BAD_OPTION", `leaseMs must be a positive number of milliseconds, got ${leaseMs}`);
  const ownsLedger = options.ledger === undefined;
  // The SQLite store loads its driver only when the file is first opened.
  const ledger = options.ledger ?? sqliteLedger(DEFAULT_LEDGER_PATH);
  checkRepeatsSupported(tools, ledger);
  const stats: GateStats = { executed: 0, replayed: 0, alerts: 0 };
  const onAlert = options.onAlert ?? (options.logger ? alertToLogger(options.logger) : alertToStderr);
  const observers = options.observers ?? [];
  const alert = (raised: Alert) => {
    stats.alerts++;
    for (const observer of observers) {
      try {
        observer.alert?.(raised);
      } catch {
        // an observer's failure is not the call's
      }
    }
    onAlert(raised);
  };
  const owner = newOwnerId();
  const governance = createGovernance({
    policy: options.policy, tools, store: ledger.governance, location: ledger.location, owner,
    clock: options.clock ?? wallClockOf(options.time), approver: options.approver, alert,
  });
  const kernel = createKernel({
    calls: ledger.calls, tools, governor: governance, owner, leaseMs, waitMs: options.waitMs ?? leaseMs, stats, alert,
    ...(options.time ? { time: options.time } : {}),
    random: options.random ?? Math.random, policyFor: (tool) => policyFor(options, tool),
    ...(options.faults === undefined ? {} : { faults: options.faults }),
    ...(observers.length === 0 ? {} : { observers }),
    ...(ledger.reconcile ? { findings: ledger.reconcile } : {}),
  });
  const sagas: SagaRuntime = {
    kernel, log: ledger.sagas, location: ledger.location, approveNonCompensable: options.approveNonCompensable,
    approvalReasons: (tool, input) => governance.policy.approvalReasons(tool, input), faults: options.sagaFaults,
  };

  async function runToolUses(content: readonly unknown[], scope: Scope): Promise<ToolResultBlock[]> {
    checkScope(scope);
    return Promise.all(findToolUses(content).map((found) =>
      found.ok
        ? scope.saga === undefined ? kernel.runCall(found.block, scope) : runSagaToolUse(sagas, found.block, { ...scope, saga: scope.saga })
        : Promise.resolve(errorResult(found.id, "EG_MALFORMED_BLOCK", `${found.problem}. Nothing was executed.`))));
  }

  const surface = toolCallSurface(kernel, governance, checkScope);

  return {
    runToolUses,
    runTool: surface.runTool,
    approvalFor: surface.approvalFor,
    stoppedTools(scope) {
      checkScope(scope);
      return governance.stoppedTools(scope);
    },
    tools,
    // Sagas first: a compensating saga settles its own interrupted steps without re-running them.
    recover: async (opts) => {
      const sagaSummary = await recoverSagas(sagas, opts);
      const calls = await kernel.recover(opts);
      return sagaSummary.examined > 0 ? { ...calls, sagas: sagaSummary } : calls;
    },
    async resume(store) {
      const checkpoint = await store.load();
      if (!checkpoint?.pendingToolUse) return { checkpoint, toolResults: [] };
      return { checkpoint, toolResults: await runToolUses(checkpoint.pendingToolUse, checkpoint.scope) };
    },
    drain: () => kernel.drain(),
    reconcile: (opts) => reconcile({ ledger, tools: [...tools.values()] }, opts),
    saga(id, scope, sagaOptions) {
      checkScope(scope);
      return createSaga(sagas, id, scope, sagaOptions ?? {});
    },
    ledger,
    owner,
    stats,
    async close() {
      await kernel.close(options.closeDrainMs);
      stopSagaHeartbeats(sagas);
      if (ownsLedger) await ledger.close();
    },
  };
}

function checkScope(scope: Scope): void {
  const ok = typeof scope === "object" && scope !== null &&
    typeof scope.tenant === "string" && scope.tenant !== "" && typeof scope.task === "string" && scope.task !== "";
  if (!ok) throw new EffectgateError("EG_BAD_CONTENT", "runToolUses needs a scope { tenant, task } with non-empty strings: records are kept per tenant");
  for (const field of ["tenant", "task"] as const) {
    const value = scope[field];
    const at = value.search(/[\u0000-\u001f\u007f]/);
    if (at < 0) continue;
    const char = `U+${value.charCodeAt(at).toString(16).toUpperCase().padStart(4, "0")}`;
    throw new EffectgateError("EG_BAD_CONTENT",
      `the scope's ${field} ${JSON.stringify(value.length > 80 ? `${value.slice(0, 80)}…` : value)} contains a control character (${char} at index ${at}): ` +
        `a tenant or task must not contain control characters (U+0000–U+001F, U+007F), since they name the ledger's records and ` +
        `appear in logs and the CLI, and a ledger may not keep them as written. Nothing was executed.`);
  }
}

/** Governance's epoch clock: the gate's time source's wall clock when one is given. */
function wallClockOf(time: TimeSource | undefined): () => number {
  return time ? () => time.wall() : Date.now;
}
