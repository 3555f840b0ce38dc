/**
 * `humanInTheLoopMiddleware` (langchain 1.x) on effectgate's durable, digest-bound approvals.
 *
 * LangChain's own middleware asks in `afterModel`: it interrupts once with a `HITLRequest`
 * (`actionRequests`, `reviewConfigs`) for the model's calls that need review, and takes the
 * resume `{ decisions: [{ type: "approve" | "edit" | "reject" }] }`. Its decision lives only in
 * the graph's resume value: nothing records who decided, another process cannot decide, and a
 * tool run later (a retry, a re-planned call) is not checked against it.
 *
 * This middleware keeps LangChain's shapes (the same interrupt and resume, so a UI written for
 * it works) and puts effectgate behind them:
 * - which calls pause is effectgate's approval policy; each has a durable request (filed with
 *   its dry run), named in the interrupt (`approvalId`), so a person can decide from
 *   `effectgate approvals approve ID` in another process and the graph is resumed with any value;
 * - a decision the resume carries is recorded in effectgate's store as that reviewer's
 *   (`{ decisions, by: "alice" }`): approve approves, reject denies (its message is the note),
 *   edit denies the original and approves the edited call, bound to its new input;
 * - the gate has the last word: the tools run through effectgate (effectgateMiddleware or
 *   langchainTool), which releases a call only for the exact input approved, once. A rejected
 *   call stays in the AI message and the gate answers it EG_APPROVAL_DENIED with the reviewer's
 *   message (LangChain's own middleware drops the approved calls of a batch with a rejection;
 *   here they run).
 *
 * The list of calls under review is every call of the AI message the policy puts before a person
 * (decided ones included), so a resume's decisions map onto the same calls even when some were
 * decided elsewhere meanwhile; a decision for a call already decided leaves that decision as it is.
 */
import type { Json } from "../../core/json.js";
import type { Scope } from "../../core/keys.js";
import { EffectgateError } from "../../core/errors.js";
import type { ApprovalRecord } from "../../contracts/governance.js";
import type { ApprovalStatus } from "../../governance/govern.js";
import { decideCall } from "../../governance/operator.js";
import type { Gate } from "../../root/create-gate.js";
import type { ToolCall } from "../../root/tool-calls.js";
import type { EffectgateMiddlewareOptions } from "./middleware.js";

export type HitlDecisionType = "approve" | "edit" | "reject";

/** A person's decision on one action, as LangChain's HITLResponse gives it. */
export type HitlDecision =
  | { readonly type: "approve" }
  | { readonly type: "edit"; readonly editedAction: { readonly name: string; readonly args: Record<string, unknown> } }
  | { readonly type: "reject"; readonly message?: string };

/** The resume value: LangChain's HITLResponse, with who decided. */
export interface HitlResponse {
  readonly decisions: readonly HitlDecision[];
  /** Who decided (recorded with the decision); default: the `reviewer` option. */
  readonly by?: string;
}

/** One action under review: LangChain's ActionRequest, with effectgate's request. */
export interface HitlActionRequest {
  readonly name: string;
  readonly args: Record<string, unknown>;
  readonly description: string;
  /** effectgate's durable request: `effectgate approvals approve ID`. */
  readonly approvalId: string;
  readonly callId: string;
  /** Where the request stands: `pending`, or already decided (`approved`, `denied`…). */
  readonly state: string;
  readonly reasons: readonly string[];
  readonly preview: Json | null;
}

/** What the graph's interrupt carries: LangChain's HITLRequest. */
export interface HitlRequest {
  readonly actionRequests: readonly HitlActionRequest[];
  readonly reviewConfigs: readonly { readonly actionName: string; readonly allowedDecisions: readonly HitlDecisionType[]; readonly argsSchema?: Record<string, unknown> }[];
}

/** Per tool, as humanInTheLoopMiddleware's `interruptOn` (which calls pause is effectgate's policy, not this). */
export type ReviewConfig = true | {
  readonly allowedDecisions?: readonly HitlDecisionType[];
  readonly description?: string | ((toolCall: LangChainToolCall) => string | Promise<string>);
  readonly argsSchema?: Record<string, unknown>;
};

export interface HumanInTheLoopOptions {
  readonly scope: EffectgateMiddlewareOptions["scope"];
  /** Per tool: the decisions allowed (default all three) and the description shown. Every name must be a gate tool. */
  readonly interruptOn?: Readonly<Record<string, ReviewConfig>>;
  /** The start of each default description (default "Tool execution requires approval", as LangChain's). */
  readonly descriptionPrefix?: string;
  /** Who decided, for a resume that does not say (`by`). Default "langchain-hitl". */
  readonly reviewer?: string;
  /**
   * Record the decisions a resume carries (default true). `false`: only decisions made in
   * effectgate count (CLI, console, the gate's approver); leave it so where whoever resumes the
   * graph is not trusted to approve. The graph then pauses again until the request is decided.
   */
  readonly acceptDecisions?: boolean;
}

