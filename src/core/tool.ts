/**
 * A tool is declared once with its effect class; the class decides retries, recovery
 * and (later) approvals. `defineTool` checks the definition up front so a mistake is
 * found when the program starts, not when the agent first calls the tool.
 */
import { EffectgateError } from "./errors.js";
import { EFFECT_CLASSES, type EffectClass } from "./effect-class.js";
import type { Scope } from "./keys.js";
import type { StandardSchemaV1 } from "./standard-schema.js";
import type { ProbePolicy, RetryPolicy } from "./policies.js";
import type { DownstreamRecord, DryRunPreview, FieldDifference, LookupContext, LookupWindow, ProbeResult, RecordedCall } from "./hooks.js";
import { sandboxProblem, type SandboxSpec } from "./sandbox-spec.js";
import { repeatsProblem, type RepeatPolicy } from "./repeats.js";

/** What a tool receives besides its input. */
export interface ToolContext {
  /** Forward this downstream (e.g. as an `Idempotency-Key` header): it is the same on every retry of this call. */
  readonly idempotencyKey: string;
  readonly toolUseId: string;
  readonly scope: Scope;
  /**
   * The fencing token of this run: strictly higher for every worker that takes the call over.
   * Send it beside the key (header `Effectgate-Fence`, FENCE_HEADER) so a downstream that keeps
   * the highest fence per key can refuse a worker that lost its lease (docs/guarantees.md).
   */
  readonly fence: number;
  /**
   * Aborted when the gate gives up on the call: its timeout (a ToolTimeout), its lease lost to
   * another worker or not renewed in time (a LeaseLost), or the gate closing. Pass it to fetch.
   */
  readonly signal: AbortSignal;
  /** 1 on the first execution; higher when a probe said "absent" and the call runs again with the same key. */
  readonly attempt: number;
}

/** How a call's idempotency key is chosen. */
export type KeyStrategy<I> =
  /** The model's tool_use id: stable across replays of the same call (the default). */
  | "tool_use_id"
  /** tenant + task + tool name + hash of the input: twins emitted under two ids collapse into one effect. */
  | "derived"
  | ((input: I, call: { toolUseId: string; scope: Scope }) => string);

