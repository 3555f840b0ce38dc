/**
 * Sagas in `gate.recover()`, which runs this before settling calls:
 * - `compensating` with no live holder (its process died mid-compensation, a pass paused, or an
 *   operator asked for it with `effectgate saga compensate`): the compensation continues where
 *   it stopped, in reverse order; each compensation is a keyed call, so none runs twice.
 * - `running` whose driver died after a step failed (or was refused, or its outcome is unknown):
 *   compensated, as the driver was about to.
 * - `running` whose driver died otherwise: forward steps are NOT continued (only the driver's code knows
 *   what comes next). The saga is marked `stalled` for its driver to resume (open it again and
 *   re-run the same steps: completed ones return their stored results) or for an operator to
 *   roll back; or, if it was started with `onAbandon: "compensate"`, it is compensated.
 *   The call the driver was in the middle of is settled afterwards like any call (probe; at
 *   most one re-run with the same key).
 * - Anything held by a live driver is left alone.
 */
import { messageOf } from "../core/errors.js";
import { compensateSaga, driverGone, isSagaBusy, requestCompensation, type SagaContext, sagaFlight, type SagaRuntime } from "./engine.js";
import type { SagaRecord } from "../contracts/sagas.js";
import type { SagaRecoverySummary } from "./types.js";

export async function recoverSagas(rt: SagaRuntime, options: { limit?: number } = {}): Promise<SagaRecoverySummary> {
  const log = rt.log;
  const counts = { compensated: 0, compensationFailed: 0, stalled: 0, leftForLater: 0 };
  const notes: { tenant: string; id: string; note: string }[] = [];
  if (!log) return { examined: 0, ...counts, notes };
  const note = (saga: SagaRecord, text: string) => {
    counts.leftForLater++;
    notes.push({ tenant: saga.tenant, id: saga.id, note: text });
  };
  const active = await log.listActive({ limit: options.limit ?? 1000 });
  for (const saga of active) {
    if (isSagaBusy(rt, saga.tenant, saga.id)) {
      note(saga, "this gate is working on it right now");
      continue;
    }
    if (!driverGone(rt, saga, await rt.kernel.calls.now())) {
      note(saga, `driven by a live worker (${saga.owner ?? "unknown"})`);
      continue;
    }
    const ctx: SagaContext = {
      rt, log, tenant: saga.tenant, id: saga.id, task: saga.task, scope: { tenant: saga.tenant, task: saga.task },
      approve: undefined, onAbandon: saga.onAbandon, compensationInputs: new Map(),
    };
    try {
      // A driver that died after a step failed had already decided: the saga compensates.
      const broken = saga.state === "running"
        ? (await log.steps(saga.tenant, saga.id)).find((s) => s.state === "failed" || s.state === "refused" || s.state === "unknown")
        : undefined;
      if (broken) {
        await requestCompensation(ctx, `step ${broken.name} ${broken.state} (${broken.error ?? "no reason recorded"}) and its driver ${saga.owner ?? "(none)"} died before compensating`, "driver_died");
      } else if (saga.state === "running" && saga.onAbandon === "hold") {
        const stalled = await log.update(saga.tenant, saga.id, saga.version, {
          state: "stalled", owner: null,
          reason: `its driver ${saga.owner ?? "(none)"} is gone; run the saga's code again to resume it, or roll it back with: effectgate saga compensate ${saga.id} --tenant ${saga.tenant}`,
        }, { kind: "driver_died", message: `driver ${saga.owner ?? "(none)"} is gone; forward steps are not continued by recovery` });
        if (!stalled) {
          note(saga, "another worker moved it meanwhile");
          continue;
        }
        counts.stalled++;
        rt.kernel.alert({
          code: "needs_human",
          message: `saga ${saga.id} stalled: its driver ${saga.owner ?? "(none)"} died mid-way. Resume it by running its code again, or: effectgate saga compensate ${saga.id} --tenant ${saga.tenant}`,
          tenant: saga.tenant, key: `saga:${saga.id}`, tool: "saga",
        });
        continue;
      } else if (saga.state === "running") {
        await requestCompensation(ctx, `its driver ${saga.owner ?? "(none)"} is gone and it was started with onAbandon: "compensate"`, "driver_died");
      }
      const ended = await sagaFlight(rt, saga.tenant, saga.id, () => compensateSaga(ctx));
      if (ended.state === "compensated") counts.compensated++;
      else if (ended.state === "compensation_failed") counts.compensationFailed++;
      else note(ended, `still ${ended.state}: ${ended.reason ?? "no reason recorded"}`);
    } catch (err) {
      note(saga, `could not be recovered: ${messageOf(err)}`);
    }
  }
  return { examined: active.length, ...counts, notes };
}