export interface LangChainToolCall {
  readonly id?: string | undefined;
  readonly name: string;
  readonly args: Record<string, unknown>;
  readonly type?: "tool_call";
}

interface AiMessageLike {
  getType(): string;
  tool_calls?: LangChainToolCall[];
}

/** The parts of createMiddleware's config this middleware uses. */
export interface AfterModelKit {
  readonly interrupt: (value: unknown) => unknown;
  readonly createMiddleware: (config: {
    name: string;
    afterModel: (state: { messages: unknown[] }, runtime: unknown) => Promise<{ messages: unknown[] } | undefined>;
  }) => unknown;
}

const ALL_DECISIONS: readonly HitlDecisionType[] = ["approve", "edit", "reject"];
/** States of a request the policy asked for: the call is under review (pending) or was reviewed. */
const REVIEWED = new Set(["none", "pending", "approved", "denied", "expired"]);
const waiting = (status: ApprovalStatus) => status.state === "none" || status.state === "pending";

interface Entry {
  readonly call: ToolCall;
  readonly toolCall: LangChainToolCall;
  readonly status: Extract<ApprovalStatus, { id: string }>;
}

const editNote = (edited: { name: string; args: unknown }, by: string) => `edited by ${by}: replaced by ${edited.name} ${JSON.stringify(edited.args)}`;

/** The edit an edit note records (editNote, by the request's decider), or undefined for any other denial. */
function editIn(record: ApprovalRecord): { name: string; args: Record<string, unknown> } | undefined {
  if (record.state !== "denied" || record.decidedBy === null || record.note === null) return undefined;
  const prefix = `edited by ${record.decidedBy}: replaced by `;
  if (!record.note.startsWith(prefix)) return undefined;
  const rest = record.note.slice(prefix.length);
  // The name, a space, the args as JSON: the first split whose tail is a JSON object (a name may hold a space).
  for (let at = rest.indexOf(" "); at > 0; at = rest.indexOf(" ", at + 1)) {
    const args = parseObject(rest.slice(at + 1));
    if (args) return { name: rest.slice(0, at), args };
  }
  return undefined;
}

function parseObject(text: string): Record<string, unknown> | undefined {
  try {
    const value: unknown = JSON.parse(text);
    return typeof value === "object" && value !== null && !Array.isArray(value) ? value as Record<string, unknown> : undefined;
  } catch {
    return undefined;
  }
}

const isAiMessage = (m: unknown): m is AiMessageLike =>
  typeof m === "object" && m !== null && typeof (m as AiMessageLike).getType === "function" && (m as AiMessageLike).getType() === "ai";

function isResponse(value: unknown): value is HitlResponse {
  return typeof value === "object" && value !== null && Array.isArray((value as HitlResponse).decisions);
}

