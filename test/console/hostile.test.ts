/**
 * Hostile input at the operator console, over real HTTP on 127.0.0.1 and raw node:net sockets
 * where a client library would refuse the request: a client's mistake is a 4xx that says what is
 * wrong, never a 500 nor an error line in the log; one client can neither hold the server
 * (header and request timeouts, a connection cap) nor open live streams without end (a cap).
 */
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { EffectgateError } from "../../src/core/errors.js";
import type { Logger } from "../../src/core/logger.js";
import { MAX_JSON_DEPTH } from "../../src/core/json-depth.js";
import { startConsole, type ConsoleOptions, type ConsoleServer } from "../../src/root/console/server.js";
import { memoryLedger } from "../../src/stores/memory/index.js";
import { sqliteLedger } from "../../src/stores/sqlite/index.js";
import type { Stores } from "../../src/contracts/stores.js";
import { MAX_DRAIN_BYTES } from "../../src/http/body.js";
import { tempDir } from "../support/tmp.js";
import { codeOf, once, rawRequest, RawConnection, type RawResponse } from "../server/raw-http.js";
import { call, needsHumanCall } from "./support.js";

const dir = tempDir();
const TOKEN = "hostile-token-0123456789abcdefghij";
const AUTH = `Authorization: Bearer ${TOKEN}`;
const HOST = "Host: 127.0.0.1";
let n = 0;

/** Every line the console logged, by level. */
interface Logged { error: object[]; warn: object[]; info: object[] }

const open: { server: ConsoleServer; ledger: Stores }[] = [];
afterEach(async () => {
  for (const o of open.splice(0)) {
    await o.server.close();
    await o.ledger.close();
  }
});

async function setup(options: Partial<ConsoleOptions> = {}, ledger: Stores = sqliteLedger(join(dir, `hostile-${n++}.db`))) {
  const logged: Logged = { error: [], warn: [], info: [] };
  const logger: Logger = { error: (o) => logged.error.push(o), warn: (o) => logged.warn.push(o), info: (o) => logged.info.push(o) };
  const server = await startConsole({ ledger, token: TOKEN, port: 0, pollMs: 20, logger, ...options });
  open.push({ server, ledger });
  return { url: server.url, ledger, logged, server };
}

const summary = (r: RawResponse | "closed") => (r === "closed" ? "closed" : `${r.status} ${codeOf(r) ?? ""}`.trim());

function postJson(path: string, body: string, lines: readonly string[] = []): string {
  return rawRequest("POST", path, [HOST, AUTH, "Content-Type: application/json", `Content-Length: ${Buffer.byteLength(body)}`, ...lines], body);
}

