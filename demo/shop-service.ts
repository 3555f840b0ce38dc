/**
 * A simulated shop: orders, stock, payments, shipping and mail behind one real HTTP server on
 * 127.0.0.1. Every effect it applies is counted, each has an undo endpoint (except mail, which
 * cannot be unsent), and every POST honours `Idempotency-Key` (a repeated key gets the first
 * answer and applies nothing), so the counts are the ground truth for saga tests and demos.
 *
 *   POST /orders              {customer, sku, qty, amount}  → 201 order {id, status: "open"}
 *   POST /orders/cancel       {order}                       → 200 order {status: "cancelled"}
 *   POST /stock/reserve       {order, sku, qty}             → 201 reservation; 409 when out of stock
 *   POST /stock/release       {reservation}                 → 200 reservation {released: true}
 *   POST /payments/charge     {order, customer, amount}     → 201 payment
 *   POST /payments/refund     {payment}                     → 200 refund
 *   POST /shipments           {order, address}              → 201 shipment
 *   POST /shipments/cancel    {shipment}                    → 200 shipment {cancelled: true}
 *   POST /mail                {to, subject}                 → 201 message (no undo)
 *   GET  /effects?key=K       → {status: "done", result} | {status: "absent"}: what a probe asks
 *   GET  /state               → the whole state (what `snapshot()` returns)
 *
 * Faults are set by the process that started the service (`fail`): the next N requests (or all)
 * to one endpoint answer a status without applying anything (422 = definite refusal, 500 = the
 * caller cannot tell), or apply the effect and then drop the connection (`lose`).
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

export const SHOP_ENDPOINTS = [
  "orders", "orders/cancel", "stock/reserve", "stock/release", "payments/charge", "payments/refund",
  "shipments", "shipments/cancel", "mail",
] as const;
export type ShopEndpoint = (typeof SHOP_ENDPOINTS)[number];

export interface ShopOrder { readonly id: string; readonly customer: string; readonly sku: string; readonly qty: number; readonly amount: number; status: "open" | "cancelled" }
export interface ShopReservation { readonly id: string; readonly order: string; readonly sku: string; readonly qty: number; released: boolean }
export interface ShopPayment { readonly id: string; readonly order: string; readonly customer: string; readonly amount: number; refunded: boolean }
export interface ShopRefund { readonly id: string; readonly payment: string; readonly amount: number }
export interface ShopShipment { readonly id: string; readonly order: string; readonly address: string; cancelled: boolean }
export interface ShopMail { readonly id: string; readonly to: string; readonly subject: string }

/** The state the shop's customers and accountants see. Equal snapshots mean nothing was left behind. */
export interface ShopSnapshot {
  readonly openOrders: readonly string[];
  /** Units available per SKU. */
  readonly stock: Readonly<Record<string, number>>;
  readonly activeReservations: readonly string[];
  /** Charged minus refunded, per customer. */
  readonly balance: Readonly<Record<string, number>>;
  readonly activeShipments: readonly string[];
  readonly mails: readonly ShopMail[];
}

export interface ShopFault {
  /** 422: refused, nothing applied. 500: nothing applied, but the caller cannot know. `lose`: applied, then the connection is cut. */
  readonly kind: 422 | 500 | "lose";
  /** How many requests it hits (default: every one). */
  readonly times?: number;
}

export interface ShopService {
  readonly url: string;
  /** Effects applied per endpoint (a repeated key applies nothing and is not counted). */
  readonly effects: Readonly<Record<ShopEndpoint, number>>;
  /** Requests received per endpoint, repeats and faults included. */
  readonly requests: Readonly<Record<ShopEndpoint, number>>;
  /** Every idempotency key that applied an effect, with its endpoint. */
  readonly applied: ReadonlyMap<string, ShopEndpoint>;
  snapshot(): ShopSnapshot;
  fail(endpoint: ShopEndpoint, fault: ShopFault): void;
  clearFaults(): void;
  close(): Promise<void>;
}

