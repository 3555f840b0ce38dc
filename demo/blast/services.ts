/**
 * The simulated downstream services of `effectgate demo`: four real HTTP servers on 127.0.0.1,
 * in the CLI's own process, each counting every effect it actually applies. Those records are
 * the ground truth of the blast-radius table; nothing is ever computed from what a client
 * believes.
 *
 *   ticketing  GET /customers/:id (read); POST /tickets. Ignores Idempotency-Key; tickets can be
 *              looked up by the key they were created with (GET /tickets?key=K).
 *   payments   POST /charges, POST /refunds. Honours Idempotency-Key like Stripe (effectgate's
 *              own middleware: replay, 409 while running, 422 on a different body); lookup by key.
 *   mail       POST /emails, POST /drafts/delete. Ignores Idempotency-Key; sent e-mails cannot be
 *              looked up (like an SMTP relay); a draft's existence can (GET /drafts/:id).
 *   storage    POST /reservations, /releases, /shipments (the warehouse). Ignores
 *              Idempotency-Key; lookup by key.
 *
 * Every effect collection also answers GET /<collection>?reference=R (the business reference),
 * which is what a reconciliation lookup asks.
 *
 * Seeded faults, decided per (service, path, business reference, nth request for it), so the same
 * seed gives the same faults whatever the arrival order: `drop` (connection cut before
 * processing: nothing applied), `lost` (applied, then the connection is cut instead of the
 * reply), `slow` (applied after `slowMs`, longer than clients wait), `latency` (a short delay).
 * Business refusals come from the workload: shipments of orders whose shipment fails, and the
 * compensations planned to fail, are refused with 422 every time.
 *
 * A request whose client has gone before the service takes it up (after reading its body) is not
 * processed, as most servers do; once taken up, it completes whatever the client does.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { canonicalJson } from "../text.js";
import { type Json, memoryLedger } from "effectgate";
import { idempotencyMiddleware } from "effectgate/server";
import { uniformFor } from "../random.js";
import { SLOW_MS } from "./timing.js";
import { undoRef, type Workload } from "./workload.js";

export type ServiceName = "ticketing" | "payments" | "mail" | "storage";
export const SERVICE_NAMES: readonly ServiceName[] = ["ticketing", "payments", "mail", "storage"];

export type Collection = "tickets" | "emails" | "drafts" | "charges" | "refunds" | "reservations" | "releases" | "shipments";

/** One effect a service actually applied. */
export interface Effect {
  readonly service: ServiceName;
  readonly collection: Collection;
  readonly id: string;
  /** The business reference the request carried ("task-0007/charge"), or "" when it carried none. */
  readonly ref: string;
  /** The Idempotency-Key header it came with, if any. */
  readonly key: string | null;
  /** The request body as applied (canonical JSON, so bodies compare by value). */
  readonly body: string;
  readonly at: number;
  /** Removed later by the downstream itself (drift: a charge voided, a ticket merged away); still counted as applied. */
  voided?: boolean;
}

export type FaultKind = "drop" | "lost" | "slow" | "latency";
export type FaultMix = Readonly<Record<FaultKind, number>>;

/** The default fault mix, per request. */
export const DEFAULT_FAULTS: FaultMix = { drop: 0.03, lost: 0.03, slow: 0.02, latency: 0.15 };

export interface ServiceTraits {
  readonly name: ServiceName;
  readonly does: string;
  /** A repeated Idempotency-Key is applied once. */
  readonly honoursKeys: boolean;
  /** "Did the call with key K happen?" can be asked (what a probe needs). */
  readonly lookup: "by key" | "drafts only" | "by key and reference";
}

export const SERVICE_TRAITS: readonly ServiceTraits[] = [
  { name: "ticketing", does: "customers (read), tickets", honoursKeys: false, lookup: "by key and reference" },
  { name: "payments", does: "charges, refunds", honoursKeys: true, lookup: "by key and reference" },
  { name: "mail", does: "e-mails, drafts (delete)", honoursKeys: false, lookup: "drafts only" },
  { name: "storage", does: "stock reservations, releases, shipments", honoursKeys: false, lookup: "by key and reference" },
];

