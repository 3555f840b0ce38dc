/**
 * The saga engine: forward steps, and compensation in reverse order. Shared by the code API
 * (saga.ts), tagged agent calls (agent.ts), recovery (recover.ts) and operator requests.
 *
 * Every step and every compensation is a gated call (src/gate/call.ts) with a derived key
 * (keys.ts), so each is claimed before it runs, recorded after, and happens once however often
 * it is retried or re-driven. The saga log (contract.ts) is written before each call is claimed
 * and after its outcome is known, so a process killed at any point leaves enough behind for the
 * next one to continue exactly there:
 *
 *   step:          log step (pending) → claim + run call → log outcome (completed | failed | unknown)
 *   compensation:  log step compensating → claim + run compensation call → mark the forward call
 *                  record compensated → log step compensated
 *
 * A step still `pending` when compensation reaches it is settled from the ledger, never re-run:
 * no call record → one is written `failed` so the step can never start later; a call held by a
 * dead worker → its probe decides (done → compensated; absent → marked failed, skipped); no probe
 * or no answer → a person.
 */
import { EffectgateError, errorMessage, isErrorCode, messageOf, type ErrorCode } from "../core/errors.js";
import { fingerprint, type Scope } from "../core/keys.js";
import { validate, type StandardSchemaV1 } from "../core/standard-schema.js";
import { canTransition } from "../core/states.js";
import { redactInput, type AnyTool, type ToolContext } from "../core/tool.js";
import { type Json, toJson } from "../core/json.js";
import type { CallRecord } from "../contracts/calls.js";
import { leaseRanOut } from "../contracts/call-rules.js";
import { errorCodeOf, type ToolResultBlock } from "../core/blocks.js";
import type { Call, Kernel } from "../gate/kernel.js";
import type {
  Approval, Compensation, NewSagaEvent, OnAbandon, SagaLog, SagaRecord, SagaStepRecord, StepState, StepUpdate,
} from "../contracts/sagas.js";
import { isHolderDead } from "../gate/owner.js";
import { checkName, compensationKey, stepKey } from "./keys.js";
import type { SagaFaultHook } from "./faults.js";
import type { ApproveNonCompensable } from "./types.js";

/** What a gate's sagas get from the composition root: the kernel, the saga log and the policies that touch steps. */
export interface SagaRuntime {
  readonly kernel: Kernel;
  /** The ledger's saga log; undefined for a ledger that keeps none. */
  readonly log: SagaLog | undefined;
  /** Where the ledger is, for messages. */
  readonly location: string;
  /** The gate's policy for non-compensable steps (undefined: refuse them, unless governance asks a person). */
  readonly approveNonCompensable: ApproveNonCompensable | undefined;
  /** Why governance's policy asks a person to approve this call (none: it does not). */
  readonly approvalReasons: (tool: AnyTool, input: Json) => readonly string[];
  /** Test hook: the saga fault points. */
  readonly faults: SagaFaultHook | undefined;
}

/** One saga as one gate works on it. */
export interface SagaContext {
  readonly rt: SagaRuntime;
  readonly log: SagaLog;
  readonly tenant: string;
  readonly id: string;
  readonly task: string;
  /** The scope its calls run with (tenant, task, agent…). */
  readonly scope: Scope;
  readonly approve: ApproveNonCompensable | undefined;
  readonly onAbandon: OnAbandon;
  /** Compensation input functions of the steps this process drove; recovery in another process has none. */
  readonly compensationInputs: Map<string, (result: unknown, input: unknown) => unknown>;
}

export interface StepRequest {
  readonly name: string;
  readonly tool: AnyTool;
  /** The input as given (validated here; stored as the tool's `redact` says). */
  readonly input: unknown;
  readonly toolUseId: string;
  readonly compensateWith?: { readonly tool: string; readonly input: (result: unknown, input: unknown) => unknown };
  readonly compensable?: boolean;
}

export type StepOutcome =
  | { readonly kind: "completed"; readonly result: Json }
  /** The step failed, was refused, or its outcome is unknown: the saga compensated (see `saga.state`). */
  | { readonly kind: "failed"; readonly reason: string; readonly saga: SagaRecord }
  /** The step's outcome is not known yet (still running downstream, or held by another worker); the saga still runs. */
  | { readonly kind: "pending"; readonly message: string }
  /** Nothing ran and the saga is unchanged (bad input, unknown tool, key mismatch, ledger trouble). */
  | { readonly kind: "rejected"; readonly code: ErrorCode; readonly message: string }
  /** The saga takes no more steps. */
  | { readonly kind: "closed"; readonly saga: SagaRecord };

export function sagaLogOf(rt: SagaRuntime): SagaLog {
  if (!rt.log) {
    throw new EffectgateError("EG_LEDGER_UNAVAILABLE", `the ledger ${rt.location} keeps no saga log, so it cannot run sagas; use the memory, SQLite or PostgreSQL store`);
  }
  return rt.log;
}

// ---- one saga at a time per gate ------------------------------------------------------------

const flights = new WeakMap<SagaRuntime, Map<string, Promise<void>>>();
const flightName = (tenant: string, id: string) => JSON.stringify([tenant, id]);

