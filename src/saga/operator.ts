/**
 * What an operator does with a saga, on the ledger alone (no tools needed): ask for its
 * compensation (done by the next `gate.recover()` of a process that has the tools), and
 * settle one that ended `compensation_failed` (the human queue).
 */
import { EffectgateError } from "../core/errors.js";
import { canTransition } from "../core/states.js";
import type { Stores } from "../contracts/stores.js";
import type { SagaLog, SagaRecord } from "../contracts/sagas.js";
import type { SagaStatus } from "./types.js";

export interface SagaResolution {
  /** What the person found or did. Required: a resolution without a reason helps nobody later. */
  readonly note: string;
  /**
   * "undone": the person undid what the compensation could not (the steps become `compensated`,
   * their forward calls too). "kept": the effects stay as they are, knowingly.
   */
  readonly outcome: "undone" | "kept";
  /** Who resolved it (free text). */
  readonly by?: string;
}

function logOf(ledger: Stores): SagaLog {
  if (!ledger.sagas) throw new EffectgateError("EG_LEDGER_UNAVAILABLE", `the ledger ${ledger.location} keeps no saga log`);
  return ledger.sagas;
}

async function mustGet(log: SagaLog, ledger: Stores, tenant: string, id: string): Promise<SagaRecord> {
  const saga = await log.get(tenant, id);
  if (!saga) throw new EffectgateError("EG_INVALID_INPUT", `there is no saga ${JSON.stringify(id)} in tenant ${JSON.stringify(tenant)} of ${ledger.location}`);
  return saga;
}

const statusOf = async (log: SagaLog, saga: SagaRecord): Promise<SagaStatus> => ({ ...saga, steps: await log.steps(saga.tenant, saga.id) });

/**
 * Marks a running, stalled or completed saga `compensating`, released, so the next
 * `gate.recover()` of a process that has its tools rolls it back (a live driver's next step is
 * refused). A saga already compensating is left as it is. Anything else is refused by state.
 */
export async function requestSagaCompensation(ledger: Stores, tenant: string, id: string, note: string, by = "operator"): Promise<SagaStatus> {
  const log = logOf(ledger);
  let saga = await mustGet(log, ledger, tenant, id);
  for (let tries = 0; tries < 20; tries++) {
    if (saga.state === "compensating") return statusOf(log, saga);
    if (saga.state !== "running" && saga.state !== "stalled" && saga.state !== "completed") {
      throw new EffectgateError("EG_ILLEGAL_TRANSITION",
        `saga ${id} is ${saga.state}; only a running, stalled or completed saga can be rolled back${saga.state === "compensation_failed" ? " (settle it with `effectgate saga resolve`)" : ""}`);
    }
    const reason = `rollback requested by ${by}: ${note}`;
    const moved = await log.update(tenant, id, saga.version, { state: "compensating", owner: null, reason },
      { kind: "compensation_requested", message: reason, data: { by, from: saga.state } });
    if (moved) return statusOf(log, moved);
    saga = await mustGet(log, ledger, tenant, id);
  }
  throw new EffectgateError("EG_IN_PROGRESS", `saga ${id} kept changing; try again`);
}

/** Settles a `compensation_failed` saga: records the person's note and moves it to `resolved`. */
export async function resolveSaga(ledger: Stores, tenant: string, id: string, resolution: SagaResolution): Promise<SagaStatus> {
  const log = logOf(ledger);
  if (typeof resolution.note !== "string" || resolution.note.trim() === "") throw new EffectgateError("EG_INVALID_INPUT", "a resolution needs a note saying what was found or done");
  if (resolution.outcome !== "undone" && resolution.outcome !== "kept") throw new EffectgateError("EG_INVALID_INPUT", `outcome must be "undone" or "kept"`);
  const by = resolution.by ?? "operator";
  let saga = await mustGet(log, ledger, tenant, id);
  if (saga.state !== "compensation_failed") {
    throw new EffectgateError("EG_ILLEGAL_TRANSITION", `saga ${id} is ${saga.state}; only a compensation_failed saga is resolved by a person`);
  }
  const open = (await log.steps(tenant, id)).filter((s) => s.state === "compensation_failed" || s.state === "unknown");
  if (resolution.outcome === "undone") {
    for (let step of open) {
      for (let tries = 0; tries < 20 && step.state !== "compensated"; tries++) {
        const moved = await log.updateStep(tenant, id, step.name, step.version, { state: "compensated", error: `undone by hand (${by}): ${resolution.note}` },
          { kind: "step_compensated", step: step.name, message: `undone by hand by ${by}: ${resolution.note}` });
        step = moved ?? (await log.getStep(tenant, id, step.name)) ?? step;
      }
      // The forward call's record says so too (a call whose outcome was unknown stays needs_human: settle it in the ledger).
      for (let tries = 0; tries < 20; tries++) {
        const record = await ledger.calls.get(tenant, step.key);
        if (!record || record.state !== "compensation_failed" || !canTransition(record.state, "compensated")) break;
        if (await ledger.calls.update(tenant, step.key, record.version, { state: "compensated", error: `undone by hand (${by}): ${resolution.note}` })) break;
      }
    }
  }
  const summary = `${resolution.outcome === "undone" ? "undone by hand" : "kept as it is"} by ${by}: ${resolution.note}`;
  for (let tries = 0; tries < 20; tries++) {
    const moved = await log.update(tenant, id, saga.version, { state: "resolved", resolution: summary, owner: null },
      { kind: "resolved", message: summary, data: { by, outcome: resolution.outcome, steps: open.map((s) => s.name) } });
    if (moved) return statusOf(log, moved);
    saga = await mustGet(log, ledger, tenant, id);
    if (saga.state !== "compensation_failed") throw new EffectgateError("EG_ILLEGAL_TRANSITION", `saga ${id} became ${saga.state} meanwhile`);
  }
  throw new EffectgateError("EG_IN_PROGRESS", `saga ${id} kept changing; try again`);
}
