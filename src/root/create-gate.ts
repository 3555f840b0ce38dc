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
import { EffectgateError } from "../core/errors.js";
import type { Scope } from "../core/keys.js";
import type { AnyTool, EffectClass, Tool } from "../core/tool.js";
import type { Ledger } from "../contracts/calls.js";
import { sqliteLedger } from "../stores/sqlite/calls.js";
import type { CheckpointStore, AgentCheckpoint } from "../checkpoint/codec.js";
import type { FaultHook, SagaFaultHook } from "../gate/faults.js";
import { reconcile, type ReconcileOptions, type ReconcileSummary } from "../reconcile/scan.js";
import { findToolUses, resultBlock, type ToolResultBlock } from "../core/blocks.js";
import { runCall } from "../gate/pipeline.js";
import { newOwnerId } from "../gate/owner.js";
import { recover, type RecoverySummary } from "../gate/recover.js";
import type { Alert, GateStats, Runtime, ToolPolicy } from "../gate/runtime.js";
import { DEFAULT_PROBE, DEFAULT_RETRY, DEFAULT_TIMEOUT_MS, type ProbePolicy, type RetryPolicy } from "../core/policies.js";
import { createGovernance, type Approver } from "../governance/govern.js";
import type { Policy } from "../governance/policy.js";
import { sandboxed } from "../governance/sandbox.js";
import { runSagaToolUse } from "../saga/agent.js";
import { recoverSagas } from "../saga/recover.js";
import { createSaga, stopSagaHeartbeats } from "../saga/saga.js";
import type { ApproveNonCompensable, Saga, SagaOptions } from "../saga/types.js";

export const DEFAULT_LEDGER_PATH = ".effectgate/ledger.db";

export interface GateOptions {
  // Tools of any schema and result type; the gate treats them alike. `any` (not `unknown`)
  // because a tool's execute/key functions take its own input type, which `unknown` would reject.
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  readonly tools: readonly Tool<any, any>[];
  /** Default: SQLite at `.effectgate/ledger.db` in the working directory. */
  readonly ledger?: Ledger;
  /** How long a claim stays ours without renewal (default 30 s). Renewed while the tool runs. */
  readonly leaseMs?: number;
  /** How long a call waits for a twin held by another worker before answering EG_IN_PROGRESS (default: leaseMs). */
  readonly waitMs?: number;
  /** Default time after which a call's outcome counts as unknown and its probe is asked (default 30 s; tools may override). */
  readonly timeoutMs?: number;
  /** Retry policy per effect class (defaults: read 3 tries with jitter, write 3 where harmless, destructive 1). */
  readonly retry?: Partial<Record<EffectClass, Partial<RetryPolicy>>>;
  /** How often and how patiently to probe a call whose outcome is unknown (default 6 tries, 200 ms doubling to 5 s). */
  readonly probe?: Partial<ProbePolicy>;
  /** Jitter source for retry backoff (default Math.random); tests pass a seeded one. */
  readonly random?: () => number;
  /** Called for each operator alert (default: one JSON line on stderr). */
  readonly onAlert?: (alert: Alert) => void;
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
  /** The clock governance judges rate windows and approval expiry by (default Date.now); tests pass their own. */
  readonly clock?: () => number;
  /**
   * Sagas (docs/sagas.md): decides whether a saga step that cannot be undone may run. Without it
   * such steps are refused (the step does not run and the saga compensates). A saga may override it.
   */
  readonly approveNonCompensable?: ApproveNonCompensable;
  /** Test hook: named points in a saga's steps and compensations (see effectgate/testing `killAtSaga`). */
  readonly sagaFaults?: SagaFaultHook;
}

export interface Gate {
  /**
   * Answers every tool_use block of an assistant message's `content` with one tool_result
   * block, in order (calls run concurrently). Never throws for a bad block or a failing
   * tool: each becomes an `is_error` result that says what happened and what to do.
   */
  runToolUses(content: readonly unknown[], scope: Scope): Promise<ToolResultBlock[]>;
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
  readonly ledger: Ledger;
  /** This gate's owner id, as written on its claims. */
  readonly owner: string;
  readonly stats: Readonly<GateStats>;
  /** Closes the ledger if the gate opened it (a ledger you passed in stays yours to close). */
  close(): Promise<void>;
}

