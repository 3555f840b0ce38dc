/**
 * A saga's states and its steps' states, and the moves between them, as data. Every store
 * refuses a move these tables forbid, naming both states (as src/core/states.ts does for calls).
 */
import { EffectgateError } from "../core/errors.js";
import type { SagaState, StepState } from "./sagas.js";

export const SAGA_STATES: readonly SagaState[] = [
  "running", "stalled", "completed", "compensating", "compensated", "compensation_failed", "resolved",
];

export const STEP_STATES: readonly StepState[] = [
  "pending", "completed", "failed", "refused", "unknown", "skipped", "compensating", "compensated", "compensation_failed",
];

const SAGA_MOVES: Readonly<Record<SagaState, readonly SagaState[]>> = {
  // running → running and compensating → compensating: another driver takes the saga over.
  running: ["running", "stalled", "completed", "compensating"],
  stalled: ["running", "compensating"],
  // An operator may roll back a completed saga.
  completed: ["compensating"],
  compensating: ["compensating", "compensated", "compensation_failed"],
  compensation_failed: ["resolved"],
  compensated: [],
  resolved: [],
};

const STEP_MOVES: Readonly<Record<StepState, readonly StepState[]>> = {
  pending: ["completed", "failed", "refused", "unknown", "skipped", "compensating"],
  completed: ["compensating", "compensation_failed"],
  // A person (or a late reply) may still settle an unknown outcome.
  unknown: ["completed", "failed", "skipped", "compensating", "compensated"],
  compensating: ["compensating", "compensated", "compensation_failed"],
  // A person undid it by hand.
  compensation_failed: ["compensated"],
  failed: [],
  refused: [],
  skipped: [],
  compensated: [],
};

export function isSagaState(value: unknown): value is SagaState {
  return typeof value === "string" && (SAGA_STATES as readonly string[]).includes(value);
}

export function isStepState(value: unknown): value is StepState {
  return typeof value === "string" && (STEP_STATES as readonly string[]).includes(value);
}

function canMoveSaga(from: SagaState, to: SagaState): boolean {
  return SAGA_MOVES[from].includes(to);
}

function canMoveStep(from: StepState, to: StepState): boolean {
  return STEP_MOVES[from].includes(to);
}

export function assertSagaMove(id: string, from: SagaState, to: SagaState): void {
  if (!canMoveSaga(from, to)) {
    throw new EffectgateError(
      "EG_ILLEGAL_TRANSITION",
      `saga ${id} cannot move from ${from} to ${to} (allowed from ${from}: ${SAGA_MOVES[from].join(", ") || "none"})`,
    );
  }
}

export function assertStepMove(sagaId: string, name: string, from: StepState, to: StepState): void {
  if (!canMoveStep(from, to)) {
    throw new EffectgateError(
      "EG_ILLEGAL_TRANSITION",
      `step ${name} of saga ${sagaId} cannot move from ${from} to ${to} (allowed from ${from}: ${STEP_MOVES[from].join(", ") || "none"})`,
    );
  }
}
