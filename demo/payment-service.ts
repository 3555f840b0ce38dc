/**
 * A simulated payments service with seeded faults: a real HTTP server on 127.0.0.1 that
 * honours Idempotency-Key through effectgate's own middleware and counts every charge it
 * actually applies. That count is the ground truth.
 *
 *   POST /charges  {customer, amount} + Idempotency-Key → 201 {id, customer, amount}
 *   GET  /charges?key=K → {status: "done", charge} | {status: "running"} | {status: "absent"}
 *   GET  /charges?since=MS&until=MS → {charges: [{id, key, customer, amount, at}]} (reconciliation's lookup;
 *        `at` is when the charge was applied, on the service's clock; both ends inclusive)
 *
 * Faults, decided per (key, nth request for that key) from the seed, so the same seed gives
 * the same faults whatever the arrival order:
 *   drop    — the connection is cut before the request is processed (nothing applied);
 *   lost    — the charge is applied and its response stored, then the socket is destroyed;
 *   slow    — the charge takes `slowMs` (longer than the client's timeout), then applies;
 *   latency — a short delay.
 *
 * Drift, for reconciliation tests (`injectDrift`): seeded changes to the service's own records
 * made behind the gate's back: a charge dropped (refunded, lost), duplicated (a second record
 * with the same key), altered (another amount), or an orphan (a charge made outside the gate).
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { messageOf } from "./text.js";
import { memoryLedger, type Stores } from "effectgate";
import { idempotencyMiddleware } from "effectgate/server";
import { seededRandom, uniformFor } from "./random.js";

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
  readonly ledger?: Stores;
  /** The service's clock, stamped on each charge as `at` (default Date.now). */
  readonly clock?: () => number;
}

/** What `injectDrift` changes, each picked by the seed among the charges applied so far (each charge at most once). */
export interface DriftSpec {
  readonly seed: number;
  readonly dropped?: number;
  readonly duplicated?: number;
  readonly altered?: number;
  readonly orphans?: number;
}

export interface DriftReport {
  /** Charges removed from the service's records. */
  readonly dropped: readonly Charge[];
  /** Second records added for these charges' keys (`copy` is the new record). */
  readonly duplicated: readonly { readonly original: Charge; readonly copy: Charge }[];
  /** Charges whose amount was changed. */
  readonly altered: readonly { readonly before: Charge; readonly after: Charge }[];
  /** Charges with keys the gate never used. */
  readonly orphans: readonly Charge[];
}

export interface PaymentService {
  readonly url: string;
  /** Every charge applied, in order. */
  readonly charges: readonly Charge[];
  /** Faults injected, by kind. */
  readonly injected: Readonly<Record<keyof FaultMix, number>>;
  /** Changes the service's records behind the gate's back (see DriftSpec). Throws if there are too few charges. */
  injectDrift(spec: DriftSpec): DriftReport;
  close(): Promise<void>;
}

type Fault = keyof FaultMix | "none";

export async function startPaymentService(options: PaymentServiceOptions): Promise<PaymentService> {
  const mix: FaultMix = { drop: 0, lost: 0, slow: 0, latency: 0, ...options.faults };
  const slowMs = options.slowMs ?? 150;
  const latencyMs = options.latencyMs ?? 3;
  const charges: Charge[] = [];
  const clock = options.clock ?? Date.now;
  /** When each charge (by id) was applied. */
  const appliedAt = new Map<string, number>();
  let nextId = 1;
  const record = (charge: Omit<Charge, "id">): Charge => {
    const applied: Charge = { id: `ch_${nextId++}`, ...charge };
    appliedAt.set(applied.id, clock());
    charges.push(applied);
    return applied;
  };
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
      send(res, 201, record({ customer, amount, key }));
    } finally {
      running.delete(key);
    }
  }

  const server: Server = createServer((req, res) => {
    const url = new URL(req.url ?? "/", "http://127.0.0.1");
    if (url.pathname !== "/charges") return send(res, 404, { error: "not found" });
    if (req.method === "GET" && !url.searchParams.has("key")) {
      const since = Number(url.searchParams.get("since") ?? "-Infinity");
      const until = Number(url.searchParams.get("until") ?? "Infinity");
      if (Number.isNaN(since) || Number.isNaN(until)) return send(res, 400, { error: "since and until are epoch milliseconds" });
      const listed = charges
        .map((c) => ({ ...c, at: appliedAt.get(c.id) ?? 0 }))
        .filter((c) => c.at >= since && c.at <= until);
      return send(res, 200, { charges: listed });
    }
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
  function injectDrift(spec: DriftSpec): DriftReport {
    const want = { dropped: spec.dropped ?? 0, duplicated: spec.duplicated ?? 0, altered: spec.altered ?? 0 };
    const needed = want.dropped + want.duplicated + want.altered;
    if (needed > charges.length) throw new Error(`drift needs ${needed} distinct charges, the service has ${charges.length}`);
    const random = seededRandom(spec.seed);
    // A seeded shuffle of the charges applied so far; each is drifted at most once.
    const pool = [...charges];
    for (let i = pool.length - 1; i > 0; i--) {
      const j = Math.floor(random() * (i + 1));
      [pool[i], pool[j]] = [pool[j] as Charge, pool[i] as Charge];
    }
    const take = (n: number) => pool.splice(0, n);
    const dropped = take(want.dropped);
    for (const c of dropped) charges.splice(charges.indexOf(c), 1);
    const duplicated = take(want.duplicated).map((original) => ({ original, copy: record({ customer: original.customer, amount: original.amount, key: original.key }) }));
    const altered = take(want.altered).map((before) => {
      const after: Charge = { ...before, amount: before.amount + 1 + Math.floor(random() * 50) };
      charges[charges.indexOf(before)] = after;
      return { before, after };
    });
    const orphans = Array.from({ length: spec.orphans ?? 0 }, (_, i) =>
      record({ customer: `cus_orphan_${i}`, amount: 1 + Math.floor(random() * 500), key: `orphan_${spec.seed}_${i}` }));
    return { dropped, duplicated, altered, orphans };
  }

  return {
    url: `http://127.0.0.1:${port}`,
    charges,
    injected,
    injectDrift,
    close: () => new Promise<void>((resolve, reject) => {
      for (const t of timers) clearTimeout(t);
      server.closeAllConnections();
      server.close((err) => (err ? reject(err) : resolve()));
    }),
  };
}
