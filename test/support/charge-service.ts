/**
 * A payments downstream on 127.0.0.1 whose timing a test controls: it counts every request it
 * receives and every charge it applies, by key, so a test checks effects where they happen.
 *
 * - POST /charges {amount}: received and held; it lands (is applied) when the test calls
 *   `land()`, or at once in `instant` mode. A client that gives up (abort) does not stop it: the
 *   server applies it anyway, as real services do. `honoursKeys`: a second request with a key
 *   already applied is answered with the first charge, applied nothing.
 * - `fences`: the highest Effectgate-Fence seen per key is kept; a request with a lower one is
 *   refused 409 and applies nothing (what docs/guarantees.md asks of a downstream).
 * - GET /charges?key=K: {status: "done", charge} | {status: "absent"} (the probe).
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

export interface Charge {
  readonly id: string;
  readonly key: string;
  readonly amount: number;
  readonly fence: number | null;
}

export interface ChargeService {
  readonly url: string;
  /** Every POST received, in order (key, fence). */
  readonly received: { key: string; fence: number | null }[];
  /** Every charge applied. */
  readonly charges: Charge[];
  /** Requests refused for a stale fence. */
  readonly refusedFences: { key: string; fence: number }[];
  /** Applies every request held so far, and answers their clients (if still listening). */
  land(): void;
  /** How many requests are held, not landed yet. */
  held(): number;
  /** Calls `fn` each time a probe (GET) arrives, with the number of probes so far. */
  onProbe(fn: (count: number) => void): void;
  close(): Promise<void>;
}

export interface ChargeServiceOptions {
  /** Apply every request at once (default: hold it until `land()`). */
  readonly instant?: boolean;
  readonly honoursKeys?: boolean;
  readonly fences?: boolean;
  /**
   * What becomes of the nth request received (from 1): held for `land()`, applied at once, lost
   * (never applied, never answered), or applied with its reply lost (the client waits until it gives up).
   */
  readonly decide?: (n: number) => "hold" | "land" | "drop" | "lose-reply";
}

export async function startChargeService(options: ChargeServiceOptions = {}): Promise<ChargeService> {
  const received: { key: string; fence: number | null }[] = [];
  const charges: Charge[] = [];
  const refusedFences: { key: string; fence: number }[] = [];
  const highestFence = new Map<string, number>();
  const pending: (() => void)[] = [];
  let probeListener: ((count: number) => void) | undefined;
  let probes = 0;

  const send = (res: ServerResponse | null, status: number, body: unknown) => {
    if (res === null || res.destroyed || res.writableEnded) return;
    res.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify(body));
  };
  // res null: the reply is lost (the charge is applied, nothing is sent).
  const apply = (key: string, amount: number, fence: number | null, res: ServerResponse | null) => {
    if (options.fences && fence !== null) {
      const highest = highestFence.get(key) ?? 0;
      if (fence < highest) {
        refusedFences.push({ key, fence });
        return send(res, 409, { error: `stale fence ${fence} < ${highest}` });
      }
      highestFence.set(key, fence);
    }
    const first = charges.find((c) => c.key === key);
    if (options.honoursKeys && first) return send(res, 200, first);
    const charge = { id: `ch_${charges.length + 1}`, key, amount, fence };
    charges.push(charge);
    send(res, 200, charge);
  };

  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const url = new URL(req.url ?? "/", "http://x");
    if (req.method === "GET") {
      probes++;
      probeListener?.(probes);
      const found = charges.find((c) => c.key === url.searchParams.get("key"));
      return send(res, 200, found ? { status: "done", charge: found } : { status: "absent" });
    }
    let body = "";
    req.on("data", (chunk: Buffer) => (body += chunk.toString("utf8")));
    req.on("end", () => {
      const key = String(req.headers["idempotency-key"] ?? "");
      const fenceHeader = req.headers["effectgate-fence"];
      const fence = typeof fenceHeader === "string" ? Number(fenceHeader) : null;
      const { amount } = JSON.parse(body) as { amount: number };
      received.push({ key, fence });
      const fate = options.decide?.(received.length) ?? (options.instant ? "land" : "hold");
      if (fate === "land") return apply(key, amount, fence, res);
      if (fate === "drop") return void res.socket?.destroy();
      if (fate === "lose-reply") return apply(key, amount, fence, null);
      pending.push(() => apply(key, amount, fence, res));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    received, charges, refusedFences,
    land() {
      for (const landing of pending.splice(0)) landing();
    },
    held: () => pending.length,
    onProbe(fn) {
      probeListener = fn;
    },
    close: () => new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    }),
  };
}

/** POSTs a charge with the call's key, as a tool would: the service counts what it applies. */
export async function postCharge(service: ChargeService, key: string, body: unknown): Promise<unknown> {
  const res = await fetch(`${service.url}/charges`, {
    method: "POST", headers: { "content-type": "application/json", "idempotency-key": key }, body: JSON.stringify(body),
  });
  return res.json();
}