/** Runs `work` as the only compensation of this saga in this gate (a twin waits, then sees the result). */
export async function sagaFlight<T>(rt: SagaRuntime, tenant: string, id: string, work: () => Promise<T>): Promise<T> {
  let map = flights.get(rt);
  if (!map) flights.set(rt, (map = new Map<string, Promise<void>>()));
  const name = flightName(tenant, id);
  for (let current = map.get(name); current; current = map.get(name)) await current;
  let release!: () => void;
  map.set(name, new Promise<void>((resolve) => (release = resolve)));
  try {
    return await work();
  } finally {
    map.delete(name);
    release();
  }
}

export function isSagaBusy(rt: SagaRuntime, tenant: string, id: string): boolean {
  return flights.get(rt)?.has(flightName(tenant, id)) === true;
}

/** Whether a saga's holder is gone: nobody, a lease that ran out (the store's clock), or a process on this machine certainly dead (gate/owner.ts). */
export function driverGone(rt: SagaRuntime, saga: SagaRecord, now: number): boolean {
  if (saga.owner === null) return true;
  if (saga.owner === rt.kernel.owner) return saga.state === "compensating" && !isSagaBusy(rt, saga.tenant, saga.id);
  return leaseRanOut(saga, now) || isHolderDead(saga.owner);
}

// ---- forward --------------------------------------------------------------------------------

/** Creates the saga if it is new; returns it as it stands. */
export async function openSaga(ctx: SagaContext): Promise<SagaRecord> {
  // A read first: every step opens its saga, and only the first needs the write.
  const known = await ctx.log.get(ctx.tenant, ctx.id);
  if (known) return known;
  const { saga } = await ctx.log.begin(
    { tenant: ctx.tenant, id: ctx.id, task: ctx.task, owner: ctx.rt.kernel.owner, leaseMs: ctx.rt.kernel.leaseMs, onAbandon: ctx.onAbandon },
    { kind: "saga_started", message: `started for task ${ctx.task} by ${ctx.rt.kernel.owner}` },
  );
  return saga;
}

/** Makes this gate the holder of a running (or stalled) saga, renewing its lease; anything else is returned as it is. */
export async function holdRunning(ctx: SagaContext, start: SagaRecord): Promise<SagaRecord> {
  let saga = start;
  for (let tries = 0; tries < 20; tries++) {
    if (saga.state !== "running" && saga.state !== "stalled") return saga;
    const now = await ctx.rt.kernel.calls.now();
    const fresh = saga.state === "running" && saga.owner === ctx.rt.kernel.owner && (saga.leaseExpiresAt ?? 0) - now > ctx.rt.kernel.leaseMs / 2;
    if (fresh) return saga;
    const event: NewSagaEvent | undefined = saga.state === "stalled" || (saga.owner !== null && saga.owner !== ctx.rt.kernel.owner)
      ? { kind: "driver_resumed", message: `driven again by ${ctx.rt.kernel.owner}${saga.owner ? ` (was ${saga.owner})` : ""}` }
      : undefined;
    const held = await ctx.log.update(ctx.tenant, ctx.id, saga.version, { state: "running", owner: ctx.rt.kernel.owner, leaseMs: ctx.rt.kernel.leaseMs }, event);
    if (held) return held;
    saga = await mustGet(ctx);
  }
  throw new EffectgateError("EG_IN_PROGRESS", `saga ${ctx.id} kept changing under this driver; try again`);
}

async function mustGet(ctx: SagaContext): Promise<SagaRecord> {
  const saga = await ctx.log.get(ctx.tenant, ctx.id);
  if (!saga) throw new EffectgateError("EG_LEDGER_CORRUPT", `saga ${ctx.tenant}/${ctx.id} vanished from ${ctx.rt.location}`);
  return saga;
}

const rejected = (code: ErrorCode, message: string): StepOutcome => ({ kind: "rejected", code, message });