export interface ServiceOptions {
  readonly workload: Workload;
  readonly faults?: FaultMix;
  /** How long a `slow` request takes before it applies (default SLOW_MS, well past the clients' CALL_TIMEOUT_MS). */
  readonly slowMs?: number;
  readonly latencyMs?: number;
}

export interface Downstreams {
  readonly urls: Readonly<Record<ServiceName, string>>;
  /** Every effect applied, by every service, in order. */
  readonly effects: readonly Effect[];
  /** Faults injected, by kind. */
  readonly injected: Readonly<Record<FaultKind | "refused", number>>;
  /** Resolves once no request is being processed and no slow effect is pending (up to `timeoutMs`). */
  quiesce(timeoutMs?: number): Promise<void>;
  /** Drift: the downstreams remove, on their own, the effects the workload plans to drift (after the run). Returns how many. */
  drift(): number;
  close(): Promise<void>;
}

type Fault = FaultKind | "none";

interface Handled {
  readonly status: number;
  readonly body: Json;
}

export async function startServices(options: ServiceOptions): Promise<Downstreams> {
  const mix = options.faults ?? DEFAULT_FAULTS;
  const slowMs = options.slowMs ?? SLOW_MS;
  const latencyMs = options.latencyMs ?? 4;
  const seed = options.workload.seed;
  const effects: Effect[] = [];
  const injected = { drop: 0, lost: 0, slow: 0, latency: 0, refused: 0 };
  const nth = new Map<string, number>();
  let busy = 0;
  const timers = new Set<NodeJS.Timeout>();
  const wait = (ms: number) => new Promise<void>((resolve) => {
    const t = setTimeout(() => (timers.delete(t), resolve()), ms);
    timers.add(t);
  });

  // Business refusals planned by the workload.
  const refused = new Set<string>();
  for (const task of options.workload.tasks) {
    if (task.shipFails) refused.add(`shipments ${task.id}/ship`);
    if (task.compensationFails === "refund_charge") refused.add(`refunds ${undoRef(`${task.id}/charge`)}`);
    if (task.compensationFails === "release_stock") refused.add(`releases ${undoRef(`${task.id}/reserve`)}`);
  }
  const drifting = new Set(options.workload.tasks.flatMap((t) => t.drift));
  const deletedDrafts = new Set<string>();
  const made = new Map<Collection, number>();
  const running = new Map<string, number>(); // "collection key" → requests being processed

  const pickFault = (service: ServiceName, path: string, ref: string): Fault => {
    const id = `${service} ${path} ${ref}`;
    const n = (nth.get(id) ?? 0) + 1;
    nth.set(id, n);
    let u = uniformFor(seed, id, n);
    for (const kind of ["drop", "lost", "slow", "latency"] as const) {
      if (u < mix[kind]) return kind;
      u -= mix[kind];
    }
    return "none";
  };

  /** Applies one effect request (after faults): the service's business logic. */
  async function apply(service: ServiceName, collection: Collection, body: Record<string, unknown>, key: string | null, fault: Fault): Promise<Handled> {
    const ref = typeof body.reference === "string" ? body.reference : "";
    if (ref === "") return { status: 400, body: { error: "reference (the business reference) is required" } };
    if (refused.has(`${collection} ${ref}`)) {
      injected.refused++;
      const why = collection === "shipments" ? "the carrier refused the shipment" : `the ${collection === "refunds" ? "charge is disputed and cannot be refunded" : "reservation is locked by a stock count"}`;
      return { status: 422, body: { error: why, code: "refused" } };
    }
    if (fault === "slow") await wait(slowMs);
    if (fault === "latency") await wait(latencyMs);
    if (collection === "drafts") {
      const draft = String(body.draft);
      if (deletedDrafts.has(draft)) return { status: 404, body: { error: `no draft ${draft}` } };
      deletedDrafts.add(draft);
    }
    const n = (made.get(collection) ?? 0) + 1;
    made.set(collection, n);
    const id = `${collection.slice(0, 2).toUpperCase()}-${n}`;
    effects.push({ service, collection, id, ref, key, body: canonicalJson(body), at: Date.now() });
    return { status: 201, body: { id, ...(body as Record<string, Json>) } };
  }

  /** A keyed request counts as running from the moment it arrives (a probe asking meanwhile hears "running"). */
  const arrive = (runKey: string) => running.set(runKey, (running.get(runKey) ?? 0) + 1);
  const leave = (runKey: string) => {
    const left = (running.get(runKey) ?? 1) - 1;
    if (left === 0) running.delete(runKey);
    else running.set(runKey, left);
  };

  function lookup(collection: Collection, query: URLSearchParams): Handled {
    const key = query.get("key");
    const reference = query.get("reference");
    if (key !== null) {
      const found = effects.find((e) => e.collection === collection && e.key === key && !e.voided);
      if (found) return { status: 200, body: { status: "done", result: resultOf(found) } };
      return { status: 200, body: { status: running.has(`${collection} ${key}`) ? "running" : "absent" } };
    }
    const current = effects.filter((e) => e.collection === collection && !e.voided);
    if (reference !== null) return { status: 200, body: { effects: current.filter((e) => e.ref === reference).map(resultOf) } };
    const since = Number(query.get("since"));
    const until = Number(query.get("until"));
    if (query.has("since") && query.has("until") && Number.isFinite(since) && Number.isFinite(until)) {
      // A listing for reconciliation: the records made in [since, until], each with the key it was made with.
      return {
        status: 200,
        body: { effects: current.filter((e) => e.at >= since && e.at <= until).map((e) => ({ id: e.id, key: e.key, ref: e.ref, at: e.at, fields: JSON.parse(e.body) as Json })) },
      };
    }
    return { status: 400, body: { error: "ask ?key=K, ?reference=R or ?since=T&until=T" } };
  }

  const routes: Record<ServiceName, Readonly<Record<string, Collection>>> = {
    ticketing: { "/tickets": "tickets" },
    payments: { "/charges": "charges", "/refunds": "refunds" },
    mail: { "/emails": "emails", "/drafts/delete": "drafts" },
    storage: { "/reservations": "reservations", "/releases": "releases", "/shipments": "shipments" },
  };
  const lookable: Record<ServiceName, readonly Collection[]> = {
    ticketing: ["tickets"], payments: ["charges", "refunds"], mail: [], storage: ["reservations", "releases", "shipments"],
  };

  async function handle(service: ServiceName, req: IncomingMessage & { body?: unknown }, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? "/", "http://127.0.0.1");
    if (req.method === "GET") {
      if (url.pathname === "/health") return send(res, 200, { ok: true }); // never faulted: workers warm their connections with it
      if (service === "ticketing" && url.pathname.startsWith("/customers/")) {
        const id = decodeURIComponent(url.pathname.slice("/customers/".length));
        const fault = pickFault(service, "/customers", url.searchParams.get("reference") ?? id);
        if (fault !== "none") injected[fault]++;
        if (fault === "drop" || fault === "lost") return void req.socket.destroy();
        if (fault === "slow") await wait(slowMs);
        if (fault === "latency") await wait(latencyMs);
        return send(res, 200, { id, name: `Customer ${id.slice(4)}`, email: `${id.replace("cus_", "customer-")}@example.com`, tier: "standard" });
      }
      if (service === "mail" && url.pathname.startsWith("/drafts/")) {
        const draft = decodeURIComponent(url.pathname.slice("/drafts/".length));
        return send(res, 200, { draft, exists: !deletedDrafts.has(draft) });
      }
      const collection = (Object.entries(routes[service]).find(([path]) => path === url.pathname)?.[1]);
      if (collection && lookable[service].includes(collection)) {
        const answer = lookup(collection, url.searchParams);
        return send(res, answer.status, answer.body);
      }
      return send(res, 404, { error: "not found" });
    }
    const collection = req.method === "POST" ? routes[service][url.pathname] : undefined;
    if (!collection) return send(res, 404, { error: "not found" });
    const header = req.headers["idempotency-key"];
    const key = typeof header === "string" && header !== "" ? header : null;
    if (key === null) return effect(service, collection, req, res, null);
    const runKey = `${collection} ${key}`;
    arrive(runKey);
    try {
      await effect(service, collection, req, res, key);
    } finally {
      leave(runKey);
    }
  }

  async function effect(service: ServiceName, collection: Collection, req: IncomingMessage & { body?: unknown }, res: ServerResponse, key: string | null): Promise<void> {
    const url = new URL(req.url ?? "/", "http://127.0.0.1");
    let body: Record<string, unknown>;
    try {
      body = JSON.parse(await readText(req)) as Record<string, unknown>;
      if (typeof body !== "object" || body === null || Array.isArray(body)) throw new Error("not an object");
    } catch {
      return send(res, 400, { error: "the body must be a JSON object" });
    }
    req.body = body; // the idempotency middleware fingerprints this instead of reading the stream again
    // Like most servers, work is not started for a client that is already gone (it gave up before the
    // request was taken up). Work already started goes on: that is the late completion below.
    if (req.socket.destroyed || res.destroyed) return;
    const fault = pickFault(service, url.pathname, typeof body.reference === "string" ? body.reference : "");
    if (fault !== "none") injected[fault]++;
    if (fault === "drop") return void req.socket.destroy();
    if (fault === "lost") {
      // The effect is applied (and, on payments, its response stored), then the reply is lost on the wire.
      res.end = (() => {
        req.socket.destroy();
        return res;
      }) as typeof res.end;
    }
    const run = async () => {
      const answer = await apply(service, collection, body, key, fault);
      send(res, answer.status, answer.body);
    };
    if (service === "payments") return idempotency(req, res, run);
    return run();
  }

  const idempotency = idempotencyMiddleware({ ledger: memoryLedger(), required: false });
  const servers: Server[] = [];
  const urls = {} as Record<ServiceName, string>;
  for (const name of SERVICE_NAMES) {
    const server = createServer((req, res) => {
      busy++;
      handle(name, req, res)
        .catch((err: unknown) => send(res, 500, { error: err instanceof Error ? err.message : String(err) }))
        .finally(() => busy--);
    });
    server.keepAliveTimeout = 60_000;
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    servers.push(server);
    urls[name] = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  }

  return {
    urls,
    effects,
    injected,
    async quiesce(timeoutMs = 10_000) {
      const deadline = Date.now() + timeoutMs;
      // Twice in a row idle, a little apart: a client may be between two requests.
      for (let idle = 0; idle < 2 && Date.now() < deadline; ) {
        await new Promise((resolve) => setTimeout(resolve, 25));
        idle = busy === 0 && timers.size === 0 && running.size === 0 ? idle + 1 : 0;
      }
    },
    drift() {
      let n = 0;
      for (const e of effects) {
        if (drifting.has(e.ref) && !e.voided) {
          e.voided = true;
          n++;
        }
      }
      return n;
    },
    async close() {
      for (const t of timers) clearTimeout(t);
      await Promise.all(servers.map((server) => new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      })));
    },
  };
}

function resultOf(effect: Effect): Json {
  return { id: effect.id, ...(JSON.parse(effect.body) as Record<string, Json>) };
}

function send(res: ServerResponse, status: number, body: Json): void {
  // Answer even when the client is gone: on payments the idempotency middleware stores this response
  // for the retry; skipping it would tell the middleware the handler ended without one and free the key.
  if (res.headersSent) return;
  res.writeHead(status, { "content-type": "application/json" });
  res.end(JSON.stringify(body));
}

async function readText(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString("utf8");
}
