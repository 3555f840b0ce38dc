/**
 * A simulated payments service with seeded faults: a real HTTP server on 127.0.0.1 that
 * honours Idempotency-Key through effectgate's own middleware and counts every charge it
 * actually applies. That count is the ground truth.
 *
 *   POST /charges  {customer, amount} + Idempotency-Key → 201 {id, customer, amount}
 *   GET  /charges?key=K → {status: "done", charge} | {status: "running"} | {status: "absent"}
 *
 * Faults, decided per (key, nth request for that key) from the seed, so the same seed gives
 * the same faults whatever the arrival order:
 *   drop    — the connection is cut before the request is processed (nothing applied);
 *   lost    — the charge is applied and its response stored, then the socket is destroyed;
 *   slow    — the charge takes `slowMs` (longer than the client's timeout), then applies;
 *   latency — a short delay.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { messageOf } from "../core/errors.js";
import type { Ledger } from "../ledger/contract.js";
import { memoryLedger } from "../ledger/memory.js";
import { idempotencyMiddleware } from "../server/index.js";
import { uniformFor } from "./random.js";

export interface Charge {
  readonly id: string;
  readonly customer: string;
  readonly amount: number;
  readonly key: string;
}

export interface FaultMix {
  readonly drop: number;
  readonly lost: number;
  readonly slow: number;
  readonly latency: number;
}

export interface PaymentServiceOptions {
  readonly seed: number;
  readonly faults?: Partial<FaultMix>;
  readonly slowMs?: number;
  readonly latencyMs?: number;
  /** Where the middleware keeps keys (default: memory). */
  readonly ledger?: Ledger;
}

export interface PaymentService {
  readonly url: string;
  /** Every charge applied, in order. */
  readonly charges: readonly Charge[];
  /** Faults injected, by kind. */
  readonly injected: Readonly<Record<keyof FaultMix, number>>;
  close(): Promise<void>;
}

type Fault = keyof FaultMix | "none";

export async function startPaymentService(options: PaymentServiceOptions): Promise<PaymentService> {
  const mix: FaultMix = { drop: 0, lost: 0, slow: 0, latency: 0, ...options.faults };
  const slowMs = options.slowMs ?? 150;
  const latencyMs = options.latencyMs ?? 3;
  const charges: Charge[] = [];
  const running = new Set<string>();
  const requestsPerKey = new Map<string, number>();
  const injected = { drop: 0, lost: 0, slow: 0, latency: 0 };
  const idempotency = idempotencyMiddleware({ ledger: options.ledger ?? memoryLedger() });
  const timers = new Set<NodeJS.Timeout>();
  const wait = (ms: number) => new Promise<void>((resolve) => {
    const t = setTimeout(() => (timers.delete(t), resolve()), ms);
    timers.add(t);
  });

  const pickFault = (key: string): Fault => {
    const nth = (requestsPerKey.get(key) ?? 0) + 1;
    requestsPerKey.set(key, nth);
    let u = uniformFor(options.seed, key, nth);
    for (const kind of ["drop", "lost", "slow", "latency"] as const) {
      if (u < mix[kind]) return kind;
      u -= mix[kind];
    }
    return "none";
  };

  const send = (res: ServerResponse, status: number, body: unknown) => {
    res.writeHead(status, { "content-type": "application/json" });
    res.end(JSON.stringify(body));
  };

  async function charge(req: IncomingMessage & { body?: unknown }, res: ServerResponse, key: string, fault: Fault) {
    const { customer, amount } = (req.body ?? {}) as { customer?: unknown; amount?: unknown };
    if (typeof customer !== "string" || typeof amount !== "number" || !(amount > 0)) {
      return send(res, 400, { error: "customer (string) and amount (> 0) are required" });
    }
    running.add(key);
    try {
      if (fault === "slow") await wait(slowMs);
      if (fault === "latency") await wait(latencyMs);
      const applied: Charge = { id: `ch_${charges.length + 1}`, customer, amount, key };
      charges.push(applied);
      send(res, 201, applied);
    } finally {
      running.delete(key);
    }
  }

  const server: Server = createServer((req, res) => {
    const url = new URL(req.url ?? "/", "http://127.0.0.1");
    if (url.pathname !== "/charges") return send(res, 404, { error: "not found" });
    if (req.method === "GET") {
      const key = url.searchParams.get("key") ?? "";
      const found = charges.find((c) => c.key === key);
      if (found) return send(res, 200, { status: "done", charge: found });
      return send(res, 200, { status: running.has(key) ? "running" : "absent" });
    }
    const header = req.headers["idempotency-key"];
    const key = typeof header === "string" ? header : "";
    const fault = req.method === "POST" && key !== "" ? pickFault(key) : "none";
    if (fault !== "none") injected[fault]++;
    if (fault === "drop") {
      req.socket.destroy();
      return;
    }
    if (fault === "lost") {
      // The response is produced and stored by the middleware, then lost on the wire.
      res.end = (() => {
        req.socket.destroy();
        return res;
      }) as typeof res.end;
    }
    void idempotency(req, res, (err?: unknown) => {
      if (err) return send(res, 500, { error: messageOf(err) });
      charge(req, res, key, fault).catch((e: unknown) => send(res, 500, { error: messageOf(e) }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    charges,
    injected,
    close: () => new Promise<void>((resolve, reject) => {
      for (const t of timers) clearTimeout(t);
      server.closeAllConnections();
      server.close((err) => (err ? reject(err) : resolve()));
    }),
  };
}