export async function runStep(ctx: SagaContext, req: StepRequest, again = false): Promise<StepOutcome> {
  const { rt, log } = ctx;
  const badName = checkName("step name", req.name);
  if (badName) return rejected("EG_INVALID_INPUT", `${badName}; nothing was executed`);
  // Checked here too (runCall checks again) so no step is logged for input that can never run.
  const checked = await validate(req.tool.input, req.input);
  if (!checked.ok) {
    return rejected("EG_INVALID_INPUT", `the input for ${req.tool.name} does not match its schema: ${checked.issues.join("; ")}. Nothing was executed; fix the input and call again.`);
  }
  const key = stepKey(ctx.id, req.name);
  const print = fingerprint(req.tool.name, req.input);
  let saga = await openSaga(ctx);
  if (saga.task !== ctx.task) {
    return rejected("EG_KEY_MISMATCH", `saga ${ctx.id} belongs to task ${saga.task}, not ${ctx.task}; nothing was executed. Use another saga id.`);
  }
  let step = await log.getStep(ctx.tenant, ctx.id, req.name);
  if (step && (step.fingerprint !== print || step.tool !== req.tool.name)) {
    return rejected("EG_KEY_MISMATCH",
      `step ${req.name} of saga ${ctx.id} was first run as a call of ${step.tool} with different input; this one was not executed. Use a new step name for a different call.`);
  }
  if (req.compensateWith) ctx.compensationInputs.set(req.name, req.compensateWith.input);
  // A stalled saga is taken back by the driver that runs it again.
  if (saga.state === "running" || saga.state === "stalled") saga = await holdRunning(ctx, saga);
  if (step?.state === "completed" && saga.state !== "compensating") return { kind: "completed", result: step.result };
  if (saga.state !== "running") return answerClosed(ctx, saga, step);

  if (!step) {
    const plan = planCompensation(ctx, req);
    if ("problem" in plan) return rejected(plan.code, plan.problem);
    const stored = redactInput(req.input, req.tool.redact);
    let approval: Approval = "not_needed";
    let refusal: string | null = null;
    const nonCompensable = plan.compensable ? undefined : plan.reason;
    if (nonCompensable !== undefined) {
      const decision = await ask(ctx, req, toJson(stored.value), nonCompensable);
      approval = decision.approved ? "approved" : "refused";
      refusal = decision.approved ? null : decision.why;
    }
    const event: NewSagaEvent = approval === "approved"
      ? { kind: "step_approved", step: req.name, message: `non-compensable (${nonCompensable ?? ""}); approved, running ${req.tool.name}` }
      : approval === "refused"
        ? { kind: "step_refused", step: req.name, message: `not run: ${refusal ?? "refused"}` }
        : { kind: "step_started", step: req.name, message: `running ${req.tool.name} (key ${key})` };
    const added = await log.addStep({
      tenant: ctx.tenant, sagaId: ctx.id, name: req.name, tool: req.tool.name, effect: req.tool.effect, key,
      input: toJson(stored.value), inputRedacted: stored.redacted, fingerprint: print, compensable: plan.compensable,
      compensation: plan.compensation, approval, state: approval === "refused" ? "refused" : "pending", error: refusal,
    }, event);
    if (added.outcome === "saga_not_running") return answerClosed(ctx, await mustGet(ctx), undefined);
    if (added.outcome === "exists") return again ? rejected("EG_IN_PROGRESS", `step ${req.name} is being added by another driver`) : runStep(ctx, req, true);
    step = added.step;
  }
  switch (step.state) {
    case "pending":
    case "unknown":
      break;
    case "failed":
    case "refused":
      // Logged as failed by a driver that died before starting the compensation: start it now.
      return failSaga(ctx, step, step.error ?? `step ${step.name} ${step.state}`);
    default:
      return answerClosed(ctx, await mustGet(ctx), step);
  }

  await rt.faults?.("saga_before_step", { tool: req.tool.name, key, toolUseId: req.toolUseId });
  const block = await rt.kernel.runCall({ type: "tool_use", id: req.toolUseId, name: req.tool.name, input: req.input }, ctx.scope, { key });
  if (req.tool.effect === "read") {
    return block.is_error ? settleStep(ctx, step, "failed", null, block.content) : settleStep(ctx, step, "completed", parseContent(block.content), null);
  }
  const record = await rt.kernel.calls.get(ctx.tenant, key);
  if (!record || record.fingerprint !== print) return rejectedByBlock(block);
  switch (record.state) {
    case "completed":
    case "compensated":
    case "compensation_failed":
      return settleStep(ctx, step, "completed", record.result, null);
    case "failed":
      return settleStep(ctx, step, "failed", null, record.error ?? block.content);
    case "needs_human":
      return settleStep(ctx, step, "unknown", null, `its outcome is unknown and a person was asked (${record.error ?? "interrupted"})`);
    case "in_progress":
    case "uncertain":
      return { kind: "pending", message: block.content };
  }
}

function rejectedByBlock(block: ToolResultBlock): StepOutcome {
  const code = errorCodeOf(block);
  return isErrorCode(code) ? rejected(code, block.content.slice(code.length + 2)) : rejected("EG_TOOL_FAILED", block.content);
}

function parseContent(content: string): Json {
  try {
    return JSON.parse(content) as Json;
  } catch {
    return content;
  }
}

type Plan =
  | { readonly compensable: true; readonly compensation: Compensation | null }
  | { readonly compensable: false; readonly compensation: null; readonly reason: string }
  | { readonly code: ErrorCode; readonly problem: string };

