/**
 * `gate.saga(id, scope)`: a multi-step workflow driven from code.
 *
 *   const saga = gate.saga(`order-${orderId}`, { tenant: "acme", task: orderId });
 *   const order = await saga.step("order", createOrder, { customer, items });
 *   await saga.step("reserve", reserveStock, { order: order.id, sku, qty });
 *   await saga.step("charge", chargeCard, { order: order.id, amount }, {
 *     compensate: { tool: refundPayment, input: (charge) => ({ payment: charge.id }) },
 *   });
 *   await saga.finish();
 *
 * What happens on failure, after a crash, and to non-compensable steps: docs/sagas.md and
 * the `Saga` interface (types.ts).
 */
import type { TimerHandle } from "../core/time.js";
import { EffectgateError } from "../core/errors.js";
import type { Scope } from "../core/keys.js";
import type { AnyTool, Tool } from "../core/tool.js";
import { compensateSaga, holdRunning, openSaga, requestCompensation, runStep, type SagaContext, sagaFlight, sagaLogOf, type SagaRuntime, type StepOutcome } from "./engine.js";
import type { SagaRecord } from "../contracts/sagas.js";
import { SagaError } from "./errors.js";
import { checkName, stepKey } from "./keys.js";
import type { Saga, SagaOptions, SagaStatus, StepOptions } from "./types.js";