describe("console: a client's mistakes are 4xx answers, never 500s or error logs", () => {
  it("a request-target that names no path is a 400 before anything else, token or not", async () => {
    const { url, logged } = await setup();
    for (const target of ["http://[", "http://[/api/overview", "*"]) {
      for (const lines of [[HOST], [HOST, AUTH]]) expect(summary(await once(url, rawRequest("GET", target, lines))), target).toBe("400 bad_request_target");
    }
    // `//[` is a path (one the console does not have): 404, like any unknown path.
    expect(summary(await once(url, rawRequest("GET", "//[", [HOST, AUTH])))).toBe("404 not_found");
    expect(summary(await once(url, rawRequest("GET", "/api/overview", [HOST, AUTH])))).toBe("200");
    expect(logged.error).toEqual([]);
  });

  it(`JSON nested deeper than ${MAX_JSON_DEPTH} levels (under the 64 KiB limit) is a 400 naming the bound; ${MAX_JSON_DEPTH} levels are taken`, async () => {
    const { url, ledger, logged } = await setup();
    await needsHumanCall(ledger, { tenant: "acme", key: "toolu_deep", tool: "send_email", input: { to: "bob" }, why: "lost reply" });
    const nested = (depth: number) => "[".repeat(depth) + "]".repeat(depth);
    // The body object is one level; completedWith brings the rest.
    for (const depth of [MAX_JSON_DEPTH, 30_000]) {
      const body = `{"completedWith":${nested(depth)}}`;
      expect(body.length).toBeLessThan(64 * 1024);
      const answer = await once(url, postJson("/api/queue/toolu_deep/resolve", body));
      expect(summary(answer), `depth ${depth + 1}`).toBe("400 json_too_deep");
      expect(answer !== "closed" && answer.body).toContain(`deeper than ${MAX_JSON_DEPTH} levels`);
    }
    expect((await ledger.calls.get("acme", "toolu_deep"))?.state).toBe("needs_human");
    const deepest = await once(url, postJson("/api/queue/toolu_deep/resolve", `{"completedWith":${nested(MAX_JSON_DEPTH - 1)}}`));
    expect(summary(deepest)).toBe("200");
    expect((await ledger.calls.get("acme", "toolu_deep"))?.state).toBe("completed");
    expect(logged.error).toEqual([]);
  });

  it("after a 413 the kept-alive connection answers its next request; a body past the drain bound gets Connection: close and the connection ends", async () => {
    const { url, logged } = await setup();
    const connection = await RawConnection.open(url);
    const big = `{"note":"${"x".repeat(70 * 1024)}"}`;
    await connection.send(postJson("/api/kill", big) + rawRequest("GET", "/api/badges", [HOST, AUTH]));
    const refused = await connection.next();
    expect(summary(refused)).toBe("413 too_large");
    expect(refused !== "closed" && refused.headers.connection).not.toBe("close");
    expect(summary(await connection.next())).toBe("200");
    connection.destroy();

    const declared = await RawConnection.open(url);
    await declared.send(rawRequest("POST", "/api/kill", [HOST, AUTH, "Content-Type: application/json", `Content-Length: ${64 * 1024 + MAX_DRAIN_BYTES * 4}`], "{"));
    const closing = await declared.next();
    expect(summary(closing)).toBe("413 too_large");
    expect(closing !== "closed" && closing.headers.connection).toBe("close");
    await declared.closedWithin();
    expect(logged.error).toEqual([]);
  });

  it("the body of a request refused before it was read (401) is read within the drain bound, then the connection closes", async () => {
    const { url, logged } = await setup();
    const connection = await RawConnection.open(url);
    await connection.send(rawRequest("POST", "/api/kill", [HOST, "Content-Type: application/json", "Transfer-Encoding: chunked"]));
    const piece = 64 * 1024;
    const chunk = `${piece.toString(16)}\r\n${"y".repeat(piece)}\r\n`;
    for (let sent = 0; sent < 16 * MAX_DRAIN_BYTES && !connection.socket.destroyed; sent += piece) {
      try {
        await connection.send(chunk);
      } catch {
        break; // the server closed the connection
      }
    }
    expect(summary(await connection.next())).toBe("401 unauthorized");
    await connection.closedWithin();
    expect(logged.error).toEqual([]);
  });

  it("a body cut off half-way is dropped: no answer owed, nothing logged, nothing changed, the server goes on", async () => {
    const { url, ledger, logged } = await setup();
    const connection = await RawConnection.open(url);
    await connection.send(rawRequest("POST", "/api/kill", [HOST, AUTH, "Content-Type: application/json", "Content-Length: 200"], '{"on": tr'));
    connection.destroy();
    await connection.closed;
    expect((await call(url, TOKEN, "POST", "/api/kill", { on: true, reason: "after the cut" })).status).toBe(200);
    expect((await ledger.governance?.listKillSwitches())?.map((k) => k.reason)).toEqual(["after the cut"]);
    expect(logged.error).toEqual([]);
  });

  it("an unknown id is a 404 on every route that takes one, and no message names where the ledger is", async () => {
    const file = join(dir, `hostile-paths-${n++}.db`);
    const { url, logged } = await setup({}, sqliteLedger(file));
    const note = { note: "n", outcome: "kept" };
    const routes: [string, string, unknown][] = [
      ["GET", "/api/calls/acme/nope", undefined],
      ["GET", "/api/approvals/apr_nope", undefined],
      ["POST", "/api/approvals/apr_nope/approve", {}],
      ["POST", "/api/approvals/apr_nope/deny", {}],
      ["GET", "/api/queue/nope", undefined],
      ["POST", "/api/queue/nope/resolve", { failed: "no" }],
      ["GET", "/api/sagas/acme/nope", undefined],
      ["POST", "/api/sagas/acme/nope/compensate", note],
      ["POST", "/api/sagas/acme/nope/resolve", note],
      ["POST", "/api/breakers/brk_nope/close", {}],
    ];
    for (const [method, path, body] of routes) {
      const reply = await call(url, TOKEN, method, path, body);
      expect([reply.status, (reply.body as { error: { code: string } }).error.code], `${method} ${path}`).toEqual([404, "not_found"]);
      expect(JSON.stringify(reply.body), `${method} ${path}`).not.toContain(dir);
    }
    // A path parameter the ledger could never hold (NUL) is a 400 naming it.
    const nul = await call(url, TOKEN, "GET", "/api/calls/acme/a%00b");
    expect([nul.status, JSON.stringify(nul.body)]).toEqual([400, expect.stringContaining("the path's key contains the NUL character")]);
    expect(logged.error).toEqual([]);
  });

  it("a ledger without a saga log or governance state: 404s and empty lists; a store that is down: 503; never its location", async () => {
    const inner = memoryLedger();
    const { governance: _g, sagas: _s, ...rest } = inner;
    const location = "sqlite:/srv/secret-place/ledger.db";
    // A store that is down says where it is, as the SQLite and PostgreSQL stores do.
    const calls = { ...inner.calls, get: () => Promise.reject(new EffectgateError("EG_LEDGER_UNAVAILABLE", `the ledger ${location} is unavailable (disk I/O error)`)) };
    const bare: Stores = { ...rest, calls, location };
    const { url, logged } = await setup({}, bare);
    for (const [method, path, body, status] of [
      ["POST", "/api/sagas/acme/s1/compensate", { note: "n" }, 404],
      ["POST", "/api/sagas/acme/s1/resolve", { note: "n", outcome: "kept" }, 404],
      ["POST", "/api/approvals/apr_1/approve", {}, 404],
      ["POST", "/api/breakers/brk_1/close", {}, 404],
      ["POST", "/api/kill", { on: true }, 409],
      ["GET", "/api/kill", undefined, 200],
      ["GET", "/api/breakers", undefined, 200],
      ["GET", "/api/approvals", undefined, 200],
      ["GET", "/api/overview", undefined, 200],
      ["GET", "/api/calls/acme/k1", undefined, 503],
    ] as const) {
      const reply = await call(url, TOKEN, method, path, body);
      expect(reply.status, `${method} ${path}`).toBe(status);
      if (status !== 200) expect(JSON.stringify(reply.body), `${method} ${path}`).not.toContain("secret-place");
    }
    const down = await call(url, TOKEN, "GET", "/api/calls/acme/k1");
    expect((down.body as { error: { message: string } }).error.message).toBe("EG_LEDGER_UNAVAILABLE: the ledger is unavailable (disk I/O error)");
    // The store being down is the server's failure: it is logged (without the location either).
    expect(JSON.stringify(logged.error)).not.toContain("secret-place");
  });

  it("a known saga is still compensated through the API", async () => {
    const { url, ledger } = await setup();
    await ledger.sagas!.begin({ tenant: "acme", id: "order-1", task: "t1", owner: "test", leaseMs: 60_000, onAbandon: "hold" }, { kind: "saga_started", message: "started" });
    const asked = await call(url, TOKEN, "POST", "/api/sagas/acme/order-1/compensate", { note: "customer cancelled" });
    expect([asked.status, (asked.body as { saga: { state: string } }).saga.state]).toEqual([200, "compensating"]);
  });
});

