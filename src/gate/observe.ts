/**
 * The gate's observer interface: what metrics, tracing and logging integrations see of each
 * call, without the gate knowing any of them (effectgate/prometheus and effectgate/otel are
 * built on it). A gate without observers runs exactly as before: no note is made, no hook called.
 *
 * What an observer gets is about the call, never its input or result: the tool, its effect
 * class, how the call was answered (outcome), the record's state, the approval it waits for and
 * the error code. The idempotency key is given for observers to digest, never to print.
 */
import { errorCodeOf, type ToolResultBlock } from "../core/blocks.js";
import type { EffectClass } from "../core/effect-class.js";
import type { CallState } from "../core/states.js";
import type { CallRecord } from "../contracts/calls.js";
import type { Alert } from "./alerts.js";

/**
 * How a call was answered:
 * - `executed`: the tool ran for it (a first run, or a re-run after its probe said "absent");
 * - `replayed`: answered from the ledger's stored outcome, nothing ran;
 * - `probed`: a lost outcome was found by asking the tool's probe, nothing ran;
 * - `refused`: stopped before anything ran (bad input, unknown tool, kill switch, grant, quota,
 *   breaker, a denied or expired approval, a key mismatch);
 * - `waiting`: not answered yet (awaiting approval, held by another worker, being checked, or
 *   handed to a person): the agent repeats the same call later.
 */
export type CallOutcome = "executed" | "replayed" | "probed" | "refused" | "waiting";

/** What a probe answered when the gate asked it. */
export type ProbeOutcome = "done" | "absent" | "running" | "not_yet" | "unknown";

export interface ObservedCall {
  readonly tool: string;
  /** undefined for a tool the gate does not know. */
  readonly effect: EffectClass | undefined;
  readonly toolUseId: string;
  readonly tenant: string;
  readonly task: string;
  readonly agent: string | undefined;
}

export interface ObservedOutcome {
  readonly outcome: CallOutcome;
  /** The call's idempotency key (undefined for reads and calls refused before a key was made). Digest it; never log it raw. */
  readonly key: string | undefined;
  /** The record's state as far as this answer tells (undefined when it does not). */
  readonly state: CallState | undefined;
  /**
   * The approval request the call waits for, was refused under (denied, expired), or was admitted
   * under (consumed for it): as governance named it, never read out of the answer's text.
   */
  readonly approvalId: string | undefined;
  /** The `EG_…` code of an error answer (a failed tool's is EG_TOOL_FAILED). */
  readonly errorType: string | undefined;
  readonly isError: boolean;
  /** What its probe answered, in order, when the gate asked it during this call. */
  readonly probes: readonly ProbeOutcome[];
  readonly durationMs: number;
}

/** What an observer keeps for one call: told how it ended; optionally runs the call inside its own context (a span). */
export interface CallObservation {
  end(outcome: ObservedOutcome): void;
  within?<T>(work: () => Promise<T>): Promise<T>;
}

export interface GateObserver {
  /** A call entered the pipeline. Must not throw (a throwing observer is ignored, never the call's problem). */
  callStarted?(call: ObservedCall): CallObservation | undefined;
  /** An operator alert was raised. */
  alert?(alert: Alert): void;
}

/** What the pipeline notes about one call while it runs (only when the gate has observers). */
export class CallNote {
  executed = false;
  replayed = false;
  probed = false;
  key: string | undefined;
  state: CallState | undefined;
  /** Set by the pipeline from governance's admission (gate/governor.ts `Admission`). */
  approvalId: string | undefined;
  /** Set when the repeats policy answered the call with an earlier call's result: what the model is told about it. */
  collapsed: string | undefined;
  /**
   * The completed record that answered the call, when the pipeline had it in hand (a first run's
   * written outcome, a replay's record, a collapse's own record): what runTool returns as the
   * value, with no read of the ledger after the call.
   */
  recorded: CallRecord | undefined;
  readonly probes: ProbeOutcome[] = [];
}

const WAITING = new Set(["EG_AWAITING_APPROVAL", "EG_IN_PROGRESS", "EG_NEEDS_HUMAN"]);

function stateOf(note: CallNote, outcome: CallOutcome, errorType: string | undefined): CallState | undefined {
  if (note.state !== undefined) return note.state;
  if (errorType === "EG_NEEDS_HUMAN") return "needs_human";
  if (outcome !== "executed" && outcome !== "probed") return undefined;
  if (errorType === undefined) return "completed";
  if (errorType === "EG_TOOL_FAILED") return "failed";
  return errorType === "EG_IN_PROGRESS" ? "uncertain" : undefined;
}

/** How the call was answered, from what the pipeline noted and the answer's code. */
export function outcomeOf(note: CallNote, block: ToolResultBlock, durationMs: number): ObservedOutcome {
  const errorType = block.is_error ? (errorCodeOf(block) ?? "EG_TOOL_FAILED") : undefined;
  const outcome: CallOutcome = note.probed ? "probed"
    : note.executed ? "executed"
    : note.replayed ? "replayed"
    : errorType !== undefined && WAITING.has(errorType) ? "waiting"
    : "refused";
  return { outcome, key: note.key, state: stateOf(note, outcome, errorType), approvalId: note.approvalId, errorType, isError: block.is_error, probes: note.probes, durationMs };
}