export function humanInTheLoopWith(kit: AfterModelKit, gate: Gate, options: HumanInTheLoopOptions): unknown {
  for (const name of Object.keys(options.interruptOn ?? {})) {
    if (!gate.tools.has(name)) {
      throw new EffectgateError("EG_BAD_OPTION", `interruptOn names ${JSON.stringify(name)}, which is not a gate tool (its tools: ${[...gate.tools.keys()].join(", ")}); ` +
        "which calls pause is the gate's approval policy, so list only gate tools here");
    }
  }
  const configOf = (name: string) => {
    const given = options.interruptOn?.[name];
    return given === undefined || given === true ? {} : given;
  };

  async function describe(entry: Entry): Promise<string> {
    const { description } = configOf(entry.call.name);
    if (typeof description === "function") return description(entry.toolCall);
    if (description !== undefined) return description;
    const reasons = "record" in entry.status ? entry.status.record.reasons : entry.status.reasons;
    return `${options.descriptionPrefix ?? "Tool execution requires approval"}\n\nTool: ${entry.call.name}\nArgs: ${JSON.stringify(entry.call.input, null, 2)}\n` +
      `Why: ${reasons.join("; ")}\nOr decide elsewhere: effectgate approvals approve ${entry.status.id}`;
  }

  async function requestOf(entries: readonly Entry[]): Promise<HitlRequest> {
    const actionRequests: HitlActionRequest[] = [];
    for (const e of entries) {
      const record = "record" in e.status ? e.status.record : undefined;
      actionRequests.push({
        name: e.call.name, args: e.toolCall.args, description: await describe(e), approvalId: e.status.id, callId: e.call.id,
        state: e.status.state, reasons: record?.reasons ?? ("reasons" in e.status ? e.status.reasons : []), preview: (record?.preview as Json | undefined) ?? null,
      });
    }
    const reviewConfigs = entries.map((e) => {
      const c = configOf(e.call.name);
      return { actionName: e.call.name, allowedDecisions: c.allowedDecisions ?? ALL_DECISIONS, ...(c.argsSchema ? { argsSchema: c.argsSchema } : {}) };
    });
    return { actionRequests, reviewConfigs };
  }

  /** Records one decision on a call still waiting (an edit: the original denied with the edit in its note, the edited call approved). */
  async function record(entry: Entry, decision: HitlDecision, by: string, scope: Scope): Promise<void> {
    const allowed = configOf(entry.call.name).allowedDecisions ?? ALL_DECISIONS;
    if (!allowed.includes(decision.type)) {
      throw new EffectgateError("EG_BAD_OPTION", `the decision ${JSON.stringify(decision.type)} is not allowed for ${entry.call.name} (allowed: ${allowed.join(", ")})`);
    }
    if (decision.type === "approve") {
      await decideCall(gate.ledger, entry.status.id, { approve: true, by });
      return;
    }
    if (decision.type === "reject") {
      await decideCall(gate.ledger, entry.status.id, { approve: false, by, ...(decision.message === undefined ? {} : { note: decision.message }) });
      return;
    }
    const edited = decision.editedAction;
    if (typeof edited?.name !== "string" || typeof edited.args !== "object" || edited.args === null) {
      throw new EffectgateError("EG_BAD_OPTION", `an edit of ${entry.call.name} needs editedAction: { name: string, args: object }`);
    }
    const denied = await decideCall(gate.ledger, entry.status.id, { approve: false, by, note: editNote(edited, by) });
    if (denied.ok) await approveEdited({ id: entry.call.id, name: edited.name, args: edited.args }, by, scope);
  }

  /** The reviewer approved the edited call: its own request, bound to its new input (filed now; not needed if no rule asks). */
  async function approveEdited(edited: { id: string; name: string; args: Record<string, unknown> }, by: string, scope: Scope): Promise<void> {
    if (!gate.tools.has(edited.name)) return;
    const status = await gate.approvalFor({ id: edited.id, name: edited.name, input: edited.args }, scope);
    if (status.state === "pending") await decideCall(gate.ledger, status.id, { approve: true, by, note: "edited" });
  }

  /**
   * The edited call that replaces this one, as the store holds it: whichever run recorded the edit (this one, a run
   * delivered the same resume, or one that died after storing it), the next run sends the same edited call on. An
   * edit's second write (approving the edited call) is made again here, for a run that died between the two.
   */
  async function editFromStore(entry: Entry, scope: Scope): Promise<LangChainToolCall | undefined> {
    if (!("record" in entry.status)) return undefined;
    const edited = editIn(entry.status.record);
    if (!edited) return undefined;
    await approveEdited({ id: entry.call.id, ...edited }, entry.status.record.decidedBy ?? "", scope);
    return { type: "tool_call", id: entry.call.id, name: edited.name, args: edited.args };
  }

  async function underReview(message: AiMessageLike, scope: Scope, file: boolean): Promise<Entry[]> {
    const entries: Entry[] = [];
    for (const toolCall of message.tool_calls ?? []) {
      if (!gate.tools.has(toolCall.name) || typeof toolCall.id !== "string" || toolCall.id === "") continue;
      const call = { id: toolCall.id, name: toolCall.name, input: toolCall.args };
      const status = await gate.approvalFor(call, scope, { file });
      if (REVIEWED.has(status.state) && "id" in status) entries.push({ call, toolCall, status });
    }
    return entries;
  }

  return kit.createMiddleware({
    name: "EffectgateHumanInTheLoop",
    async afterModel(state, runtime) {
      const last = [...state.messages].reverse().find(isAiMessage);
      if (!last?.tool_calls?.length) return undefined;
      const scope = await options.scope(runtime as Parameters<EffectgateMiddlewareOptions["scope"]>[0]);
      let entries = await underReview(last, scope, true);
      // Each pass: pause while any request waits; a resume records its decisions, then the store is asked again. A graph
      // resumed re-runs this hook: each interrupt() returns its resume value again and recording it again changes nothing.
      while (entries.some((e) => waiting(e.status))) {
        const resumed = kit.interrupt(await requestOf(entries));
        if (options.acceptDecisions !== false && isResponse(resumed)) {
          if (resumed.decisions.length !== entries.length) {
            throw new EffectgateError("EG_BAD_OPTION", `the resume has ${resumed.decisions.length} decisions for ${entries.length} actions under review (one per actionRequest, in order)`);
          }
          const by = typeof resumed.by === "string" && resumed.by !== "" ? resumed.by : options.reviewer ?? "langchain-hitl";
          // A call decided elsewhere (the CLI, the console, an earlier delivery of this resume) keeps that decision.
          for (const [i, entry] of entries.entries()) if (waiting(entry.status)) await record(entry, resumed.decisions[i]!, by, scope);
        }
        entries = await underReview(last, scope, false);
      }
      // Every call is decided: the edits are read back from the store, never from what this run happened to record.
      const revised = new Map<string, LangChainToolCall>();
      for (const entry of entries) {
        const replaced = await editFromStore(entry, scope);
        if (replaced) revised.set(entry.call.id, replaced);
      }
      if (revised.size === 0) return undefined;
      // As LangChain's middleware does: the AI message keeps its id, with the edited calls in place.
      last.tool_calls = last.tool_calls.map((c) => (c.id !== undefined && revised.get(c.id)) || c);
      return { messages: [last] };
    },
  });
}