export async function startShopService(options: { stock?: Record<string, number> } = {}): Promise<ShopService> {
  const zero = () => Object.fromEntries(SHOP_ENDPOINTS.map((e) => [e, 0])) as Record<ShopEndpoint, number>;
  const effects = zero();
  const requests = zero();
  const stock: Record<string, number> = { ...(options.stock ?? { "sku-1": 10 }) };
  const orders = new Map<string, ShopOrder>();
  const reservations = new Map<string, ShopReservation>();
  const payments = new Map<string, ShopPayment>();
  const refunds = new Map<string, ShopRefund>();
  const shipments = new Map<string, ShopShipment>();
  const mails: ShopMail[] = [];
  const answers = new Map<string, { status: number; body: unknown; endpoint: ShopEndpoint }>();
  const applied = new Map<string, ShopEndpoint>();
  const faults = new Map<ShopEndpoint, { kind: ShopFault["kind"]; left: number }>();

  class Refused extends Error {
    constructor(readonly status: number, message: string) {
      super(message);
    }
  }
  const need = <T>(value: T | undefined, what: string): T => {
    if (value === undefined) throw new Refused(404, `no such ${what}`);
    return value;
  };
  const str = (body: Record<string, unknown>, field: string): string => {
    const v = body[field];
    if (typeof v !== "string" || v === "") throw new Refused(400, `${field} must be a non-empty string`);
    return v;
  };
  const num = (body: Record<string, unknown>, field: string): number => {
    const v = body[field];
    if (typeof v !== "number" || !(v > 0)) throw new Refused(400, `${field} must be a positive number`);
    return v;
  };

  /** Applies one effect; returns [status, body]. */
  function apply(endpoint: ShopEndpoint, body: Record<string, unknown>): [number, unknown] {
    switch (endpoint) {
      case "orders": {
        const order: ShopOrder = { id: `O-${orders.size + 1}`, customer: str(body, "customer"), sku: str(body, "sku"), qty: num(body, "qty"), amount: num(body, "amount"), status: "open" };
        orders.set(order.id, order);
        return [201, order];
      }
      case "orders/cancel": {
        const order = need(orders.get(str(body, "order")), "order");
        order.status = "cancelled";
        return [200, order];
      }
      case "stock/reserve": {
        const sku = str(body, "sku");
        const qty = num(body, "qty");
        if ((stock[sku] ?? 0) < qty) throw new Refused(409, `only ${stock[sku] ?? 0} of ${sku} left`);
        stock[sku] = (stock[sku] ?? 0) - qty;
        const reservation: ShopReservation = { id: `R-${reservations.size + 1}`, order: str(body, "order"), sku, qty, released: false };
        reservations.set(reservation.id, reservation);
        return [201, reservation];
      }
      case "stock/release": {
        const reservation = need(reservations.get(str(body, "reservation")), "reservation");
        if (!reservation.released) stock[reservation.sku] = (stock[reservation.sku] ?? 0) + reservation.qty;
        reservation.released = true;
        return [200, reservation];
      }
      case "payments/charge": {
        const payment: ShopPayment = { id: `P-${payments.size + 1}`, order: str(body, "order"), customer: str(body, "customer"), amount: num(body, "amount"), refunded: false };
        payments.set(payment.id, payment);
        return [201, payment];
      }
      case "payments/refund": {
        const payment = need(payments.get(str(body, "payment")), "payment");
        if (payment.refunded) throw new Refused(409, `payment ${payment.id} is already refunded`);
        payment.refunded = true;
        const refund: ShopRefund = { id: `RF-${refunds.size + 1}`, payment: payment.id, amount: payment.amount };
        refunds.set(refund.id, refund);
        return [200, refund];
      }
      case "shipments": {
        const shipment: ShopShipment = { id: `S-${shipments.size + 1}`, order: str(body, "order"), address: str(body, "address"), cancelled: false };
        shipments.set(shipment.id, shipment);
        return [201, shipment];
      }
      case "shipments/cancel": {
        const shipment = need(shipments.get(str(body, "shipment")), "shipment");
        shipment.cancelled = true;
        return [200, shipment];
      }
      case "mail": {
        const mail: ShopMail = { id: `M-${mails.length + 1}`, to: str(body, "to"), subject: str(body, "subject") };
        mails.push(mail);
        return [201, mail];
      }
    }
  }

  function snapshot(): ShopSnapshot {
    const balance: Record<string, number> = {};
    for (const p of payments.values()) balance[p.customer] = (balance[p.customer] ?? 0) + (p.refunded ? 0 : p.amount);
    return structuredClone({
      openOrders: [...orders.values()].filter((o) => o.status === "open").map((o) => o.id),
      stock,
      activeReservations: [...reservations.values()].filter((r) => !r.released).map((r) => r.id),
      balance: Object.fromEntries(Object.entries(balance).filter(([, v]) => v !== 0)),
      activeShipments: [...shipments.values()].filter((s) => !s.cancelled).map((s) => s.id),
      mails,
    });
  }

  const send = (res: ServerResponse, status: number, body: unknown) => {
    res.writeHead(status, { "content-type": "application/json" });
    res.end(JSON.stringify(body));
  };

  const server: Server = createServer((req, res) => {
    const url = new URL(req.url ?? "/", "http://127.0.0.1");
    const path = url.pathname.slice(1);
    if (req.method === "GET" && path === "state") return send(res, 200, { ...snapshot(), effects, requests });
    if (req.method === "GET" && path === "effects") {
      const found = answers.get(url.searchParams.get("key") ?? "");
      return send(res, 200, found && found.status < 300 ? { status: "done", result: found.body } : { status: "absent" });
    }
    if (req.method !== "POST" || !(SHOP_ENDPOINTS as readonly string[]).includes(path)) return send(res, 404, { error: "not found" });
    const endpoint = path as ShopEndpoint;
    requests[endpoint]++;
    readJson(req).then((raw) => {
      const header = req.headers["idempotency-key"];
      const key = typeof header === "string" ? header : "";
      if (key === "") return send(res, 400, { error: "Idempotency-Key header required" });
      const earlier = answers.get(key);
      if (earlier) {
        if (earlier.endpoint !== endpoint) return send(res, 422, { error: `key ${key} was used for ${earlier.endpoint}` });
        return send(res, earlier.status, earlier.body);
      }
      const fault = faults.get(endpoint);
      if (fault && fault.left > 0) {
        fault.left--;
        if (fault.kind !== "lose") return send(res, fault.kind, { error: `injected fault on ${endpoint}` });
      }
      let status: number;
      let body: unknown;
      try {
        [status, body] = apply(endpoint, (raw ?? {}) as Record<string, unknown>);
      } catch (err) {
        if (!(err instanceof Refused)) throw err;
        return send(res, err.status, { error: err.message });
      }
      effects[endpoint]++;
      applied.set(key, endpoint);
      answers.set(key, { status, body: structuredClone(body), endpoint });
      if (fault?.kind === "lose") {
        req.socket.destroy();
        return;
      }
      send(res, status, body);
    }).catch(() => send(res, 400, { error: "body must be JSON" }));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    effects,
    requests,
    applied,
    snapshot,
    fail(endpoint, fault) {
      faults.set(endpoint, { kind: fault.kind, left: fault.times ?? Number.POSITIVE_INFINITY });
    },
    clearFaults() {
      faults.clear();
    },
    close: () => new Promise<void>((resolve, reject) => {
      server.closeAllConnections();
      server.close((err) => (err ? reject(err) : resolve()));
    }),
  };
}

async function readJson(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  const text = Buffer.concat(chunks).toString("utf8");
  return text === "" ? {} : JSON.parse(text);
}
