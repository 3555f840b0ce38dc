/**
 * The order workflow (order → reserve stock → charge → ship → notify) as a saga against the
 * simulated shop, a real HTTP service on 127.0.0.1 that counts every effect, with a real SQLite
 * ledger. A failure is injected at each step in turn: afterwards the shop's state equals its
 * state before the saga for every compensable effect, and the e-mail (non-compensable) is
 * either approved and sent, or absent.
 */
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { createGate, type Gate } from "../../src/root/create-gate.js";
import { sqliteLedger } from "../../src/stores/sqlite/index.js";
import { startShopService, type ShopEndpoint, type ShopService } from "../../demo/shop-service.js";
import { placeOrder, shopTools, type OrderRequest } from "../../demo/shop-tools.js";
import type { Alert } from "../../src/gate/alerts.js";
import type { SagaOptions } from "../../src/saga/types.js";
import { tempDir } from "../support/tmp.js";

const dir = tempDir("effectgate-shop-");
const scope = { tenant: "acme", task: "checkout-1" };
const request: OrderRequest = { customer: "cus_1", sku: "sku-1", qty: 2, amount: 40, address: "1 Main St", email: "ada@example.com" };

let n = 0;
const open: { gate: Gate; shop: ShopService }[] = [];
afterEach(async () => {
  for (const { gate, shop } of open.splice(0)) {
    await gate.close();
    await shop.close();
  }
});

async function setup(options: { approve?: boolean } = {}) {
  const shop = await startShopService({ stock: { "sku-1": 5 } });
  const alerts: Alert[] = [];
  const gate = createGate({
    tools: Object.values(shopTools(shop.url)),
    ledger: sqliteLedger(join(dir, `shop-${n++}.db`), { durability: "process" }),
    probe: { attempts: 2, initialDelayMs: 1, maxDelayMs: 2 },
    retry: { write: { initialDelayMs: 1, maxDelayMs: 2 } },
    onAlert: (a) => alerts.push(a),
    ...(options.approve === undefined ? {} : { approveNonCompensable: () => options.approve === true }),
  });
  open.push({ gate, shop });
  return { shop, gate, alerts, tools: shopTools(shop.url), before: shop.snapshot() };
}

const run = (s: Awaited<ReturnType<typeof setup>>, options: SagaOptions = {}, id = "order-1") => placeOrder(s.gate, s.tools, id, scope, request, options);

const STEPS: readonly { readonly step: string; readonly endpoint: ShopEndpoint }[] = [
  { step: "order", endpoint: "orders" },
  { step: "reserve", endpoint: "stock/reserve" },
  { step: "charge", endpoint: "payments/charge" },
  { step: "ship", endpoint: "shipments" },
  { step: "notify", endpoint: "mail" },
];

