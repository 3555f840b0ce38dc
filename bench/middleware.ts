/**
 * What the `Idempotency-Key` middleware (effectgate/server) costs per HTTP request.
 * A standalone script, never part of the tests:
 *
 *   npx tsc -p tsconfig.bench.json && node --expose-gc dist-bench/bench/middleware.js
 *
 * One process serves a trivial POST handler (read the JSON body, answer 201 with a small JSON
 * body) on node:http at 127.0.0.1 and drives it over keep-alive connections with node's own
 * http client: bare, then behind the middleware on the memory ledger and on SQLite (durability
 * "fsync" and "process"), each request with a fresh key (a claim and a stored response: two
 * ledger writes), plus a replay row (the same key every time: one ledger read, handler skipped).
 *
 * Flags:
 *   --requests=N     measured requests per row (default 5000), after N/10 warm-up requests
 *   --concurrency=N  requests in flight, one keep-alive connection each (default 1: the
 *                    latency of one request at a time; raise it to see throughput under load)
 *
 * Client and server share one process and one CPU core's event loop, so the figures are
 * the server's cost plus the client's: compare rows with each other, not with other tools.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { Agent, createServer, request, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import os from "node:os";
import { join } from "node:path";
import { memoryLedger, type Stores } from "../src/index.js";
import { sqliteLedger } from "../src/sqlite.js";
import { idempotencyMiddleware, type IdempotentRequestFields } from "../src/server.js";
import { positiveIntFlag as flag } from "./lib/flags.js";
import { collectGarbage, fmtUs, summarize, table, usSince, type Summary } from "./lib/stats.js";

const REQUESTS = flag("requests", 5000);
const CONCURRENCY = flag("concurrency", 1);
const WARMUP = Math.max(50, Math.floor(REQUESTS / 10));
const BODY = JSON.stringify({ amount: 500, currency: "eur", customer: "cus_123" });

const progress = (message: string) => process.stderr.write(`[bench-middleware] ${message}\n`);

type Req = IncomingMessage & IdempotentRequestFields;

/** The application: the same work with and without the middleware. */
function handler(req: Req, res: ServerResponse, body: unknown): void {
  const amount = (body as { amount?: number } | undefined)?.amount ?? 0;
  res.statusCode = 201;
  res.setHeader("content-type", "application/json");
  res.end(JSON.stringify({ id: "ch_1", amount, path: req.url }));
}

/** Reads and parses the body, as the bare server must do itself. */
function readJson(req: IncomingMessage): Promise<unknown> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      try {
        resolve(chunks.length === 0 ? undefined : JSON.parse(Buffer.concat(chunks).toString("utf8")));
      } catch (err) {
        reject(err instanceof Error ? err : new Error(String(err)));
      }
    });
    req.on("error", reject);
  });
}

function bareListener(req: IncomingMessage, res: ServerResponse): void {
  readJson(req).then((body) => handler(req, res, body), () => {
    res.statusCode = 400;
    res.end();
  });
}

function middlewareListener(ledger: Stores): (req: IncomingMessage, res: ServerResponse) => void {
  const idempotency = idempotencyMiddleware({ ledger });
  return (req: Req, res) => void idempotency(req, res, () => handler(req, res, req.body));
}

async function listen(listener: (req: IncomingMessage, res: ServerResponse) => void): Promise<{ server: Server; port: number }> {
  const server = createServer({ keepAliveTimeout: 60_000 }, listener);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { server, port: (server.address() as AddressInfo).port };
}

/** One POST; resolves with the status once the whole response was read. */
function post(agent: Agent, port: number, key: string | undefined): Promise<number> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string | number> = { "content-type": "application/json", "content-length": Buffer.byteLength(BODY) };
    if (key !== undefined) headers["idempotency-key"] = key;
    const req = request({ agent, host: "127.0.0.1", port, method: "POST", path: "/charges", headers }, (res) => {
      res.resume();
      res.on("end", () => resolve(res.statusCode ?? 0));
      res.on("error", reject);
    });
    req.on("error", reject);
    req.end(BODY);
  });
}