export function createSaga(rt: SagaRuntime, id: string, scope: Scope, options: SagaOptions): Saga {
  const bad = checkName("saga id", id);
  if (bad) throw new EffectgateError("EG_INVALID_INPUT", `gate.saga(): ${bad}`);
  const log = sagaLogOf(rt);
  const { saga: _tag, ...callScope } = scope;
  const ctx: SagaContext = {
    rt, log, tenant: scope.tenant, id, task: scope.task, scope: callScope,
    approve: options.approveNonCompensable, onAbandon: options.onAbandon ?? "hold", compensationInputs: new Map(),
  };

  let heartbeat: TimerHandle | undefined;
  const keepAlive = (saga: SagaRecord) => {
    if (saga.state !== "running") return stopHeartbeat();
    if (heartbeat) return;
    // While this handle drives the saga, its lease stays ours even between steps (an agent thinking
    // for minutes), so another host's recovery never takes a live saga for abandoned. It stops when
    // the saga is no longer ours (stalled, rolled back by an operator), ends, or the gate closes.
    heartbeat = rt.kernel.time.interval(Math.max(10, Math.floor(rt.kernel.leaseMs / 3)), () => {
      log.renewLease(ctx.tenant, id, rt.kernel.owner, rt.kernel.leaseMs).then((ours) => ours || stopHeartbeat(), () => undefined);
    });
    heartbeats(rt).add(stopHeartbeat);
  };
  const stopHeartbeat = () => {
    heartbeat?.cancel();
    heartbeat = undefined;
    heartbeats(rt).delete(stopHeartbeat);
  };

  const statusOf = async (saga: SagaRecord): Promise<SagaStatus> => ({ ...saga, steps: await log.steps(ctx.tenant, id) });
  const current = async (): Promise<SagaRecord> => {
    const saga = await log.get(ctx.tenant, id);
    if (!saga) throw new EffectgateError("EG_LEDGER_CORRUPT", `saga ${ctx.tenant}/${id} vanished from ${rt.location}`);
    return saga;
  };

  async function answer(name: string, tool: AnyTool, outcome: StepOutcome): Promise<unknown> {
    switch (outcome.kind) {
      case "completed":
        keepAlive(await current());
        return outcome.result;
      case "failed":
        stopHeartbeat();
        throw new SagaError("EG_SAGA_FAILED", `saga ${id} step ${name} (${tool.name}): ${outcome.reason}. ${ending(outcome.saga)}`, await statusOf(outcome.saga));
      case "closed":
        stopHeartbeat();
        throw new SagaError("EG_SAGA_CLOSED",
          `saga ${id} is ${outcome.saga.state}${outcome.saga.reason ? ` (${outcome.saga.reason})` : ""}, so step ${name} was not run`, await statusOf(outcome.saga));
      case "pending":
        throw new EffectgateError("EG_IN_PROGRESS", `saga ${id} step ${name}: ${outcome.message.replace(/^EG_IN_PROGRESS: /, "")}`);
      case "rejected":
        throw new EffectgateError(outcome.code, `saga ${id} step ${name}: ${outcome.message}`);
    }
  }

  const saga: Saga = {
    id,
    scope: callScope,
    async start() {
      const started = await openSaga(ctx);
      keepAlive(started);
      return statusOf(started);
    },
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    async step(name: string, tool: string | Tool<any, any>, input: unknown, stepOptions: StepOptions<any, any> = {}): Promise<any> {
      const toolName = typeof tool === "string" ? tool : tool.name;
      const registered = rt.kernel.tools.get(toolName);
      if (!registered) {
        throw new EffectgateError("EG_UNKNOWN_TOOL", `saga ${id} step ${name}: there is no tool named ${JSON.stringify(toolName)} in this gate; nothing was executed`);
      }
      const compensate = stepOptions.compensate;
      const outcome = await runStep(ctx, {
        name, tool: registered, input, toolUseId: stepKey(id, name),
        ...(compensate === undefined ? {} : {
          compensateWith: { tool: typeof compensate.tool === "string" ? compensate.tool : compensate.tool.name, input: compensate.input },
        }),
        ...(stepOptions.compensable === undefined ? {} : { compensable: stepOptions.compensable }),
      });
      return answer(name, registered, outcome);
    },
    async finish() {
      let saga = await holdRunning(ctx, await openSaga(ctx));
      for (let tries = 0; tries < 20; tries++) {
        if (saga.state === "completed") break;
        if (saga.state !== "running" && saga.state !== "stalled") {
          stopHeartbeat();
          throw new SagaError("EG_SAGA_CLOSED", `saga ${id} is ${saga.state}${saga.reason ? ` (${saga.reason})` : ""}; it cannot be finished`, await statusOf(saga));
        }
        const steps = await log.steps(ctx.tenant, id);
        const open = steps.filter((s) => s.state === "pending");
        if (open.length > 0) {
          throw new EffectgateError("EG_IN_PROGRESS",
            `saga ${id} cannot finish: the outcome of step ${open.map((s) => s.name).join(", ")} is not known yet; run the step again (same arguments) to settle it`);
        }
        const broken = steps.find((s) => s.state === "failed" || s.state === "refused" || s.state === "unknown");
        if (broken) {
          await requestCompensation(ctx, `step ${broken.name} ${broken.state}: ${broken.error ?? ""}`, "compensation_started");
          const ended = await sagaFlight(rt, ctx.tenant, id, () => compensateSaga(ctx));
          stopHeartbeat();
          throw new SagaError("EG_SAGA_FAILED", `saga ${id} cannot finish: step ${broken.name} ${broken.state}. ${ending(ended)}`, await statusOf(ended));
        }
        const done = await log.update(ctx.tenant, id, saga.version, { state: "completed", owner: null },
          { kind: "saga_completed", message: `finished with ${steps.length} step${steps.length === 1 ? "" : "s"}` });
        if (done) {
          saga = done;
          break;
        }
        saga = await current();
      }
      stopHeartbeat();
      return statusOf(saga);
    },
    async compensate(reason = "rolled back by its driver") {
      await openSaga(ctx);
      await requestCompensation(ctx, reason, "compensation_requested");
      const ended = await sagaFlight(rt, ctx.tenant, id, () => compensateSaga(ctx));
      stopHeartbeat();
      return statusOf(ended);
    },
    async status() {
      const saga = await log.get(ctx.tenant, id);
      return saga && statusOf(saga);
    },
    history: () => log.history(ctx.tenant, id),
  };
  return saga;
}

const running = new WeakMap<SagaRuntime, Set<() => void>>();
const heartbeats = (rt: SagaRuntime): Set<() => void> => {
  let set = running.get(rt);
  if (!set) running.set(rt, (set = new Set()));
  return set;
};

/** Stops the lease heartbeats of this gate's saga handles (the gate is closing: its ledger must not be reopened by them). */
export function stopSagaHeartbeats(rt: SagaRuntime): void {
  for (const stop of [...heartbeats(rt)]) stop();
}

/** One sentence on how a failed saga ended. */
export function ending(saga: SagaRecord): string {
  switch (saga.state) {
    case "compensated":
      return `Saga ${saga.id} was rolled back: its completed steps were undone in reverse order (non-compensable ones that were approved stay).`;
    case "compensation_failed":
      return `Saga ${saga.id} could not be fully rolled back (${saga.reason ?? "a compensation failed"}); a person has been asked to settle it (effectgate saga show ${saga.id}).`;
    case "compensating":
      return `Saga ${saga.id} is being rolled back (${saga.reason ?? "in progress"}); gate.recover() finishes it.`;
    default:
      return `Saga ${saga.id} is ${saga.state}.`;
  }
}
