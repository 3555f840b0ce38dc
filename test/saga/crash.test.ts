/**
 * Saga crash tests with real processes, a real SQLite file, a real HTTP shop and a real SIGKILL.
 *
 * A child process (fixtures/shop-saga.mjs, built package only) runs the order saga against the
 * shop running here, in the parent, and is SIGKILLed at one point: every step boundary of every
 * forward step (the saga log written, the call claimed, the effect done, the outcome recorded,
 * the step logged), and every point of every compensation after a failure at `ship`. A fresh
 * process then recovers — re-driving the saga (its driver resuming) after a forward kill, or
 * with `gate.recover()` alone after a kill mid-compensation. The shop's own counts are the
 * ground truth: each forward effect and each compensation applied at most once, and the saga
 * ends in a terminal state with the shop as it should be.
 *
 * No sleeps: every step waits for the child's exit. Owner ids name the child's pid, so the fresh
 * process sees at once that the killed driver is dead.
 */
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { beforeAll, describe, expect, it } from "vitest";
import { startShopService, type ShopEndpoint, type ShopService } from "../../demo/shop-service.js";
import type { SagaStatus } from "../../src/saga/types.js";
import type { RecoverySummary } from "../../src/root/create-gate.js";
import { requireBuild, runFixture, type FixtureExit } from "../support/processes.js";
import { tempDir } from "../support/tmp.js";

const fixture = fileURLToPath(new URL("./fixtures/shop-saga.mjs", import.meta.url));
const dir = tempDir("effectgate-saga-crash-");
const scope = { tenant: "acme", task: "checkout-1" };

beforeAll(() => requireBuild());


interface Kill {
  readonly kind: "call" | "saga";
  readonly point: string;
  readonly tool: string;
}

interface Outcome {
  readonly status: SagaStatus | undefined;
  readonly error: string | null;
  readonly summary?: RecoverySummary;
  readonly survived: true;
}

function runChild(job: Record<string, unknown>): Promise<FixtureExit> {
  return runFixture(fixture, job, { cwd: dir, label: `child (${String(job.mode)})` });
}

/** Kills the first child at `kill`, then runs a fresh one in `then` mode; returns the fresh one's outcome. */
async function crashThen(shop: ShopService, name: string, kill: Kill, then: "redrive" | "recover", onAbandon?: "compensate"): Promise<Outcome> {
  const job = { url: shop.url, ledger: join(dir, `${name}.db`), saga: `order-${name}`, scope, ...(onAbandon ? { onAbandon } : {}) };
  const killed = await runChild({ ...job, mode: "run", kill });
  expect(killed.signal, `the child was not killed at ${kill.point} (${kill.tool}); stderr:\n${killed.stderr}\nstdout: ${JSON.stringify(killed.lines)}`).toBe("SIGKILL");
  const fresh = await runChild({ ...job, mode: then });
  expect(fresh, `the fresh process failed; stderr:\n${fresh.stderr}`).toMatchObject({ code: 0, signal: null });
  return fresh.lines.at(-1) as Outcome;
}

const FORWARD: readonly { readonly step: string; readonly tool: string; readonly endpoint: ShopEndpoint }[] = [
  { step: "order", tool: "create_order", endpoint: "orders" },
  { step: "reserve", tool: "reserve_stock", endpoint: "stock/reserve" },
  { step: "charge", tool: "charge_payment", endpoint: "payments/charge" },
  { step: "ship", tool: "create_shipment", endpoint: "shipments" },
  { step: "notify", tool: "send_mail", endpoint: "mail" },
];
const STEP_POINTS: readonly Omit<Kill, "tool">[] = [
  { kind: "saga", point: "saga_before_step" },
  { kind: "call", point: "after_claim" },
  { kind: "call", point: "after_execute" },
  { kind: "call", point: "after_record" },
  { kind: "saga", point: "saga_after_step" },
];
// After ship fails, compensation runs charge → reserve → order (reverse order).
const COMPENSATIONS: readonly { readonly step: string; readonly tool: string; readonly endpoint: ShopEndpoint }[] = [
  { step: "charge", tool: "refund_payment", endpoint: "payments/refund" },
  { step: "reserve", tool: "release_stock", endpoint: "stock/release" },
  { step: "order", tool: "create_order:compensate", endpoint: "orders/cancel" },
];
const COMPENSATION_POINTS: readonly Omit<Kill, "tool">[] = [
  { kind: "saga", point: "saga_before_compensation" },
  { kind: "call", point: "after_claim" },
  { kind: "call", point: "after_execute" },
  { kind: "call", point: "after_record" },
  { kind: "saga", point: "saga_after_compensation" },
];

describe.concurrent("SIGKILL at every forward step boundary, then the driver runs the saga again", { timeout: 90_000 }, () => {
  for (const { step, tool } of FORWARD) {
    for (const at of STEP_POINTS) {
      it(`killed at ${at.point} of ${step} (${tool}): every effect once, the saga completes`, async () => {
        const shop = await startShopService({ stock: { "sku-1": 5 } });
        try {
          const outcome = await crashThen(shop, `fwd-${step}-${at.point}`, { ...at, tool }, "redrive");
          expect(outcome.error).toBeNull();
          expect(outcome.status?.state).toBe("completed");
          expect(outcome.status?.steps.map((s) => s.state)).toEqual(FORWARD.map(() => "completed"));
          for (const f of FORWARD) expect(shop.effects[f.endpoint], `${f.endpoint} applied`).toBe(1);
          expect(shop.effects).toMatchObject({ "orders/cancel": 0, "stock/release": 0, "payments/refund": 0, "shipments/cancel": 0 });
          // recover() did not continue the saga on its own: it only marked it stalled (or found nothing to do).
          expect(outcome.summary?.sagas?.compensated).toBe(0);
        } finally {
          await shop.close();
        }
      });
    }
  }
});