function planCompensation(ctx: SagaContext, req: StepRequest): Plan {
  const tool = req.tool;
  if (tool.effect === "read") return { compensable: true, compensation: null };
  if (req.compensateWith) {
    if (req.compensable === false) return { code: "EG_BAD_TOOL_DEFINITION", problem: `step ${req.name} says compensable: false but gives a compensation; remove one. Nothing was executed.` };
    if (!ctx.rt.kernel.tools.has(req.compensateWith.tool)) {
      return { code: "EG_UNKNOWN_TOOL", problem: `step ${req.name}'s compensation tool ${JSON.stringify(req.compensateWith.tool)} is not one of this gate's tools. Nothing was executed.` };
    }
    return { compensable: true, compensation: { kind: "tool", tool: req.compensateWith.tool, input: null } };
  }
  if (req.compensable === false) return { compensable: false, compensation: null, reason: `step ${req.name} is marked compensable: false` };
  if (tool.compensable === false) return { compensable: false, compensation: null, reason: `${tool.name} is marked compensable: false` };
  if (tool.compensateWith) {
    if (!ctx.rt.kernel.tools.has(tool.compensateWith.tool)) {
      return { code: "EG_UNKNOWN_TOOL", problem: `${tool.name} is undone by ${JSON.stringify(tool.compensateWith.tool)} (compensateWith), which is not one of this gate's tools. Nothing was executed.` };
    }
    return { compensable: true, compensation: { kind: "tool", tool: tool.compensateWith.tool, input: null } };
  }
  if (tool.compensate) return { compensable: true, compensation: { kind: "hook" } };
  if (req.compensable === true) {
    return { code: "EG_BAD_TOOL_DEFINITION", problem: `step ${req.name} says compensable: true but nothing undoes ${tool.name} (no compensate hook or compensateWith, no compensation given). Nothing was executed.` };
  }
  return { compensable: false, compensation: null, reason: `nothing undoes ${tool.name} (no compensate hook or compensateWith, no compensation given)` };
}

async function ask(ctx: SagaContext, req: StepRequest, input: Json, reason: string): Promise<{ approved: boolean; why: string }> {
  const policy = ctx.approve ?? ctx.rt.approveNonCompensable;
  if (!policy) {
    // The gate's governance policy asks a person for this call (a durable approval request):
    // the step is let through to it, and the gated call waits for that approval before running.
    const governed = ctx.rt.approvalReasons(req.tool, input);
    if (governed.length > 0) return { approved: true, why: `approval left to the governance policy (${governed.join("; ")})` };
    return { approved: false, why: `${reason}, and neither an approveNonCompensable policy (saga or gate options) nor a governance approval rule covers it, so it was refused` };
  }
  try {
    const answer = await policy({
      tenant: ctx.tenant, sagaId: ctx.id, task: ctx.task, step: req.name, tool: req.tool.name, effect: req.tool.effect, input, reason,
    });
    return answer === true ? { approved: true, why: "approved" } : { approved: false, why: `${reason}; approveNonCompensable refused it` };
  } catch (err) {
    return { approved: false, why: `${reason}; approveNonCompensable failed (${messageOf(err)}), so it was refused` };
  }
}

/** Logs a step's outcome; a failure starts the compensation. */
async function settleStep(ctx: SagaContext, start: SagaStepRecord, state: "completed" | "failed" | "unknown", result: Json | null, error: string | null): Promise<StepOutcome> {
  let step = start;
  for (let tries = 0; tries < 20; tries++) {
    if (step.state === state) break;
    if (!canMoveFrom(step.state, state)) return answerClosed(ctx, await mustGet(ctx), step);
    const update: StepUpdate = state === "completed"
      ? { state, result, error: null, ...compensationWithInput(ctx, step, result) }
      : { state, error };
    const event: NewSagaEvent = state === "completed"
      ? { kind: "step_completed", step: step.name, message: `${step.tool} completed`, data: result }
      : { kind: state === "failed" ? "step_failed" : "step_unknown", step: step.name, message: error ?? state };
    const next = await ctx.log.updateStep(ctx.tenant, ctx.id, step.name, step.version, update, event);
    if (next) {
      step = next;
      break;
    }
    const current = await ctx.log.getStep(ctx.tenant, ctx.id, step.name);
    if (!current) throw new EffectgateError("EG_LEDGER_CORRUPT", `step ${step.name} of saga ${ctx.tenant}/${ctx.id} vanished`);
    step = current;
  }
  await ctx.rt.faults?.("saga_after_step", { tool: step.tool, key: step.key, toolUseId: step.key });
  if (state === "completed") return { kind: "completed", result: step.result };
  return failSaga(ctx, step, `step ${step.name} (${step.tool}) ${state === "failed" ? "failed" : "has an unknown outcome"}: ${error ?? state}`);
}

function canMoveFrom(from: StepState, to: StepState): boolean {
  return from === "pending" || (from === "unknown" && to !== "unknown");
}

/**
 * For a step undone by another tool: its input, computed from the result if this process knows
 * how — the step's own `compensate.input` (only the driver's code has it), else the tool's
 * `compensateWith` (any process with the tools has it).
 */
function compensationWithInput(ctx: SagaContext, step: SagaStepRecord, result: Json | null): { compensation?: Compensation; error?: string } {
  const comp = step.compensation;
  if (comp?.kind !== "tool" || comp.input !== null) return {};
  const declared = ctx.rt.kernel.tools.get(step.tool)?.compensateWith;
  const fn = ctx.compensationInputs.get(step.name) ??
    (declared?.tool === comp.tool ? (stepResult: unknown, stepInput: unknown) => declared.input(stepInput, stepResult) : undefined);
  if (!fn) return {};
  try {
    return { compensation: { ...comp, input: toJson(fn(result, step.input)) } };
  } catch (err) {
    return { error: `its compensation input could not be computed: ${messageOf(err)}` };
  }
}