export interface ToolSpec<S extends StandardSchemaV1, R> {
  /** The name the model calls (Anthropic rule: 1–64 of `[a-zA-Z0-9_-]`). */
  readonly name: string;
  /**
   * The system behind the tool, where tools of one name stand in front of different systems on one
   * ledger (an MCP gateway's upstream): part of each call's fingerprint and intent (`ledgerIdentity`),
   * so two such tools' calls are never one call, one repeat of the other, or each other's answer.
   * The model, the policy and every message still use `name`. Default: none.
   */
  readonly namespace?: string;
  readonly description?: string;
  /** Required, no default: the gate cannot guess whether a tool charges a card. */
  readonly effect: EffectClass;
  /** Any Standard Schema (zod 4, valibot, arktype…). Input that fails it never executes. */
  readonly input: S;
  // The hooks are methods, not function properties: methods compare bivariantly, so a tool of
  // any input and result type can be handed to createGate as a Tool<any, any>.
  execute(input: StandardSchemaV1.InferOutput<S>, ctx: ToolContext): R | Promise<R>;
  /** Asked, with the same key, when a call's outcome is unknown (crash, lost reply). */
  probe?(input: StandardSchemaV1.InferOutput<S>, ctx: ToolContext): Promise<ProbeResult<R>>;
  /**
   * Undoes a completed call (used by sagas, docs/sagas.md): run as its own gated call keyed
   * `saga:<id>:<step>:compensate`, so forward `ctx.idempotencyKey` downstream. `input` is the input
   * as stored in the ledger (redacted fields read "[redacted]"), `result` the stored result.
   */
  compensate?(input: StandardSchemaV1.InferOutput<S>, result: R, ctx: ToolContext): Promise<unknown>;
  /**
   * "Did this compensation happen?", asked with the compensation's key when its outcome is
   * unknown (a crash or timeout mid-compensation). Without it such a compensation goes to a person.
   */
  probeCompensation?(input: StandardSchemaV1.InferOutput<S>, result: R, ctx: ToolContext): Promise<ProbeResult<unknown>>;
  /**
   * Sagas: undo a completed call with another tool of the gate (a refund for a charge), called with
   * `input(input, result)`. Preferred over the `compensate` hook; a saga step's own `compensate`
   * option overrides it. Kept with the tool, so recovery in any process that has the tools can run it.
   */
  readonly compensateWith?: { readonly tool: string; input(input: StandardSchemaV1.InferOutput<S>, result: R): unknown };
  /**
   * `false`: this tool's effect cannot be undone (an e-mail sent, a contract signed). In a saga
   * such a step runs only once approved (`approveNonCompensable`), and is kept when the saga
   * compensates. Default: compensable when a compensation exists.
   */
  readonly compensable?: boolean;
  /**
   * Computes what the call would do, committing nothing: `{ effect: "would_delete", would_affect:
   * { account: "acc_1" }, reversible: false }`. Required for destructive tools; its preview goes
   * into the approval request. Runs in the gate's process (never sandboxed); `ctx.attempt` is 0.
   */
  dryRun?(input: StandardSchemaV1.InferOutput<S>, ctx: ToolContext): DryRunPreview | Promise<DryRunPreview>;
  /** Run `execute` in a child process under Node's permission model (see SandboxSpec and docs/governance.md). */
  readonly sandbox?: SandboxSpec;
  /**
   * Reconciliation: the downstream system's own records of this tool's effects made in `window`
   * (its clock), each with the idempotency key it was made with. Must read the system of
   * record, not a cache. See docs/reconciliation.md.
   */
  lookup?(window: LookupWindow, ctx: LookupContext): Promise<Iterable<DownstreamRecord> | AsyncIterable<DownstreamRecord>> | AsyncIterable<DownstreamRecord>;
  /**
   * Dot paths compared between a completed call and its downstream record: the ledger's value is
   * the stored result's field at that path, or the stored input's when the result has none; the
   * downstream's is `fields` at that path. Compared as canonical JSON.
   */
  readonly reconcileFields?: readonly string[];
  /** A comparison of your own (tolerances, unit conversions), run after `reconcileFields`: return the fields that differ. */
  compareDownstream?(recorded: RecordedCall, downstream: DownstreamRecord): readonly FieldDifference[];
  /** Dot paths of input fields (e.g. `card.number`) stored as "[redacted]" in the ledger. */
  readonly redact?: readonly string[];
  /** After this long the call's outcome is "unknown" (not failed) and the probe is asked. Default: the gate's. */
  readonly timeoutMs?: number;
  /**
   * The downstream applies a repeated request with the same idempotency key once (as Stripe
   * does). Only then are write calls with an unknown outcome re-sent at once, without a probe.
   */
  readonly downstreamIdempotent?: boolean;
  /**
   * The settle horizon: how long a request this tool sent may take to land downstream (the
   * downstream's own timeout, plus the network). After an unknown outcome (a timeout, a lost reply,
   * a crash) the probe's "absent" means only "not yet" until this long after the send; only an
   * "absent" after it lets the call run again, once, with the same key. Without it a tool whose
   * downstream does not honour keys is never re-sent automatically: the call goes to a person.
   */
  readonly settleMs?: number;
  /**
   * Intent window: what to do with a call of the same task with the same input under a NEW id (the
   * model re-planning the same payment after a timeout) while an earlier one is unsettled or
   * completed within `windowMs`: "collapse" (answer with its result), "refuse" (say it already
   * happened) or "approve" (a person decides). Default: "refuse" for destructive tools, none for
   * writes; `false` turns it off. See docs/guarantees.md "The same effect under a new id".
   */
  readonly repeats?: RepeatPolicy | false;
  /** Overrides the retry policy of the tool's effect class. */
  readonly retry?: Partial<RetryPolicy>;
  /** Overrides the gate's probe budget. */
  readonly probeBudget?: Partial<ProbePolicy>;
  readonly key?: KeyStrategy<StandardSchemaV1.InferOutput<S>>;
}

/** A defined tool. The type parameters are erased inside the gate, which treats every tool alike. */
export interface Tool<S extends StandardSchemaV1 = StandardSchemaV1, R = unknown> extends ToolSpec<S, R> {
  readonly key: KeyStrategy<StandardSchemaV1.InferOutput<S>>;
  readonly redact: readonly string[];
}

// The gate's view of a tool: input and result types erased.
export type AnyTool = Tool<StandardSchemaV1, unknown>;

const TOOL_NAME = /^[a-zA-Z0-9_-]{1,64}$/;