interface Row {
  readonly name: string;
  readonly requests: number;
  readonly seconds: number;
  readonly latency: Summary;
}

/**
 * Drives `count` requests through `concurrency` keep-alive connections (each connection one
 * request at a time) and returns per-request latencies (µs) and the wall time.
 */
async function drive(port: number, count: number, keyOf: (i: number) => string | undefined, expected: number): Promise<{ samples: Float64Array; seconds: number }> {
  const agent = new Agent({ keepAlive: true, maxSockets: CONCURRENCY });
  const samples = new Float64Array(count);
  let next = 0;
  const start = process.hrtime.bigint();
  const worker = async () => {
    while (next < count) {
      const i = next++;
      const t0 = process.hrtime.bigint();
      const status = await post(agent, port, keyOf(i));
      samples[i] = usSince(t0);
      if (status !== expected) throw new Error(`request ${i} answered ${status}, expected ${expected}`);
    }
  };
  await Promise.all(Array.from({ length: CONCURRENCY }, worker));
  const seconds = usSince(start) / 1e6;
  agent.destroy();
  return { samples, seconds };
}

async function measure(
  name: string,
  listener: (req: IncomingMessage, res: ServerResponse) => void,
  keyOf: (phase: "warm" | "run", i: number) => string | undefined,
): Promise<Row> {
  const { server, port } = await listen(listener);
  try {
    progress(`${name}: ${WARMUP} warm-up + ${REQUESTS} measured requests, ${CONCURRENCY} in flight`);
    await drive(port, WARMUP, (i) => keyOf("warm", i), 201);
    collectGarbage();
    const { samples, seconds } = await drive(port, REQUESTS, (i) => keyOf("run", i), 201);
    return { name, requests: REQUESTS, seconds, latency: summarize(samples) };
  } finally {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
}

async function main(): Promise<void> {
  const loadAtStart = os.loadavg()[0] ?? 0;
  const dir = mkdtempSync(join(os.tmpdir(), "effectgate-bench-mw-"));
  const rows: Row[] = [];
  const fresh = (tag: string) => (phase: string, i: number) => `${tag}-${phase}-${i}`;
  try {
    rows.push(await measure("node:http bare (no key)", bareListener, () => undefined));

    const memory = memoryLedger();
    rows.push(await measure("middleware, memory ledger, new key", middlewareListener(memory), fresh("mem")));
    rows.push(await measure("middleware, memory ledger, replay", middlewareListener(memory), () => "mem-warm-0"));
    await memory.close();

    const fsync = sqliteLedger(join(dir, "fsync.db"));
    rows.push(await measure("middleware, SQLite fsync, new key", middlewareListener(fsync), fresh("fsync")));
    await fsync.close();

    const processDurability = sqliteLedger(join(dir, "process.db"), { durability: "process" });
    const listener = middlewareListener(processDurability);
    rows.push(await measure("middleware, SQLite process, new key", listener, fresh("proc")));
    rows.push(await measure("middleware, SQLite process, replay", listener, () => "proc-warm-0"));
    await processDurability.close();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }

  const bare = rows[0];
  const cpus = os.cpus();
  process.stdout.write(
    `node ${process.version}, ${process.platform} ${process.arch}, ${cpus[0]?.model.trim() ?? "?"} × ${cpus.length}; ` +
      `${REQUESTS} requests per row after ${WARMUP} warm-up, ${CONCURRENCY} in flight over keep-alive to 127.0.0.1; ` +
      `SQLite files in ${os.tmpdir()}; load average ${loadAtStart.toFixed(2)} at start, ${(os.loadavg()[0] ?? 0).toFixed(2)} at end\n\n`,
  );
  process.stdout.write(
    table(
      ["setup", "requests", "req/s", "median", "p99", "median − bare"],
      rows.map((r) => [
        r.name, String(r.requests), (r.requests / r.seconds).toFixed(0), fmtUs(r.latency.median), fmtUs(r.latency.p99),
        r === bare || !bare ? "—" : `+${fmtUs(r.latency.median - bare.latency.median)}`,
      ]),
    ) + "\n",
  );
}

main().catch((err: unknown) => {
  process.stderr.write(`${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
