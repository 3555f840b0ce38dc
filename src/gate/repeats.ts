/**
 * Intent windows (core/repeats.ts): a write or destructive call whose input matches an earlier call
 * of its task under another key. The check runs after the kill switch and the grant (a call that
 * may not run is refused as such) and before the rest of governance (no quota charged, no approval
 * asked for a call that will be refused) and again inside the claim (CallStore.claimUnlessRepeated),
 * so two such calls racing from two processes never both run. A decision that answers the call
 * for good (collapsed onto a completed call, or refused) is recorded under the call's own key
 * (CallStore.claimAnswered): every replay of that id gets the same answer, however late it comes.
 */
import { errorMessage } from "../core/errors.js";
import { errorResult, renderResult, resultBlock, type ToolResultBlock } from "../core/blocks.js";
import { collapsedPreamble, intentOf, repeatPolicyOf, type RepeatAction } from "../core/repeats.js";
import { ledgerIdentity } from "../core/tool.js";
import type { Answer, CallRecord, CallStore, ClaimRequest, ClaimResult, RepeatQuery, Repeated } from "../contracts/calls.js";
import { executeHeld, NEVER_STARTED } from "./execute.js";
import type { GovernedCall, Governor } from "./governor.js";
import { noteApproval, type Call, type Runtime } from "./runtime.js";

/** The call store's three repeat methods, or undefined when it lacks any of them. */
export interface RepeatMethods {
  find(query: RepeatQuery): Promise<CallRecord | undefined>;
  claim(request: ClaimRequest, windowMs: number): Promise<ClaimResult | Repeated>;
  answer(request: ClaimRequest, answer: Answer): Promise<ClaimResult>;
}

// Bound once per store, not on every call that asks (the pipeline asks for every write of a tool with a policy).
const bound = new WeakMap<CallStore, RepeatMethods | null>();

export function repeatMethods(calls: CallStore): RepeatMethods | undefined {
  let methods = bound.get(calls);
  if (methods === undefined) {
    methods = calls.findRepeat && calls.claimUnlessRepeated && calls.claimAnswered
      ? { find: calls.findRepeat.bind(calls), claim: calls.claimUnlessRepeated.bind(calls), answer: calls.claimAnswered.bind(calls) }
      : null;
    bound.set(calls, methods);
  }
  return methods ?? undefined;
}

export interface RepeatableCall {
  readonly request: ClaimRequest;
  readonly policy: { readonly action: RepeatAction; readonly windowMs: number };
  readonly store: RepeatMethods;
  /** The call as governance sees it (undefined in a gate without governance). */
  readonly governed: GovernedCall | undefined;
  /** Makes a claim write, remembering a lost reply (pipeline.ts). */
  claimed<T>(write: () => Promise<T>): Promise<T>;
  /** Answers a call whose key the ledger knows (pipeline.ts). */
  answerExisting(record: CallRecord): Promise<ToolResultBlock>;
}

/** Governs, claims and runs a call whose tool has a `repeats` policy, unless it repeats an earlier one. */
export async function runUnlessRepeated(rt: Runtime, call: Call, c: RepeatableCall): Promise<ToolResultBlock> {
  const { request, policy, store } = c;
  // A replay of this very id is answered from its own record, never judged as a repeat again.
  const known = await rt.calls.get(request.tenant, request.key);
  if (known) return c.answerExisting(known);
  if (rt.governor?.screen && c.governed) {
    const screened = await rt.governor.screen(c.governed);
    if (!screened.ok) return resultBlock(call.toolUseId, screened.message, true);
  }
  let earlier = await store.find({ tenant: request.tenant, task: request.task, intent: request.intent ?? request.fingerprint, key: request.key, windowMs: policy.windowMs });
  for (;;) {
    if (earlier && policy.action !== "approve") return answerRepeat(rt, call, c, earlier, policy.action);
    const reasons = await approvalReasons(earlier, rt.governor, c.governed);
    if (reasons && !(rt.governor && c.governed)) {
      return errorResult(call.toolUseId, "EG_BAD_POLICY", `${call.tool.name} repeats an earlier call and its repeats policy asks a person to approve it, but this gate has no governance. Nothing was executed.`);
    }
    if (rt.governor && c.governed) {
      const admitted = await rt.governor.admit(reasons ? { ...c.governed, approvalReasons: reasons } : c.governed);
      noteApproval(call, admitted);
      if (!admitted.ok) return resultBlock(call.toolUseId, admitted.message, true);
    }
    const confirmedAt = rt.time.monotonic();
    // Approved by a person as a repeat: it runs as approved. Otherwise the claim checks for a repeat again, atomically.
    const claim: ClaimResult | Repeated = reasons
      ? await c.claimed(() => rt.calls.claim(request))
      : await c.claimed(() => store.claim(request, policy.windowMs));
    if (claim.claimed) return executeHeld(rt, call, claim.record, confirmedAt, NEVER_STARTED);
    if (!("repeats" in claim)) return c.answerExisting(claim.record);
    // Another call with this input was claimed between the look and the claim: judge this one against it.
    earlier = claim.repeats;
  }
}