/** Moves the saga to compensating (if it is not there or past it) and runs the compensation. */
async function failSaga(ctx: SagaContext, step: SagaStepRecord, reason: string): Promise<StepOutcome> {
  await requestCompensation(ctx, reason, "compensation_started");
  const saga = await sagaFlight(ctx.rt, ctx.tenant, ctx.id, () => compensateSaga(ctx));
  return { kind: "failed", reason: step.error ?? reason, saga };
}

/** The answer for a step of a saga that takes no more steps; finishes an interrupted compensation first. */
async function answerClosed(ctx: SagaContext, start: SagaRecord, step: SagaStepRecord | undefined): Promise<StepOutcome> {
  let saga = start;
  if (saga.state === "compensating") saga = await sagaFlight(ctx.rt, ctx.tenant, ctx.id, () => compensateSaga(ctx));
  const current = step && (await ctx.log.getStep(ctx.tenant, ctx.id, step.name));
  if (current && (current.state === "failed" || current.state === "refused" || current.state === "unknown")) {
    return { kind: "failed", reason: current.error ?? `step ${current.name} ${current.state}`, saga };
  }
  if (current?.state === "completed" && saga.state === "completed") return { kind: "completed", result: current.result };
  return { kind: "closed", saga };
}

/**
 * running | stalled | completed → compensating, held by this gate (which compensates it next; if
 * it dies first, its dead owner lets recovery take over), with the reason and an event. Anything
 * else is left as it is.
 */
export async function requestCompensation(ctx: SagaContext, reason: string, kind: "compensation_started" | "compensation_requested" | "driver_died"): Promise<SagaRecord> {
  let saga = await mustGet(ctx);
  for (let tries = 0; tries < 20; tries++) {
    if (saga.state !== "running" && saga.state !== "stalled" && saga.state !== "completed") return saga;
    const moved = await ctx.log.update(ctx.tenant, ctx.id, saga.version, { state: "compensating", reason, owner: ctx.rt.kernel.owner, leaseMs: ctx.rt.kernel.leaseMs },
      { kind, message: reason });
    if (moved) return moved;
    saga = await mustGet(ctx);
  }
  throw new EffectgateError("EG_IN_PROGRESS", `saga ${ctx.id} kept changing; its compensation was not started`);
}

// ---- compensation ---------------------------------------------------------------------------

type StepVerdict = { readonly kind: "done" } | { readonly kind: "human"; readonly why: string } | { readonly kind: "later"; readonly why: string };
const DONE: StepVerdict = { kind: "done" };

/**
 * Compensates a `compensating` saga: its steps in reverse order. Returns the saga as it ends:
 * `compensated`, `compensation_failed` (a person must settle a step), or still `compensating`
 * (paused: a step's outcome is not known yet, or a tool is missing here; recovery resumes it).
 * A saga another live worker is compensating is left to it. Call inside `sagaFlight`.
 */
export async function compensateSaga(ctx: SagaContext): Promise<SagaRecord> {
  const { rt, log } = ctx;
  let saga = await mustGet(ctx);
  for (let tries = 0; ; tries++) {
    if (saga.state !== "compensating") return saga;
    if (saga.owner === rt.kernel.owner) break;
    if (saga.owner !== null && !driverGone(rt, saga, await rt.kernel.calls.now())) return saga;
    const event: NewSagaEvent | undefined = saga.owner === null ? undefined : { kind: "driver_resumed", message: `compensation taken over by ${rt.kernel.owner} from ${saga.owner}, which is gone` };
    const held = await log.update(ctx.tenant, ctx.id, saga.version, { state: "compensating", owner: rt.kernel.owner, leaseMs: rt.kernel.leaseMs }, event);
    if (held) {
      saga = held;
      break;
    }
    if (tries > 20) return saga;
    saga = await mustGet(ctx);
  }
  const heartbeat = rt.kernel.time.interval(Math.max(10, Math.floor(rt.kernel.leaseMs / 3)), () => {
    log.renewLease(ctx.tenant, ctx.id, rt.kernel.owner, rt.kernel.leaseMs).catch(() => undefined);
  });
  try {
    const steps = await log.steps(ctx.tenant, ctx.id);
    const forHuman: string[] = [];
    const undone: string[] = [];
    for (const step of [...steps].reverse()) {
      const verdict = await compensateStep(ctx, step);
      if (verdict.kind === "later") return await finishPass(ctx, "compensating", `paused at step ${step.name}: ${verdict.why}`);
      if (verdict.kind === "human") forHuman.push(`${step.name}: ${verdict.why}`);
      else undone.push(step.name);
    }
    if (forHuman.length > 0) {
      const why = `a person must settle ${forHuman.length === 1 ? "step" : "steps"} ${forHuman.join("; ")}`;
      const ended = await finishPass(ctx, "compensation_failed", why);
      rt.kernel.alert({
        code: "needs_human",
        message: `saga ${ctx.id} could not be fully compensated: ${why}. See: effectgate saga show ${ctx.id} --tenant ${ctx.tenant}`,
        tenant: ctx.tenant, key: `saga:${ctx.id}`, tool: "saga",
      });
      return ended;
    }
    return await finishPass(ctx, "compensated", undefined);
  } finally {
    heartbeat.cancel();
  }
}