export function defineTool<S extends StandardSchemaV1, R>(spec: ToolSpec<S, R>): Tool<S, R> {
  const where = `tool ${JSON.stringify(spec?.name)}`;
  const bad = (what: string): never => {
    throw new EffectgateError("EG_BAD_TOOL_DEFINITION", `${where}: ${what}`);
  };
  if (typeof spec !== "object" || spec === null) bad("defineTool needs an object");
  if (typeof spec.name !== "string" || !TOOL_NAME.test(spec.name)) bad("name must be 1–64 characters of a-z A-Z 0-9 _ -");
  if (!EFFECT_CLASSES.includes(spec.effect)) bad(`effect must be one of ${EFFECT_CLASSES.join(", ")} (there is no default)`);
  if (typeof spec.input !== "object" || spec.input === null || !("~standard" in spec.input)) {
    bad("input must be a Standard Schema such as a zod object (z.object({...}))");
  }
  if (typeof spec.execute !== "function") bad("execute must be a function");
  if (spec.namespace !== undefined && (typeof spec.namespace !== "string" || spec.namespace === "")) bad("namespace must be a non-empty string when given");
  for (const hook of ["probe", "compensate", "probeCompensation", "dryRun", "lookup", "compareDownstream"] as const) {
    if (spec[hook] !== undefined && typeof spec[hook] !== "function") bad(`${hook} must be a function when given`);
  }
  const key = spec.key ?? "tool_use_id";
  if (key !== "tool_use_id" && key !== "derived" && typeof key !== "function") {
    bad('key must be "tool_use_id", "derived" or a function (input, call) => string');
  }
  if (spec.timeoutMs !== undefined && !(spec.timeoutMs > 0)) bad("timeoutMs must be a positive number of milliseconds");
  if (spec.settleMs !== undefined && !(typeof spec.settleMs === "number" && spec.settleMs >= 0 && Number.isFinite(spec.settleMs))) {
    bad("settleMs must be a number of milliseconds, 0 or more: how long a request sent to the downstream may take to land");
  }
  if (spec.retry?.attempts !== undefined && !(Number.isInteger(spec.retry.attempts) && spec.retry.attempts >= 1)) {
    bad("retry.attempts must be a whole number ≥ 1 (1 = no retry)");
  }
  if (spec.effect === "destructive" && (spec.retry?.attempts ?? 1) > 1) bad("destructive tools are never retried automatically; remove retry.attempts");
  if (spec.effect === "destructive" && typeof spec.dryRun !== "function") {
    bad("destructive tools must implement dryRun(input) returning { effect: \"would_…\", would_affect: {...}, reversible }: its preview is what the approver sees");
  }
  if (spec.sandbox !== undefined) {
    const problem = sandboxProblem(spec.sandbox);
    if (problem) bad(problem);
  }
  const repeats = repeatsProblem(spec.effect, spec.repeats);
  if (repeats) bad(repeats);
  if (spec.compensable !== undefined && typeof spec.compensable !== "boolean") bad("compensable must be true or false when given");
  if (spec.compensable === false && (spec.compensate !== undefined || spec.compensateWith !== undefined)) bad("compensable: false contradicts its compensation; remove one");
  if (spec.compensateWith !== undefined && (typeof spec.compensateWith !== "object" || spec.compensateWith === null ||
    typeof spec.compensateWith.tool !== "string" || spec.compensateWith.tool === "" || typeof spec.compensateWith.input !== "function")) {
    bad("compensateWith must be { tool: \"<tool name>\", input: (input, result) => ({...}) }");
  }
  if (spec.reconcileFields !== undefined && (!Array.isArray(spec.reconcileFields) || spec.reconcileFields.some((p) => typeof p !== "string" || p === ""))) {
    bad("reconcileFields must be a list of dot paths");
  }
  const redact = spec.redact ?? [];
  if (!Array.isArray(redact) || redact.some((p) => typeof p !== "string" || p === "")) bad("redact must be a list of dot paths");
  return Object.freeze({ ...spec, key, redact: [...redact] });
}

/**
 * What a call's fingerprint and intent name its tool by: the name, behind its namespace when it has
 * one. A name never holds "/", so `ns/name` is never another tool's plain name.
 */
export function ledgerIdentity(tool: { readonly name: string; readonly namespace?: string | undefined }): string {
  return tool.namespace === undefined ? tool.name : `${tool.namespace}/${tool.name}`;
}

/** A copy of `input` with each dot path replaced by "[redacted]", and whether any path matched. */
export function redactInput(input: unknown, paths: readonly string[]): { value: unknown; redacted: boolean } {
  if (paths.length === 0) return { value: input, redacted: false };
  const copy: unknown = structuredClone(input);
  let redacted = false;
  for (const path of paths) {
    const parts = path.split(".");
    let node: unknown = copy;
    for (let i = 0; i < parts.length; i++) {
      if (typeof node !== "object" || node === null) break;
      const part = parts[i] as string;
      const holder = node as Record<string, unknown>;
      if (!(part in holder)) break;
      if (i === parts.length - 1) {
        holder[part] = "[redacted]";
        redacted = true;
      } else {
        node = holder[part];
      }
    }
  }
  return { value: copy, redacted };
}