/**
 * Why a person is asked to approve a call of a tool whose policy is `approve`: it repeats `earlier`,
 * or it was sent to a person as a repeat before (that request still decides, though the earlier
 * call has left the window since). Undefined when it repeats nothing.
 */
async function approvalReasons(earlier: CallRecord | undefined, governor: Governor | undefined, governed: GovernedCall | undefined): Promise<string[] | undefined> {
  if (earlier) return [`it repeats ${describe(earlier)}`];
  if (governed && (await governor?.hasApprovalRequest?.(governed)) === true) {
    return ["it repeated an earlier call of this task with the same input when it was first made"];
  }
  return undefined;
}

/**
 * What the repeats policy makes of a call the ledger does not know yet, before it runs, for an SDK's
 * approval surface (gate.approvalFor): `answered` when running it answers without running the tool
 * (collapse or refuse onto an earlier call: nobody needs asking), `ask` with the reasons a person is
 * given (approve), `none` when the call repeats nothing (or its tool has no policy).
 */
export type RepeatJudgement =
  | { readonly kind: "none" }
  | { readonly kind: "answered" }
  | { readonly kind: "ask"; readonly reasons: readonly string[] };

export async function judgeRepeat(calls: CallStore, governor: Governor | undefined, governed: GovernedCall): Promise<RepeatJudgement> {
  const policy = repeatPolicyOf(governed.tool);
  const store = policy && repeatMethods(calls);
  if (!policy || !store) return { kind: "none" };
  const intent = intentOf(ledgerIdentity(governed.tool), governed.input);
  const earlier = await store.find({ tenant: governed.scope.tenant, task: governed.scope.task, intent, key: governed.key, windowMs: policy.windowMs });
  if (earlier && policy.action !== "approve") return { kind: "answered" };
  const reasons = policy.action === "approve" ? await approvalReasons(earlier, governor, governed) : undefined;
  return reasons ? { kind: "ask", reasons } : { kind: "none" };
}

/** Collapse onto, or refuse because of, the earlier call; recorded for good once the earlier call completed. */
async function answerRepeat(rt: Runtime, call: Call, c: RepeatableCall, earlier: CallRecord, action: "collapse" | "refuse"): Promise<ToolResultBlock> {
  const tool = call.tool.name;
  if (earlier.state !== "completed") {
    // Its outcome is not settled: nothing is recorded, and this same call is judged again when it is repeated.
    return errorResult(call.toolUseId, "EG_REPEATED_CALL",
      `this ${tool} call repeats ${describe(earlier)}. It was not executed: running it as well could make the effect twice. ` +
        "Do not call it again under a new id; repeat this same call later: once the earlier call is settled this one is answered " +
        `(${action === "collapse" ? "with its result" : "as a repeat"} if it completed; run, if it failed).`);
  }
  const answer: Answer = action === "collapse"
    ? { state: "completed", result: earlier.result, error: null }
    : {
      state: "failed", result: null,
      error: errorMessage("EG_REPEATED_CALL",
        `this ${tool} call repeats ${describe(earlier)}. It was not executed again: the effect already happened once. ` +
          "Tell the user it is done; do not call it again under a new id. A second, separate one needs the user to ask for it and input that tells it apart."),
    };
  const written = await c.store.answer(c.request, answer);
  // The key was recorded meanwhile (a twin of this very id): its record answers.
  if (!written.claimed) return c.answerExisting(written.record);
  if (action === "refuse") return resultBlock(call.toolUseId, answer.error ?? "", true);
  rt.stats.replayed++;
  const said = `this ${tool} call repeats call ${earlier.toolUseId} (same input, completed ${at(earlier.updatedAt)}); it was not executed again`;
  if (call.note) {
    call.note.replayed = true;
    call.note.state = "completed";
    call.note.collapsed = said;
    call.note.recorded = written.record;
  }
  return resultBlock(call.toolUseId, collapsedPreamble(said) + renderResult(earlier.result), false);
}

/** "call toolu_1 of this task (same input, key …), which completed at …": what the model and the approver are told. */
function describe(earlier: CallRecord): string {
  const where = `call ${earlier.toolUseId} of this task (same input, key ${earlier.key}), which`;
  switch (earlier.state) {
    case "completed":
      return `${where} completed at ${at(earlier.updatedAt)} with the result ${clip(renderResult(earlier.result))}`;
    case "in_progress":
      return `${where} is still running (since ${at(earlier.createdAt)})`;
    case "uncertain":
      return `${where} is being checked: its outcome is not known yet`;
    case "needs_human":
      return `${where} waits for a person to say whether it happened`;
    default:
      return `${where} is ${earlier.state}`;
  }
}

const at = (ms: number) => new Date(ms).toISOString();
const clip = (text: string) => (text.length > 300 ? `${text.slice(0, 300)}…` : text);
