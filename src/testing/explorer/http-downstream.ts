/**
 * The downstream of the explorer's real-kill mode: a payments service on 127.0.0.1, in the
 * parent process, so it outlives every child killed while calling it. It applies each request
 * after a short delay (whether or not its client is still there, as a real service does), counts
 * requests and effects per logical call (`ref`), optionally honours Idempotency-Key, keeps the
 * highest Effectgate-Fence seen per key and refuses older ones, and answers the probe
 * (GET /charges?key=K) from what it applied.
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { FENCE_HEADER } from "../../core/outcome.js";

export interface HttpDownstream {
  readonly url: string;
  sends(ref: string): number;
  effects(ref: string): number;
  resultOf(ref: string): unknown;
  /**
   * The longest a request for `ref` took from its send (the client's clock, this machine's) to
   * being applied: past the tool's settleMs, the horizon the tool declared was broken by the
   * machine (a loaded scheduler), not by the gate.
   */
  landedAfterMs(ref: string): number;
  /** How a request is treated from now on (per schedule). */
  configure(options: { readonly honoursKeys: boolean; readonly delayMs: (n: number) => number }): void;
  close(): Promise<void>;
}

interface Charge {
  readonly id: string;
  readonly ref: string;
  readonly amount: number;
}

const MAX_BODY = 64 * 1024;

/** When the client sent the request (epoch ms), so the downstream can tell how long it took to land. */
export const SENT_AT_HEADER = "x-explorer-sent-at";

export async function startHttpDownstream(): Promise<HttpDownstream> {
  const sends = new Map<string, number>();
  const effects = new Map<string, number>();
  const results = new Map<string, Charge>();
  const byKey = new Map<string, Charge>();
  const highestFence = new Map<string, number>();
  const landedAfter = new Map<string, number>();
  let honoursKeys = false;
  let delayMs: (n: number) => number = () => 0;
  let seq = 0;
  let received = 0;

  const reply = (res: ServerResponse, status: number, body: unknown) => {
    if (res.destroyed || res.writableEnded) return;
    res.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify(body));
  };

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? "/", "http://127.0.0.1");
    if (req.method === "GET" && url.pathname === "/charges") {
      const found = byKey.get(url.searchParams.get("key") ?? "");
      return reply(res, 200, found ? { status: "done", charge: found } : { status: "absent" });
    }
    if (req.method !== "POST" || url.pathname !== "/charges") return reply(res, 404, { error: "not found" });
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const chunk of req as AsyncIterable<Buffer>) {
      size += chunk.length;
      if (size > MAX_BODY) return reply(res, 413, { error: "too large" });
      chunks.push(chunk);
    }
    let body: { ref?: unknown; amount?: unknown };
    try {
      body = JSON.parse(Buffer.concat(chunks).toString("utf8")) as typeof body;
    } catch {
      return reply(res, 400, { error: "invalid JSON" });
    }
    const key = String(req.headers["idempotency-key"] ?? "");
    const fence = Number(req.headers[FENCE_HEADER.toLowerCase()] ?? 0);
    if (typeof body.ref !== "string" || typeof body.amount !== "number" || key === "") return reply(res, 422, { error: "ref, amount and Idempotency-Key are required" });
    const ref = body.ref;
    const amount = body.amount;
    sends.set(ref, (sends.get(ref) ?? 0) + 1);
    highestFence.set(key, Math.max(fence, highestFence.get(key) ?? 0));
    const wait = delayMs(++received);
    // Applied after the delay even if the client is gone by then.
    await new Promise((resolve) => setTimeout(resolve, wait));
    if (fence < (highestFence.get(key) ?? 0)) return reply(res, 409, { error: `stale fence ${fence}` });
    const existing = honoursKeys ? byKey.get(key) : undefined;
    if (existing) return reply(res, 200, existing);
    const charge: Charge = { id: `ch_${++seq}`, ref, amount };
    effects.set(ref, (effects.get(ref) ?? 0) + 1);
    const sentAt = Number(req.headers[SENT_AT_HEADER] ?? NaN);
    if (Number.isFinite(sentAt)) landedAfter.set(ref, Math.max(landedAfter.get(ref) ?? 0, Date.now() - sentAt));
    if (!results.has(ref)) results.set(ref, charge);
    if (!byKey.has(key)) byKey.set(key, charge);
    reply(res, 201, charge);
  }

  const server = createServer((req, res) => {
    handle(req, res).catch(() => reply(res, 500, { error: "internal" }));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    sends: (ref) => sends.get(ref) ?? 0,
    effects: (ref) => effects.get(ref) ?? 0,
    resultOf: (ref) => results.get(ref),
    landedAfterMs: (ref) => landedAfter.get(ref) ?? 0,
    configure(options) {
      honoursKeys = options.honoursKeys;
      delayMs = options.delayMs;
    },
    close: () => new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    }),
  };
}
