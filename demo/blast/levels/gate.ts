/**
 * The effectgate gate as a level: every tool defined with its effect class, schema and probe,
 * every write and destructive call claimed in the ledger before it runs, and a worker that
 * starts after a crash first runs `gate.recover()`. Levels 3 and up are this, plus one more
 * option each: sagas (4), reconciliation (5), a governance policy (6).
 */
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { type AnyTool, createGate, defineTool, type Gate, type GateOptions, type Json, type Policy, type Stores, type ToolContext } from "effectgate";
import { sqliteLedger } from "effectgate/sqlite";
import type { FaultPoint } from "effectgate/testing";
import { seededRandom } from "../../random.js";
import { SERVICE_TRAITS } from "../services.js";
import { CALL_TIMEOUT_MS, scaled, SLOW_MS } from "../timing.js";
import { callDownstream, listByWindow, probeFor, TOOLS, type Urls } from "../tools.js";
import { SAGA_STEPS, undoRef, type KillPoint, type ToolName } from "../workload.js";
import type { Availability, CallHooks, Executor, Level, LevelAudit, LevelRuntime, StoreSpec, WorkerContext } from "./types.js";

const honours = new Set(SERVICE_TRAITS.filter((s) => s.honoursKeys).map((s) => s.name));

const KILL_POINT_OF: Readonly<Record<FaultPoint, KillPoint>> = {
  after_claim: "before_call",
  after_execute: "after_effect",
  after_record: "after_record",
};

type Input = Record<string, unknown>;

/** The undo of a saga step, as a call to its compensating tool (see workload SAGA_STEPS). */
const UNDO: Partial<Record<ToolName, (input: Input) => Input>> = {
  charge_card: (input) => ({ charge: String(input.reference), amount: Number(input.amount), reference: undoRef(String(input.reference)) }),
  reserve_stock: (input) => ({ order: String(input.order), reference: undoRef(String(input.reference)) }),
};

const COMPENSATIONS = new Set<ToolName>([...SAGA_STEPS.values()].filter((t): t is ToolName => t !== null));

/** The fields reconciliation compares between the ledger and a downstream record. */
const RECONCILE_FIELDS: Partial<Record<ToolName, readonly string[]>> = {
  charge_card: ["amount", "currency", "customer"],
  create_ticket: ["customer", "subject"],
};

/**
 * The demo's tools as gate tools: the same HTTP calls as every level, plus schema, class, key
 * forwarding, probes, a dry run for the destructive one, compensations for saga steps and
 * lookups for reconciliation.
 */
export function gateTools(urls: Urls, hooks: Pick<CallHooks, "downstream">): AnyTool[] {
  return Object.values(TOOLS).map((info) => {
    const probe = probeFor(urls, info.name);
    const undo = UNDO[info.name];
    const undoTool = SAGA_STEPS.get(info.name);
    const fields = RECONCILE_FIELDS[info.name];
    // Compensations run as `<tool>:compensate` calls in the ledger (saga hooks), which no lookup can be declared for;
    // listing refunds and releases under their own tool would report every compensation as an orphan.
    const lookable = info.effect !== "read" && info.service !== "mail" && !COMPENSATIONS.has(info.name);
    return defineTool({
      name: info.name,
      description: info.description,
      effect: info.effect,
      input: info.schema,
      downstreamIdempotent: honours.has(info.service),
      // A slow request lands SLOW_MS after it was sent: the horizon after which an "absent" is the truth.
      settleMs: SLOW_MS + CALL_TIMEOUT_MS,
      execute: (input, ctx): Promise<Json> => hooks.downstream(ctx.toolUseId, () => callDownstream(urls, info.name, input, {
        ...(info.effect === "read" ? {} : { key: ctx.idempotencyKey }),
        signal: ctx.signal,
      })),
      ...(probe ? { probe: (input: Input, ctx: ToolContext) => hooks.downstream(ctx.toolUseId, () => probe(input, ctx.idempotencyKey)) } : {}),
      // What an approver would be shown (the gate asks it of destructive tools).
      ...(info.effect === "destructive" ? { dryRun: (input: Input) => ({ effect: "would_delete", would_affect: { draft: String(input.draft) }, reversible: false }) } : {}),
      ...(undo && undoTool
        ? {
            compensate: (input: Input, _result: unknown, ctx: ToolContext) =>
              hooks.downstream(ctx.toolUseId, () => callDownstream(urls, undoTool, undo(input), { key: ctx.idempotencyKey, signal: ctx.signal })),
          }
        : {}),
      ...(lookable
        ? {
            lookup: async (window: { since: number; until: number }) => (await listByWindow(urls, info.name, window)).filter((r) => r.key !== ""),
            ...(fields ? { reconcileFields: fields } : {}),
          }
        : {}),
    }) as unknown as AnyTool; // the schema's concrete input type is erased, as the gate does with every tool
  });
}

/** Demo-sized budgets: a client waits CALL_TIMEOUT_MS; probes keep asking for about 1.6 s (scaled), longer than a slow request's rest. */
export function gateSettings(seed: number): Omit<GateOptions, "tools"> {
  return {
    timeoutMs: CALL_TIMEOUT_MS,
    leaseMs: 10_000,
    probe: { attempts: 10, initialDelayMs: scaled(25), maxDelayMs: scaled(250) },
    retry: { read: { attempts: 3, initialDelayMs: scaled(20), maxDelayMs: scaled(80) }, write: { attempts: 3, initialDelayMs: scaled(20), maxDelayMs: scaled(80) } },
    random: seededRandom(seed),
    onAlert: () => {},
    // Levels without governance approve every request the gate files (it files one for each destructive call).
    approver: () => ({ approve: true, by: "effectgate demo (no governance at this level)" }),
    // Shipping cannot be undone; the workflow is designed to ship last, so the demo lets it run.
    approveNonCompensable: () => true,
  };
}

