/**
 * A call record's states and the transitions between them, as data (DESIGN.md §2).
 * Stores write with compare-and-set on a version; the gate asks `assertTransition`
 * before every write so an illegal move names both states instead of corrupting a record.
 */
import { EffectgateError } from "./errors.js";

export const CALL_STATES = [
  "in_progress",
  "completed",
  "failed",
  "uncertain",
  "needs_human",
  "compensated",
  "compensation_failed",
] as const;

export type CallState = (typeof CALL_STATES)[number];

const TRANSITIONS: Readonly<Record<CallState, readonly CallState[]>> = {
  // in_progress → in_progress is a lease take-over or a re-execution with the same key.
  in_progress: ["in_progress", "completed", "failed", "uncertain", "needs_human"],
  uncertain: ["in_progress", "completed", "needs_human", "uncertain"],
  needs_human: ["completed", "failed"],
  completed: ["compensated", "compensation_failed"],
  compensation_failed: ["compensated", "needs_human"],
  failed: [],
  compensated: [],
};

/** States in which a call has a holder working on it (running it, or probing its unknown outcome). */
export const HELD_STATES = ["in_progress", "uncertain"] as const satisfies readonly CallState[];

export function isHeld(state: CallState): state is (typeof HELD_STATES)[number] {
  return state === "in_progress" || state === "uncertain";
}

/** States whose stored result (or error) answers every replay of the call. */
const SETTLED_STATES = ["completed", "failed", "compensated", "compensation_failed"] as const satisfies readonly CallState[];

export function isSettled(state: CallState): state is (typeof SETTLED_STATES)[number] {
  return (SETTLED_STATES as readonly CallState[]).includes(state);
}

/** The states a record may be in for a move to `to`. */
export function allowedFrom(to: CallState): CallState[] {
  return CALL_STATES.filter((from) => TRANSITIONS[from].includes(to));
}

export function canTransition(from: CallState, to: CallState): boolean {
  return TRANSITIONS[from].includes(to);
}

export function assertTransition(key: string, from: CallState, to: CallState): void {
  if (!canTransition(from, to)) {
    throw new EffectgateError(
      "EG_ILLEGAL_TRANSITION",
      `call ${key} cannot move from ${from} to ${to} (allowed from ${from}: ${TRANSITIONS[from].join(", ") || "none"})`,
    );
  }
}

export function isCallState(value: unknown): value is CallState {
  return typeof value === "string" && (CALL_STATES as readonly string[]).includes(value);
}