async function finishPass(ctx: SagaContext, state: "compensating" | "compensated" | "compensation_failed", why: string | undefined): Promise<SagaRecord> {
  let saga = await mustGet(ctx);
  for (let tries = 0; tries < 20; tries++) {
    if (saga.state !== "compensating") return saga;
    const event: NewSagaEvent = state === "compensating"
      ? { kind: "compensation_paused", message: `${why ?? "paused"}; gate.recover() resumes it` }
      : state === "compensated"
        ? { kind: "saga_compensated", message: "every completed, compensable step was undone" }
        : { kind: "saga_compensation_failed", message: why ?? "compensation failed" };
    const update = state === "compensated"
      ? { state, owner: null }
      : { state, owner: null, reason: state === "compensating" ? `${saga.reason ?? "compensating"} (${why ?? "paused"})` : why ?? null };
    const moved = await ctx.log.update(ctx.tenant, ctx.id, saga.version, update, event);
    if (moved) return moved;
    saga = await mustGet(ctx);
  }
  return saga;
}

async function compensateStep(ctx: SagaContext, first: SagaStepRecord): Promise<StepVerdict> {
  const { log } = ctx;
  let step = first;
  const reread = async () => {
    const current = await log.getStep(ctx.tenant, ctx.id, step.name);
    if (!current) throw new EffectgateError("EG_LEDGER_CORRUPT", `step ${step.name} of saga ${ctx.tenant}/${ctx.id} vanished`);
    step = current;
  };
  for (let tries = 0; tries < 20; tries++) {
    switch (step.state) {
      case "failed":
      case "refused":
      case "skipped":
      case "compensated":
        return DONE;
      case "compensation_failed":
        return { kind: "human", why: step.error ?? "its compensation failed" };
      case "pending":
      case "unknown": {
        const found = await settleForward(ctx, step);
        if (found.kind === "later") return found;
        if (found.kind === "absent") {
          const next = await log.updateStep(ctx.tenant, ctx.id, step.name, step.version, { state: "skipped", error: found.why },
            { kind: "step_skipped", step: step.name, message: `nothing to undo: ${found.why}` });
          if (next) return DONE;
          await reread();
          continue;
        }
        if (found.kind === "human") {
          if (step.state === "unknown") return { kind: "human", why: found.why };
          const next = await log.updateStep(ctx.tenant, ctx.id, step.name, step.version, { state: "unknown", error: found.why },
            { kind: "step_unknown", step: step.name, message: found.why });
          if (next) return { kind: "human", why: found.why };
          await reread();
          continue;
        }
        const next = await log.updateStep(ctx.tenant, ctx.id, step.name, step.version,
          { state: "completed", result: found.result, ...compensationWithInput(ctx, step, found.result) },
          { kind: "step_completed", step: step.name, message: `${step.tool} had completed (found while compensating)`, data: found.result });
        if (next) step = next;
        else await reread();
        continue;
      }
      case "completed": {
        if (step.effect === "read") return DONE;
        if (!step.compensable || step.compensation === null) {
          await log.appendEvent(ctx.tenant, ctx.id, {
            kind: "step_kept", step: step.name,
            message: `${step.tool} cannot be undone (${step.approval === "approved" ? "it was approved as non-compensable" : "non-compensable"}); its effect stays`,
          });
          return DONE;
        }
        let compensation = step.compensation;
        if (compensation.kind === "tool" && compensation.input === null) {
          const computed = compensationWithInput(ctx, step, step.result);
          if (!computed.compensation) {
            return failCompensation(ctx, step,
              computed.error ?? `its compensation input (for ${compensation.tool}) was never recorded: the driver died between the step completing and logging it, and only the driver's code can compute it. Undo it by hand, or re-run the saga's code`);
          }
          compensation = computed.compensation;
        }
        const next = await log.updateStep(ctx.tenant, ctx.id, step.name, step.version,
          { state: "compensating", compensation, compensationKey: compensationKey(ctx.id, step.name) },
          { kind: "compensation_started", step: step.name, message: `undoing ${step.tool} with ${compensation.kind === "hook" ? `its compensate hook` : compensation.tool}` });
        if (next) step = next;
        else await reread();
        continue;
      }
      case "compensating":
        return runCompensation(ctx, step);
    }
  }
  return { kind: "later", why: `step ${step.name} kept changing under this compensation pass` };
}

