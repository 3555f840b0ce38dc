/**
 * Tools for the simulated shop (shop-service.ts), and the order workflow as a saga:
 *
 *   order (create_order; undone by its compensate hook: cancel)
 *   → reserve (reserve_stock; undone by the release_stock tool: compensateWith)
 *   → charge (charge_payment; undone by the refund_payment tool: compensateWith)
 *   → ship (create_shipment; undone by its compensate hook: cancel)
 *   → notify (send_mail; compensable: false, so it needs approval)
 *
 * Every tool forwards `ctx.idempotencyKey` and has a probe that asks the shop by key, so a
 * call (or compensation) interrupted at any point is settled from what the shop did.
 */
import { z } from "zod";
import { defineTool, EffectgateError, type Gate, type ProbeResult, type SagaOptions, type SagaStatus, type Scope, type ToolContext } from "effectgate";
import type { ShopMail, ShopOrder, ShopPayment, ShopRefund, ShopReservation, ShopShipment } from "./shop-service.js";

async function post<T>(base: string, path: string, body: unknown, ctx: Pick<ToolContext, "idempotencyKey" | "signal">): Promise<T> {
  const res = await fetch(`${base}/${path}`, {
    method: "POST",
    headers: { "content-type": "application/json", "idempotency-key": ctx.idempotencyKey },
    body: JSON.stringify(body),
    signal: ctx.signal,
  });
  const text = await res.text();
  // 4xx: the shop refused, nothing happened. 5xx: it may or may not have (classifyError decides).
  if (!res.ok) throw Object.assign(new Error(`shop ${path} answered ${res.status}: ${text}`), { status: res.status });
  return JSON.parse(text) as T;
}

async function lookup<T>(base: string, key: string): Promise<ProbeResult<T>> {
  const res = await fetch(`${base}/effects?key=${encodeURIComponent(key)}`);
  if (!res.ok) throw new Error(`shop lookup answered ${res.status}`);
  const found = (await res.json()) as { status: "done"; result: T } | { status: "absent" };
  return found.status === "done" ? { status: "done", result: found.result } : { status: "absent" };
}

/** The shop is local and answers at once: a request lands within 300 ms or never (room for a loaded machine). */
const SHOP_SETTLE_MS = 300;

export function shopTools(base: string) {
  const probe = <T>() => ({
    settleMs: SHOP_SETTLE_MS,
    probe: (_input: unknown, ctx: ToolContext) => lookup<T>(base, ctx.idempotencyKey),
  });
  const createOrder = defineTool({
    name: "create_order", effect: "write", description: "Open an order.",
    input: z.object({ customer: z.string(), sku: z.string(), qty: z.number().int().positive(), amount: z.number().positive() }),
    execute: (input, ctx) => post<ShopOrder>(base, "orders", input, ctx),
    ...probe<ShopOrder>(),
    compensate: (_input, order, ctx) => post<ShopOrder>(base, "orders/cancel", { order: order.id }, ctx),
    probeCompensation: (_input, _order, ctx) => lookup(base, ctx.idempotencyKey),
  });
  const reserveStock = defineTool({
    name: "reserve_stock", effect: "write", description: "Reserve stock for an order.",
    input: z.object({ order: z.string(), sku: z.string(), qty: z.number().int().positive() }),
    execute: (input, ctx) => post<ShopReservation>(base, "stock/reserve", input, ctx),
    ...probe<ShopReservation>(),
    compensateWith: { tool: "release_stock", input: (_input, reservation) => ({ reservation: reservation.id }) },
  });
  const releaseStock = defineTool({
    name: "release_stock", effect: "write", description: "Release a stock reservation.",
    input: z.object({ reservation: z.string() }),
    execute: (input, ctx) => post<ShopReservation>(base, "stock/release", input, ctx),
    ...probe<ShopReservation>(),
  });
  const chargePayment = defineTool({
    name: "charge_payment", effect: "write", description: "Charge the customer for an order.",
    input: z.object({ order: z.string(), customer: z.string(), amount: z.number().positive() }),
    execute: (input, ctx) => post<ShopPayment>(base, "payments/charge", input, ctx),
    ...probe<ShopPayment>(),
    compensateWith: { tool: "refund_payment", input: (_input, payment) => ({ payment: payment.id }) },
  });
  const refundPayment = defineTool({
    name: "refund_payment", effect: "write", description: "Refund a payment.",
    input: z.object({ payment: z.string() }),
    execute: (input, ctx) => post<ShopRefund>(base, "payments/refund", input, ctx),
    ...probe<ShopRefund>(),
  });
  const createShipment = defineTool({
    name: "create_shipment", effect: "write", description: "Ship an order.",
    input: z.object({ order: z.string(), address: z.string() }),
    execute: (input, ctx) => post<ShopShipment>(base, "shipments", input, ctx),
    ...probe<ShopShipment>(),
    compensate: (_input, shipment, ctx) => post<ShopShipment>(base, "shipments/cancel", { shipment: shipment.id }, ctx),
    probeCompensation: (_input, _shipment, ctx) => lookup(base, ctx.idempotencyKey),
  });
  const sendMail = defineTool({
    name: "send_mail", effect: "write", description: "E-mail the customer. Cannot be unsent.", compensable: false,
    input: z.object({ to: z.string(), subject: z.string() }),
    execute: (input, ctx) => post<ShopMail>(base, "mail", input, ctx),
    ...probe<ShopMail>(),
  });
  return { createOrder, reserveStock, releaseStock, chargePayment, refundPayment, createShipment, sendMail };
}

export type ShopTools = ReturnType<typeof shopTools>;

export interface OrderRequest {
  readonly customer: string;
  readonly sku: string;
  readonly qty: number;
  readonly amount: number;
  readonly address: string;
  readonly email: string;
}

/** The order workflow as a saga. Resolves with how the saga ended (a failed saga is not thrown: its status says it). */
export async function placeOrder(
  gate: Gate, tools: ShopTools, sagaId: string, scope: Scope, req: OrderRequest, options: SagaOptions = {},
): Promise<{ readonly status: SagaStatus; readonly error?: string }> {
  const saga = gate.saga(sagaId, scope, options);
  try {
    const order = await saga.step("order", tools.createOrder, { customer: req.customer, sku: req.sku, qty: req.qty, amount: req.amount });
    await saga.step("reserve", tools.reserveStock, { order: order.id, sku: req.sku, qty: req.qty });
    await saga.step("charge", tools.chargePayment, { order: order.id, customer: req.customer, amount: req.amount });
    const shipment = await saga.step("ship", tools.createShipment, { order: order.id, address: req.address });
    await saga.step("notify", tools.sendMail, { to: req.email, subject: `order ${order.id} is on its way (${shipment.id})` });
    return { status: await saga.finish() };
  } catch (err) {
    const status = (err as { status?: SagaStatus }).status;
    if (err instanceof EffectgateError && status !== undefined) return { status, error: err.message };
    throw err;
  }
}