export async function openLedger(store: StoreSpec, options: { readOnly?: boolean } = {}): Promise<Stores> {
  // durability "process": survives the SIGKILLs the demo injects (not a power cut), without an fsync per write.
  if (store.kind === "sqlite") return sqliteLedger(store.path, options.readOnly ? { readOnly: true } : { durability: "process" });
  const { postgresLedger } = await import("effectgate/postgres");
  return postgresLedger({ connectionString: store.url, poolSize: 8 }, { schema: store.schema, ...(options.readOnly ? { readOnly: true } : { durability: "process" }) });
}

export interface GateLevelSpec {
  readonly key: string;
  readonly name: string;
  readonly adds: string;
  available?(): Promise<Availability>;
  /** Order workflows (reserve → charge → ship) run as sagas: their calls carry `scope.saga`. */
  readonly sagas?: boolean;
  /** After the run, `gate.reconcile()` holds the ledger against the downstreams. */
  readonly reconcile?: boolean;
  /** Governance: the policy, and how approval requests are decided. */
  readonly governance?: { readonly policy: Policy; readonly approver: NonNullable<GateOptions["approver"]> };
}

export function gateLevel(spec: GateLevelSpec): Level {
  const options = (ctx: Pick<WorkerContext, "seed" | "urls">, hooks: CallHooks, ledger: Stores): GateOptions => ({
    ...gateSettings(ctx.seed),
    ...(spec.governance ? { policy: spec.governance.policy, approver: spec.governance.approver } : {}),
    tools: gateTools(ctx.urls, hooks),
    ledger,
    faults: (point, call) => hooks.kill(KILL_POINT_OF[point], call.toolUseId),
  });
  return {
    key: spec.key,
    name: spec.name,
    adds: spec.adds,
    available: async () => (spec.available ? spec.available() : { available: true }),
    async open(ctx): Promise<LevelRuntime> {
      const gates = new Set<Gate>();
      const sagaTasks = new Set(spec.sagas ? ctx.workload.tasks.filter((t) => t.kind === "order").map((t) => t.id) : []);
      const newGate = async (hooks: CallHooks): Promise<Gate> => {
        const gate = createGate(options(ctx, hooks, await openLedger(ctx.store)));
        gates.add(gate);
        return gate;
      };
      const closeGate = async (gate: Gate) => {
        gates.delete(gate);
        await gate.drain(); // late replies are recorded before the worker goes
        await gate.close();
        await gate.ledger.close();
      };
      return {
        async executor(hooks): Promise<Executor> {
          const gate = await newGate(hooks);
          return {
            async answer(block, scope) {
              const inSaga = sagaTasks.has(scope.task) && SAGA_STEPS.has(block.name as ToolName);
              const [result] = await gate.runToolUses([block], inSaga ? { ...scope, saga: scope.task } : scope);
              if (!result) throw new Error(`the gate gave no tool_result for ${block.id}`);
              return result;
            },
            close: () => closeGate(gate),
          };
        },
        async recover() {
          const gate = await newGate({ kill: () => {}, downstream: (_id, work) => work() });
          try {
            await gate.recover();
          } finally {
            await closeGate(gate);
          }
        },
        async close() {
          for (const gate of [...gates]) await closeGate(gate);
        },
      };
    },
    async audit(ctx) {
      const ledger = await openLedger(ctx.store);
      try {
        let discrepanciesFound: number | null = null;
        if (spec.reconcile) {
          const gate = createGate(options({ seed: ctx.workload.seed, urls: ctx.urls }, { kill: () => {}, downstream: (_id, work) => work() }, ledger));
          const until = await ledger.calls.now();
          const summary = await gate.reconcile({ since: 0, until, settleMs: 0, skewMs: 0 });
          discrepanciesFound = summary.newFindings.filter((f) => f.kind !== "unresolved").length;
          if (process.env.EFFECTGATE_DEMO_KEEP === "1") writeFileSync(join(ctx.dir, "findings.json"), JSON.stringify(summary.newFindings, null, 1));
        }
        return { ...(await countQueue(ledger)), discrepanciesFound };
      } finally {
        await ledger.close();
      }
    },
  };
}

/** What the level's records leave for a person, and what nobody resolved. */
async function countQueue(ledger: Stores): Promise<Omit<LevelAudit, "discrepanciesFound">> {
  const records = await ledger.calls.list({ limit: 1_000_000 });
  const count = (...states: string[]) => records.filter((r) => states.includes(r.state)).length;
  const approvals = (await ledger.governance?.listApprovals({ state: "pending", limit: 1_000_000 }))?.length ?? 0;
  const breakers = (await ledger.governance?.listBreakers({ limit: 1_000_000 }))?.filter((b) => b.state === "open").length ?? 0;
  return { humanQueue: count("needs_human", "compensation_failed") + approvals + breakers, unresolved: count("in_progress", "uncertain") };
}