async function runCompensation(ctx: SagaContext, step: SagaStepRecord): Promise<StepVerdict> {
  const { rt } = ctx;
  const comp = step.compensation;
  if (!comp) return failCompensation(ctx, step, "it is compensating but has no compensation recorded");
  const key = step.compensationKey ?? compensationKey(ctx.id, step.name);
  let tool: AnyTool | undefined;
  let input: unknown;
  if (comp.kind === "tool") {
    tool = rt.kernel.tools.get(comp.tool);
    input = comp.input;
    if (!tool) return { kind: "later", why: `this gate has no tool named ${comp.tool} to undo step ${step.name}; a process that has it resumes the compensation (gate.recover())` };
  } else {
    const forward = rt.kernel.tools.get(step.tool);
    if (!forward?.compensate) return { kind: "later", why: `this gate has no ${step.tool} tool with a compensate hook to undo step ${step.name}; a process that has it resumes the compensation (gate.recover())` };
    tool = hookTool(forward);
    input = { input: step.input, result: step.result };
  }
  await rt.faults?.("saga_before_compensation", { tool: tool.name, key, toolUseId: key });
  const block = await rt.kernel.runCall({ type: "tool_use", id: key, name: tool.name, input }, ctx.scope, { key, tool });
  const record = await rt.kernel.calls.get(ctx.tenant, key);
  if (!record || record.fingerprint !== fingerprint(tool.name, input)) {
    if (/^EG_(LEDGER_UNAVAILABLE|IN_PROGRESS|AWAITING_APPROVAL)\b/.test(block.content)) return { kind: "later", why: block.content };
    return failCompensation(ctx, step, `the compensation call was not run: ${block.content}`);
  }
  switch (record.state) {
    case "completed":
    case "compensated":
    case "compensation_failed": {
      await markForward(ctx, step, "compensated", null);
      for (let tries = 0; tries < 20 && step.state === "compensating"; tries++) {
        const next = await ctx.log.updateStep(ctx.tenant, ctx.id, step.name, step.version, { state: "compensated", error: null },
          { kind: "step_compensated", step: step.name, message: `${step.tool} undone by ${tool.name} (key ${key})`, data: record.result });
        if (next) step = next;
        else step = (await ctx.log.getStep(ctx.tenant, ctx.id, step.name)) ?? step;
      }
      await rt.faults?.("saga_after_compensation", { tool: tool.name, key, toolUseId: key });
      return DONE;
    }
    case "failed":
      return failCompensation(ctx, step, `its compensation ${tool.name} failed: ${record.error ?? block.content}`);
    case "needs_human":
      return failCompensation(ctx, step, `its compensation ${tool.name} has an unknown outcome: ${record.error ?? block.content}`);
    case "in_progress":
    case "uncertain":
      return { kind: "later", why: block.content };
  }
}

async function failCompensation(ctx: SagaContext, start: SagaStepRecord, why: string): Promise<StepVerdict> {
  let step = start;
  await markForward(ctx, step, "compensation_failed", why);
  for (let tries = 0; tries < 20 && step.state !== "compensation_failed"; tries++) {
    if (step.state !== "completed" && step.state !== "compensating") break;
    const next = await ctx.log.updateStep(ctx.tenant, ctx.id, step.name, step.version, { state: "compensation_failed", error: why },
      { kind: "step_compensation_failed", step: step.name, message: why });
    step = next ?? (await ctx.log.getStep(ctx.tenant, ctx.id, step.name)) ?? step;
  }
  ctx.rt.kernel.alert({
    code: "needs_human",
    message: `saga ${ctx.id}: step ${step.name} (${step.tool}, key ${step.key}) could not be undone: ${why}`,
    tenant: ctx.tenant, key: step.key, tool: step.tool,
  });
  return { kind: "human", why };
}

/** Moves the forward call's record completed → compensated | compensation_failed (reads have none). */
async function markForward(ctx: SagaContext, step: SagaStepRecord, to: "compensated" | "compensation_failed", error: string | null): Promise<void> {
  if (step.effect === "read") return;
  for (let tries = 0; tries < 20; tries++) {
    const record = await ctx.rt.kernel.calls.get(ctx.tenant, step.key);
    if (!record || record.state === to || !canTransition(record.state, to)) return;
    const moved = await ctx.rt.kernel.calls.update(ctx.tenant, step.key, record.version, error === null ? { state: to } : { state: to, error });
    if (moved) return;
  }
}

type Found =
  | { readonly kind: "happened"; readonly result: Json | null }
  | { readonly kind: "absent"; readonly why: string }
  | { readonly kind: "human"; readonly why: string }
  | { readonly kind: "later"; readonly why: string };

/**
 * What became of a step whose outcome the saga log does not know, from the ledger, WITHOUT
 * ever running it again: a saga being compensated must not gain a new effect.
 */
async function settleForward(ctx: SagaContext, step: SagaStepRecord): Promise<Found> {
  const { rt } = ctx;
  if (step.effect === "read") return { kind: "absent", why: "a read has no effect to undo" };
  const tool = rt.kernel.tools.get(step.tool);
  return rt.kernel.singleFlight(ctx.tenant, step.key, async (): Promise<Found> => {
    for (let tries = 0; tries < 100; tries++) {
      const record = await rt.kernel.calls.get(ctx.tenant, step.key);
      if (!record) {
        // Never claimed. Claim it and fail it, so a driver still about to claim it finds it failed and never runs it.
        const claim = await rt.kernel.calls.claim({
          tenant: ctx.tenant, key: step.key, tool: step.tool, effect: step.effect, task: ctx.task, toolUseId: step.key,
          fingerprint: step.fingerprint, input: step.input, inputRedacted: step.inputRedacted, owner: rt.kernel.owner, leaseMs: rt.kernel.leaseMs,
        });
        if (!claim.claimed) continue;
        const closed = await rt.kernel.calls.update(ctx.tenant, step.key, claim.record.version, {
          state: "failed", owner: null, error: errorMessage("EG_SAGA_CLOSED", `not executed: saga ${ctx.id} was being compensated before this step started`),
        });
        if (!closed) continue;
        return { kind: "absent", why: "its call had not started, and now never will" };
      }
      if (record.fingerprint !== step.fingerprint) return { kind: "human", why: `key ${step.key} holds a different call (${record.tool})` };
      switch (record.state) {
        case "completed":
        case "compensated":
        case "compensation_failed":
          return { kind: "happened", result: record.result };
        case "failed":
          return { kind: "absent", why: `its call failed: ${record.error ?? "failed"}` };
        case "needs_human":
          return { kind: "human", why: `its outcome is unknown: ${record.error ?? "interrupted"}` };
        case "in_progress":
        case "uncertain":
          break;
      }
      const waited = await rt.kernel.waitForHolder(record);
      if (waited.kind === "live") return { kind: "later", why: `its call is held by a live worker (${waited.record.owner ?? "unknown"})` };
      if (waited.kind !== "stale") continue;
      if (!tool) return { kind: "later", why: `this gate has no tool named ${step.tool} to probe its call` };
      const found = await probeHeld(ctx, step, tool, waited.record);
      if (found) return found;
    }
    return { kind: "later", why: `the call of step ${step.name} kept changing under this compensation pass` };
  });
}