describe("the order saga against the shop", () => {
  it("runs to completion with the e-mail approved: every effect once", async () => {
    const s = await setup({ approve: true });
    const { status, error } = await run(s);
    expect(error).toBeUndefined();
    expect(status.state).toBe("completed");
    expect(s.shop.effects).toMatchObject({ "orders": 1, "stock/reserve": 1, "payments/charge": 1, "shipments": 1, "mail": 1 });
    expect(s.shop.snapshot()).toEqual({
      openOrders: ["O-1"], stock: { "sku-1": 3 }, activeReservations: ["R-1"], balance: { cus_1: 40 }, activeShipments: ["S-1"],
      mails: [{ id: "M-1", to: "ada@example.com", subject: "order O-1 is on its way (S-1)" }],
    });
  });

  for (const [i, { step, endpoint }] of STEPS.entries()) {
    it(`a refusal at step ${i + 1} (${step}) leaves the shop as it was, each compensation applied once, no e-mail`, async () => {
      const s = await setup({ approve: true });
      s.shop.fail(endpoint, { kind: 422 });
      const { status, error } = await run(s);
      expect(error).toMatch(new RegExp(`EG_SAGA_FAILED: saga order-1 step ${step} .*injected fault`));
      expect(status.state).toBe("compensated");
      expect(status.steps.map((x) => x.name)).toEqual(STEPS.slice(0, i + 1).map((x) => x.step));
      expect(status.steps.map((x) => x.state)).toEqual([...Array.from({ length: i }, () => "compensated"), "failed"]);
      expect(s.shop.snapshot()).toEqual(s.before);
      const undo = { "orders/cancel": i > 0 ? 1 : 0, "stock/release": i > 1 ? 1 : 0, "payments/refund": i > 2 ? 1 : 0, "shipments/cancel": i > 3 ? 1 : 0 };
      expect(s.shop.effects).toMatchObject({ ...undo, mail: 0 });
      // Each forward call that completed is marked compensated in the ledger, next to its compensation's record.
      for (const done of STEPS.slice(0, i)) {
        expect(await s.gate.ledger.calls.get("acme", `saga:order-1:${done.step}`)).toMatchObject({ state: "compensated" });
        expect(await s.gate.ledger.calls.get("acme", `saga:order-1:${done.step}:compensate`)).toMatchObject({ state: "completed", attempts: 1 });
      }
    });
  }

  it("the e-mail not approved: it is never sent and everything before it is undone", async () => {
    const s = await setup({ approve: false });
    const { status, error } = await run(s);
    expect(error).toMatch(/step notify .*send_mail is marked compensable: false; approveNonCompensable refused it/);
    expect(status.state).toBe("compensated");
    expect(status.steps.at(-1)).toMatchObject({ name: "notify", state: "refused", approval: "refused" });
    expect(s.shop.requests.mail).toBe(0);
    expect(s.shop.snapshot()).toEqual(s.before);
  });

  it("replies lost on the wire at every step: probes find the effects, nothing is applied twice", async () => {
    const s = await setup({ approve: true });
    for (const { endpoint } of STEPS) s.shop.fail(endpoint, { kind: "lose", times: 1 });
    const { status } = await run(s);
    expect(status.state).toBe("completed");
    expect(s.shop.effects).toMatchObject({ "orders": 1, "stock/reserve": 1, "payments/charge": 1, "shipments": 1, "mail": 1 });
  });

  it("a compensation whose reply is lost, or that fails once with 500, is settled by its probe and applied once", async () => {
    const s = await setup({ approve: true });
    s.shop.fail("shipments", { kind: 422 });
    s.shop.fail("payments/refund", { kind: "lose", times: 1 });
    s.shop.fail("stock/release", { kind: 500, times: 1 });
    s.shop.fail("orders/cancel", { kind: "lose", times: 1 });
    const { status } = await run(s);
    expect(status.state).toBe("compensated");
    expect(s.shop.snapshot()).toEqual(s.before);
    expect(s.shop.effects).toMatchObject({ "payments/refund": 1, "stock/release": 1, "orders/cancel": 1 });
    expect(s.shop.requests).toMatchObject({ "payments/refund": 1, "stock/release": 2, "orders/cancel": 1 });
  });

  it("rolling back a completed saga undoes everything but the approved e-mail, which is kept", async () => {
    const s = await setup({ approve: true });
    await run(s);
    const status = await s.gate.saga("order-1", scope).compensate("customer returned the order");
    expect(status.state).toBe("compensated");
    expect(status.steps.map((x) => x.state)).toEqual(["compensated", "compensated", "compensated", "compensated", "completed"]);
    expect(s.shop.snapshot()).toEqual({ ...s.before, mails: [{ id: "M-1", to: "ada@example.com", subject: "order O-1 is on its way (S-1)" }] });
  });

  it("a refund the shop refuses: the saga ends compensation_failed, the rest is undone, a person is alerted", async () => {
    const s = await setup({ approve: true });
    s.shop.fail("shipments", { kind: 422 });
    s.shop.fail("payments/refund", { kind: 422 });
    const { status } = await run(s);
    expect(status.state).toBe("compensation_failed");
    expect(status.steps.map((x) => [x.name, x.state])).toEqual([
      ["order", "compensated"], ["reserve", "compensated"], ["charge", "compensation_failed"], ["ship", "failed"],
    ]);
    expect(s.shop.snapshot()).toEqual({ ...s.before, balance: { cus_1: 40 } });
    expect(await s.gate.ledger.calls.get("acme", "saga:order-1:charge")).toMatchObject({ state: "compensation_failed" });
    expect(s.alerts.filter((a) => a.code === "needs_human").map((a) => a.key)).toEqual(["saga:order-1:charge", "saga:order-1"]);
  });

  it("two orders out of stock: the second saga fails at reserve and leaves nothing behind", async () => {
    const s = await setup({ approve: true });
    await placeOrder(s.gate, s.tools, "order-a", scope, { ...request, qty: 4 });
    const after = s.shop.snapshot();
    const { status } = await placeOrder(s.gate, s.tools, "order-b", { ...scope, task: "checkout-2" }, { ...request, qty: 4 });
    expect(status.state).toBe("compensated");
    expect(s.shop.snapshot()).toEqual(after);
  });
});