export function createGate(options: GateOptions): Gate {
  const tools = new Map<string, AnyTool>();
  for (const tool of options.tools) {
    if (tools.has(tool.name)) throw new EffectgateError("EG_BAD_TOOL_DEFINITION", `two tools are named ${JSON.stringify(tool.name)}`);
    // A tool marked `sandbox` runs its execute in a child process under Node's permission model.
    tools.set(tool.name, sandboxed(tool as AnyTool, resolvePolicy(options, tool as AnyTool).timeoutMs));
  }
  const leaseMs = options.leaseMs ?? 30_000;
  if (!(leaseMs > 0)) throw new EffectgateError("EG_BAD_TOOL_DEFINITION", `leaseMs must be positive, got ${leaseMs}`);
  const ownsLedger = options.ledger === undefined;
  const ledger = options.ledger ?? sqliteLedger(DEFAULT_LEDGER_PATH);
  const stats: GateStats = { executed: 0, replayed: 0, alerts: 0 };
  const onAlert = options.onAlert ?? ((alert: Alert) => {
    const { cause: _cause, ...rest } = alert;
    process.stderr.write(`${JSON.stringify({ level: "error", source: "effectgate", alert: rest })}\n`);
  });
  const rt: Runtime = {
    ledger, tools, leaseMs,
    owner: newOwnerId(),
    waitMs: options.waitMs ?? leaseMs,
    faults: options.faults,
    stats,
    inflight: new Map(),
    abandoned: new Set(),
    background: new Set(),
    random: options.random ?? Math.random,
    approveNonCompensable: options.approveNonCompensable,
    sagaFaults: options.sagaFaults,
    policyFor: (tool) => resolvePolicy(options, tool),
    alert(alert) {
      stats.alerts++;
      onAlert(alert);
    },
  };
  const governance = createGovernance({
    policy: options.policy, tools, store: ledger.governance, location: ledger.location, owner: rt.owner,
    clock: options.clock ?? Date.now, approver: options.approver, alert: (alert) => rt.alert(alert),
  });
  Object.assign(rt, { governance });

  async function runToolUses(content: readonly unknown[], scope: Scope): Promise<ToolResultBlock[]> {
    checkScope(scope);
    return Promise.all(findToolUses(content).map((found) =>
      found.ok
        ? scope.saga === undefined ? runCall(rt, found.block, scope) : runSagaToolUse(rt, found.block, { ...scope, saga: scope.saga })
        : Promise.resolve(resultBlock(found.id, `EG_MALFORMED_BLOCK: ${found.problem}. Nothing was executed.`, true))));
  }

  return {
    runToolUses,
    // Sagas first: a compensating saga settles its own interrupted steps without re-running them.
    recover: async (opts) => {
      const sagas = await recoverSagas(rt, opts);
      const calls = await recover(rt, opts);
      return sagas.examined > 0 ? { ...calls, sagas } : calls;
    },
    async resume(store) {
      const checkpoint = await store.load();
      if (!checkpoint?.pendingToolUse) return { checkpoint, toolResults: [] };
      return { checkpoint, toolResults: await runToolUses(checkpoint.pendingToolUse, checkpoint.scope) };
    },
    async drain() {
      while (rt.background.size > 0) await Promise.allSettled([...rt.background]);
    },
    reconcile: (opts) => reconcile({ ledger, tools: [...tools.values()] }, opts),
    saga(id, scope, sagaOptions) {
      checkScope(scope);
      return createSaga(rt, id, scope, sagaOptions ?? {});
    },
    ledger,
    owner: rt.owner,
    stats,
    async close() {
      for (const controller of rt.abandoned) controller.abort(new Error("the gate was closed"));
      stopSagaHeartbeats(rt);
      if (ownsLedger) await ledger.close();
    },
  };
}

function resolvePolicy(options: GateOptions, tool: AnyTool): ToolPolicy {
  return {
    timeoutMs: tool.timeoutMs ?? options.timeoutMs ?? DEFAULT_TIMEOUT_MS,
    retry: { ...DEFAULT_RETRY[tool.effect], ...options.retry?.[tool.effect], ...tool.retry },
    probe: { ...DEFAULT_PROBE, ...options.probe, ...tool.probeBudget },
  };
}

function checkScope(scope: Scope): void {
  const ok = typeof scope === "object" && scope !== null &&
    typeof scope.tenant === "string" && scope.tenant !== "" && typeof scope.task === "string" && scope.task !== "";
  if (!ok) throw new EffectgateError("EG_BAD_CONTENT", "runToolUses needs a scope { tenant, task } with non-empty strings: records are kept per tenant");
}