/**
 * Takes over a stale call and asks its probe, never re-running it: a saga being compensated must
 * not gain a new effect. Undefined when another worker moved it first.
 */
async function probeHeld(ctx: SagaContext, step: SagaStepRecord, tool: AnyTool, record: CallRecord): Promise<Found | undefined> {
  const parsed = step.inputRedacted ? undefined : await validate(tool.input, step.input);
  const call: Call = {
    tool, input: parsed?.ok ? parsed.value : undefined, hasInput: parsed?.ok === true, scope: ctx.scope, toolUseId: step.key,
  };
  const resolved = await ctx.rt.kernel.resolveStale(call, record, {
    probeRounds: ctx.rt.kernel.policyFor(tool).probe.attempts,
    onAbsent: { fail: errorMessage("EG_SAGA_CLOSED", `not re-run: its probe found no effect while saga ${ctx.id} was being compensated`) },
    noProbeReason: `the call was interrupted before its outcome was recorded and ${tool.name} has no probe; saga ${ctx.id} is being compensated, so it was not re-run`,
  });
  switch (resolved.resolution) {
    case "probed_done":
      return { kind: "happened", result: resolved.record?.result ?? null };
    case "absent_failed":
      return { kind: "absent", why: "its probe found no effect; it was not re-run" };
    case "needs_human":
      return { kind: "human", why: resolved.record?.error ?? "interrupted, no probe" };
    case "probed_unknown":
    case "deferred":
      return { kind: "later", why: `its outcome is not known yet (${resolved.record?.error ?? "no answer"})` };
    case "reexecuted":
      // Only a read tool re-runs here, and reads are never steps that are settled this way.
      return { kind: "later", why: "its call was run again" };
    case "moved":
      return undefined;
  }
}

// ---- compensation hooks as gated calls ------------------------------------------------------

const passThrough: StandardSchemaV1<unknown, unknown> = {
  "~standard": { version: 1, vendor: "effectgate", validate: (value: unknown) => ({ value }) },
};
const hookTools = new WeakMap<AnyTool, AnyTool>();

/** A tool's `compensate` hook as a tool of its own (`<name>:compensate`), so it runs through the gate like any call. */
function hookTool(forward: AnyTool): AnyTool {
  const known = hookTools.get(forward);
  if (known) return known;
  if (!forward.compensate) throw new EffectgateError("EG_BAD_TOOL_DEFINITION", `${forward.name} has no compensate hook`);
  const tool: AnyTool = {
    name: `${forward.name}:compensate`,
    description: `undoes a ${forward.name} call`,
    effect: forward.effect === "read" ? "write" : forward.effect,
    input: passThrough,
    key: "tool_use_id",
    redact: [],
    ...(forward.timeoutMs === undefined ? {} : { timeoutMs: forward.timeoutMs }),
    ...(forward.downstreamIdempotent === undefined ? {} : { downstreamIdempotent: forward.downstreamIdempotent }),
    ...(forward.settleMs === undefined ? {} : { settleMs: forward.settleMs }),
    ...(forward.retry === undefined ? {} : { retry: forward.retry }),
    ...(forward.probeBudget === undefined ? {} : { probeBudget: forward.probeBudget }),
    async execute(raw: unknown, ctx) {
      const { input, result } = raw as { input: unknown; result: unknown };
      const parsed = await validate(forward.input, input);
      if (!forward.compensate) throw new Error(`${forward.name} has no compensate hook`);
      return forward.compensate(parsed.ok ? parsed.value : input, result, ctx);
    },
    ...(forward.probeCompensation === undefined ? {} : {
      async probe(raw: unknown, ctx: ToolContext) {
        const { input, result } = raw as { input: unknown; result: unknown };
        const parsed = await validate(forward.input, input);
        if (!forward.probeCompensation) throw new Error(`${forward.name} has no probeCompensation hook`);
        return forward.probeCompensation(parsed.ok ? parsed.value : input, result, ctx);
      },
    }),
  };
  hookTools.set(forward, tool);
  return tool;
}