describe("console: limits on what one client can hold", () => {
  it("a client that sends its headers too slowly gets 408 and is disconnected (headersTimeoutMs); so is one that sends its body too slowly (requestTimeoutMs)", async () => {
    const { url } = await setup({ headersTimeoutMs: 150, requestTimeoutMs: 300 });
    const slowHeaders = await RawConnection.open(url);
    await slowHeaders.send(`GET /api/overview HTTP/1.1\r\n${HOST}\r\n`);
    const started = Date.now();
    expect(summary(await slowHeaders.next())).toBe("408");
    await slowHeaders.closedWithin(1_000);
    expect(Date.now() - started).toBeLessThan(1_000);

    const slowBody = await RawConnection.open(url);
    await slowBody.send(rawRequest("POST", "/api/kill", [HOST, AUTH, "Content-Type: application/json", "Content-Length: 50"], '{"on":'));
    expect(summary(await slowBody.next())).toBe("408");
    await slowBody.closedWithin(1_000);
  });

  it("an idle kept-alive connection is closed after keepAliveTimeoutMs", async () => {
    const { url } = await setup({ keepAliveTimeoutMs: 100 });
    const idle = await RawConnection.open(url);
    await idle.send(rawRequest("GET", "/api/badges", [HOST, AUTH]));
    expect(summary(await idle.next())).toBe("200");
    // Node keeps an idle socket 1 s past keepAliveTimeout (its margin for the client's own timer): far under its 5 s default plus that.
    await idle.closedWithin(2_500);
  });

  it("connections past maxConnections are closed at once; the ones within it are served", async () => {
    const { url } = await setup({ maxConnections: 2 });
    const held = [await RawConnection.open(url), await RawConnection.open(url)];
    for (const c of held) {
      await c.send(rawRequest("GET", "/api/badges", [HOST, AUTH]));
      expect(summary(await c.next())).toBe("200");
    }
    const third = await RawConnection.open(url);
    await third.send(rawRequest("GET", "/api/badges", [HOST, AUTH])).catch(() => undefined);
    expect(await third.next()).toBe("closed");
    held[0]!.destroy();
    await held[0]!.closed;
    // Once one is gone there is room again (the server sees the close a moment after the client).
    let answer: RawResponse | "closed" = "closed";
    for (let i = 0; i < 50 && answer === "closed"; i++) answer = await once(url, rawRequest("GET", "/api/badges", [HOST, AUTH]));
    expect(summary(answer)).toBe("200");
    held[1]!.destroy();
  });

  it("live-update streams past maxEventStreams get 503 with Retry-After, nothing logged; a closed stream frees its place", async () => {
    const { url, logged } = await setup({ maxEventStreams: 2 });
    const streams = [await RawConnection.open(url), await RawConnection.open(url)];
    for (const s of streams) {
      await s.send(rawRequest("GET", "/api/events", [HOST, AUTH]));
      await readUntil(s, /event: ready/);
    }
    const refused = await once(url, rawRequest("GET", "/api/events", [HOST, AUTH]));
    expect(summary(refused)).toBe("503 too_many_streams");
    expect(refused !== "closed" && refused.headers["retry-after"]).toBe("5");
    expect(refused !== "closed" && refused.body).toMatch(/2 live-update streams are open already/);
    // Everything else is still answered while the streams are full.
    expect(summary(await once(url, rawRequest("GET", "/api/badges", [HOST, AUTH])))).toBe("200");
    streams[0]!.destroy();
    await streams[0]!.closed;
    let status = 503;
    for (let i = 0; i < 50 && status === 503; i++) {
      const controller = new AbortController();
      const res = await fetch(new URL("/api/events", url), { headers: { Authorization: `Bearer ${TOKEN}` }, signal: controller.signal });
      status = res.status;
      controller.abort();
    }
    expect(status).toBe(200);
    streams[1]!.destroy();
    expect(logged.error).toEqual([]);
  });

  it("refuses limits that are not positive integers, by name", async () => {
    const ledger = memoryLedger();
    try {
      await expect(startConsole({ ledger, token: TOKEN, port: 0, maxEventStreams: 0 })).rejects.toThrow(/EG_BAD_OPTION: maxEventStreams must be a positive integer/);
      await expect(startConsole({ ledger, token: TOKEN, port: 0, headersTimeoutMs: -1 })).rejects.toThrow(/EG_BAD_OPTION: server limit headersTimeoutMs must be a positive integer/);
    } finally {
      await ledger.close();
    }
  });
});

/** Reads a stream's raw bytes (an event stream never ends, so RawConnection.next cannot) until `pattern` shows. */
async function readUntil(connection: RawConnection, pattern: RegExp): Promise<void> {
  let text = "";
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no ${String(pattern)} within 3 s: ${text}`)), 3_000);
    const onData = (chunk: Buffer) => {
      text += chunk.toString("utf8");
      if (pattern.test(text)) {
        clearTimeout(timer);
        connection.socket.off("data", onData);
        resolve();
      }
    };
    connection.socket.on("data", onData);
  });
}