describe.concurrent("SIGKILL in the middle of compensation (ship failed), then gate.recover() in a fresh process", { timeout: 90_000 }, () => {
  const failAtShip = async () => {
    const shop = await startShopService({ stock: { "sku-1": 5 } });
    const before = shop.snapshot();
    shop.fail("shipments", { kind: 422 });
    return { shop, before };
  };

  it("killed right after ship failed was logged (before compensation started): recover() compensates", async () => {
    const { shop, before } = await failAtShip();
    try {
      const outcome = await crashThen(shop, "comp-after-failure", { kind: "saga", point: "saga_after_step", tool: "create_shipment" }, "recover");
      expect(outcome.summary?.sagas).toMatchObject({ compensated: 1 });
      expect(outcome.status?.state).toBe("compensated");
      expect(shop.snapshot()).toEqual(before);
      for (const c of COMPENSATIONS) expect(shop.effects[c.endpoint]).toBe(1);
    } finally {
      await shop.close();
    }
  });

  for (const { step, tool } of COMPENSATIONS) {
    for (const at of COMPENSATION_POINTS) {
      it(`killed at ${at.point} of undoing ${step} (${tool}): each compensation once, the shop as before`, async () => {
        const { shop, before } = await failAtShip();
        try {
          const outcome = await crashThen(shop, `comp-${step}-${at.point}`, { ...at, tool }, "recover");
          expect(outcome.summary?.sagas).toMatchObject({ examined: 1, compensated: 1, compensationFailed: 0 });
          expect(outcome.status?.state).toBe("compensated");
          expect(outcome.status?.steps.map((s) => [s.name, s.state])).toEqual([
            ["order", "compensated"], ["reserve", "compensated"], ["charge", "compensated"], ["ship", "failed"],
          ]);
          expect(shop.snapshot()).toEqual(before);
          for (const c of COMPENSATIONS) expect(shop.effects[c.endpoint], `${c.endpoint} applied`).toBe(1);
          expect(shop.effects).toMatchObject({ "orders": 1, "stock/reserve": 1, "payments/charge": 1, "shipments": 0, "mail": 0 });
        } finally {
          await shop.close();
        }
      });
    }
  }
});

describe.concurrent("SIGKILL mid-step of a saga started with onAbandon: compensate, then gate.recover() alone rolls it back", { timeout: 90_000 }, () => {
  // The interrupted step's outcome is unknown to the saga log: its probe decides (done → undone, absent → skipped), it is never re-run.
  const POINTS: readonly (Omit<Kill, "tool"> & { readonly happened: boolean })[] = [
    { kind: "call", point: "after_claim", happened: false },
    { kind: "call", point: "after_execute", happened: true },
    { kind: "saga", point: "saga_after_step", happened: true },
  ];
  const UNDO: Readonly<Record<string, ShopEndpoint | null>> = {
    order: "orders/cancel", reserve: "stock/release", charge: "payments/refund", ship: "shipments/cancel", notify: null,
  };
  for (const [i, { step, tool }] of FORWARD.entries()) {
    for (const at of POINTS) {
      it(`killed at ${at.point} of ${step} (${tool}): ${at.happened ? "it happened and" : "it never happened;"} everything compensable is undone once`, async () => {
        const shop = await startShopService({ stock: { "sku-1": 5 } });
        try {
          const before = shop.snapshot();
          const outcome = await crashThen(shop, `abandon-${step}-${at.point}`, { ...at, tool }, "recover", "compensate");
          expect(outcome.summary?.sagas).toMatchObject({ examined: 1, compensated: 1 });
          expect(outcome.status?.state).toBe("compensated");
          const last = step === "notify" && at.happened ? "completed" : at.happened ? "compensated" : "skipped";
          expect(outcome.status?.steps.map((s) => s.state)).toEqual([...FORWARD.slice(0, i).map(() => "compensated"), last]);
          const ran = FORWARD.slice(0, at.happened ? i + 1 : i);
          for (const f of FORWARD) expect(shop.effects[f.endpoint], `${f.endpoint} applied`).toBe(ran.includes(f) ? 1 : 0);
          for (const f of FORWARD) {
            const undo = UNDO[f.step];
            if (undo) expect(shop.effects[undo], `${undo} applied`).toBe(ran.includes(f) ? 1 : 0);
          }
          // The shop is as before, except an approved e-mail that was sent: it cannot be unsent, and stays.
          const mails = step === "notify" && at.happened ? [{ id: "M-1", to: "ada@example.com", subject: "order O-1 is on its way (S-1)" }] : [];
          expect(shop.snapshot()).toEqual({ ...before, mails });
        } finally {
          await shop.close();
        }
      });
    }
  }
});
