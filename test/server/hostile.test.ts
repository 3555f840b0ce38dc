/**
 * Hostile input at both entries of the Idempotency-Key middleware: node:http (mounted as
 * docs/server.md shows, with the promise it returns watched) and a real Hono app served by
 * @hono/node-server, each on 127.0.0.1, reached over raw node:net sockets. One table of requests
 * goes to both, and both must answer alike: a 4xx for what they cannot read, never a rejection,
 * never a handler run.
 */
import { serve as serveHono } from "@hono/node-server";
import { Hono } from "hono";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import type { Stores } from "../../src/contracts/stores.js";
import { MAX_DRAIN_BYTES } from "../../src/http/body.js";
import { memoryLedger } from "../../src/stores/memory/index.js";
import { honoIdempotency, idempotencyMiddleware, type IdempotencyOptions } from "../../src/server.js";
import { codeOf, once, rawRequest, RawConnection, type RawResponse } from "./raw-http.js";

const LIMIT = 1024;

interface Entry {
  readonly url: string;
  /** Times the application's handler ran. */
  readonly runs: () => number;
  /** What went wrong where nobody answered for it: node: the middleware's promise rejected; Hono: an error reached app.onError. */
  readonly escaped: unknown[];
  /** The server's sockets, to see what it read. */
  readonly sockets: Socket[];
  close(): Promise<void>;
}

/** Hooks of the middleware's options a test sets (they see the request as `unknown`, so both entries take them). */
type Hooks = Pick<IdempotencyOptions<unknown>, "required">;

async function listening(server: Server): Promise<string> {
  if (!server.listening) await new Promise<void>((resolve) => server.once("listening", resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

function closer(server: Server): () => Promise<void> {
  return () => new Promise<void>((resolve) => {
    server.closeAllConnections();
    server.close(() => resolve());
  });
}

/** node:http, mounted as docs/server.md shows; the promise the middleware returns is watched instead of dropped. */
async function nodeEntry(ledger: Stores, hooks: Hooks = {}): Promise<Entry> {
  let runs = 0;
  const escaped: unknown[] = [];
  const sockets: Socket[] = [];
  const idempotency = idempotencyMiddleware({ ledger, maxBodyBytes: LIMIT, ...hooks });
  const handle = (req: IncomingMessage, res: ServerResponse) => {
    runs++;
    res.statusCode = req.method === "GET" ? 200 : 201;
    res.setHeader("content-type", "application/json");
    res.end(JSON.stringify({ run: runs }));
  };
  const server = createServer((req, res) => {
    idempotency(req, res, () => handle(req, res)).catch((err: unknown) => escaped.push(err));
  });
  server.on("connection", (s) => sockets.push(s));
  server.listen(0, "127.0.0.1");
  return { url: await listening(server), runs: () => runs, escaped, sockets, close: closer(server) };
}

/** A real Hono app on @hono/node-server. */
async function honoEntry(ledger: Stores, hooks: Hooks = {}): Promise<Entry> {
  let runs = 0;
  const escaped: unknown[] = [];
  const sockets: Socket[] = [];
  const app = new Hono();
  app.onError((err, c) => {
    escaped.push(err);
    return c.json({ error: "internal" }, 500);
  });
  app.use("*", honoIdempotency({ ledger, maxBodyBytes: LIMIT, ...hooks }));
  app.post("*", (c) => c.json({ run: ++runs }, 201));
  app.get("*", (c) => c.json({ run: ++runs }, 200));
  const server = serveHono({ fetch: app.fetch, port: 0, hostname: "127.0.0.1" }) as Server;
  server.on("connection", (s) => sockets.push(s));
  return { url: await listening(server), runs: () => runs, escaped, sockets, close: closer(server) };
}

const ENTRIES = [
  { name: "node:http", start: nodeEntry },
  { name: "Hono", start: honoEntry },
] as const;

const HOST = "Host: 127.0.0.1";

function post(target: string, headerLines: readonly string[], body = '{"amount":1}', type = "application/json"): string {
  return rawRequest("POST", target, [HOST, `Content-Type: ${type}`, `Content-Length: ${Buffer.byteLength(body)}`, ...headerLines], body);
}

function summary(response: RawResponse | "closed"): string {
  if (response === "closed") return "closed";
  return [response.status, codeOf(response), response.headers["idempotent-replayed"] === "true" ? "replayed" : undefined].filter((x) => x !== undefined).join(" ");
}

describe("hostile input at the Idempotency-Key middleware", () => {
  const open: { entry: Entry; ledger: Stores }[] = [];
  afterEach(async () => {
    for (const { entry, ledger } of open.splice(0)) {
      expect(entry.escaped, "a failure nobody answered for").toEqual([]);
      await entry.close();
      await ledger.close();
    }
  });
  /** An entry on a ledger of its own. */
  const start = async (make: (ledger: Stores, hooks?: Hooks) => Promise<Entry>, hooks?: Hooks) => {
    const ledger = memoryLedger();
    const entry = await make(ledger, hooks);
    open.push({ entry, ledger });
    return entry;
  };

  for (const { name, start: make } of ENTRIES) {
    it(`${name}: a request-target that names no path (http://[, *) is a 400; //[ is the path //[; the handler runs only for a path, and the service keeps answering`, async () => {
      const entry = await start(make);
      for (const target of ["http://[", "http://[/charges", "*", "charges"]) {
        const answer = await once(entry.url, post(target, [`Idempotency-Key: k-${target}`]));
        expect(answer === "closed" ? "closed" : answer.status, target).toBe(400);
      }
      expect(entry.runs()).toBe(0);
      // What once ended a node:http service (new URL("//[", base) throws): both entries read it as a path.
      expect(summary(await once(entry.url, post("//[", ["Idempotency-Key: k-bracket"])))).toBe("201");
      expect(summary(await once(entry.url, post("//[", ["Idempotency-Key: k-bracket"])))).toBe("201 replayed");
      // `//x/y` is a path, never a host: both entries read it as the path //x/y, which /y is not.
      expect(summary(await once(entry.url, post("//x/y", ["Idempotency-Key: k-path"])))).toBe("201");
      expect(summary(await once(entry.url, post("//x/y", ["Idempotency-Key: k-path"])))).toBe("201 replayed");
      expect(summary(await once(entry.url, post("/y", ["Idempotency-Key: k-path"])))).toBe("422 idempotency_key_mismatch");
      expect(entry.runs()).toBe(2);
    });
  }

  it("a repeated or listed key header: both entries answer every case alike, by one rule (core.ts keyOfFieldValue)", async () => {
    const cases: [label: string, lines: string[], expected: string][] = [
      ["two lines", ["Idempotency-Key: key-a", "Idempotency-Key: key-b"], "400 idempotency_key_invalid"],
      ["the same key twice", ["Idempotency-Key: key-a", "Idempotency-Key: key-a"], "400 idempotency_key_invalid"],
      ["two keys in one line", ["Idempotency-Key: key-a, key-b"], "400 idempotency_key_invalid"],
      ["a trailing comma", ["Idempotency-Key: key-a,"], "400 idempotency_key_invalid"],
      ["a quoted key with a comma", ['Idempotency-Key: "key, with comma"'], "201"],
      ["the same quoted key again", ['Idempotency-Key: "key, with comma"'], "201 replayed"],
      ["a bare key and its quoted form name one key", ["Idempotency-Key: key-q"], "201"],
      ["", ['Idempotency-Key: "key-q"'], "201 replayed"],
      ["an escaped quote", ['Idempotency-Key: "say \\"hi\\""'], "201"],
      ["two quoted lines", ['Idempotency-Key: "a, b"', 'Idempotency-Key: "c"'], "400 idempotency_key_invalid"],
      ["an unterminated quote", ['Idempotency-Key: "abc'], "400 idempotency_key_invalid"],
      ["text after the quotes", ['Idempotency-Key: "abc" def'], "400 idempotency_key_invalid"],
      ["an empty key", ["Idempotency-Key: "], "400 idempotency_key_invalid"],
      ["an empty quoted key", ['Idempotency-Key: ""'], "400 idempotency_key_invalid"],
      ["two fences", ["Idempotency-Key: key-f", "Effectgate-Fence: 1", "Effectgate-Fence: 2"], "400 fence_invalid"],
      ["two fences in one line", ["Idempotency-Key: key-f", "Effectgate-Fence: 1, 2"], "400 fence_invalid"],
    ];
    const answers: Record<string, string[]> = {};
    for (const { name, start: make } of ENTRIES) {
      const entry = await start(make);
      answers[name] = [];
      for (const [, lines] of cases) answers[name].push(summary(await once(entry.url, post("/charges", lines))));
      expect(entry.runs(), name).toBe(3);
    }
    const expected = cases.map(([label, , answer]) => `${label}: ${answer}`);
    for (const { name } of ENTRIES) expect(answers[name]!.map((a, i) => `${cases[i]![0]}: ${a}`), name).toEqual(expected);
  });

  for (const { name, start: make } of ENTRIES) {
    it(`${name}: a body cut off half-way claims nothing and breaks nothing; the same key then runs once`, async () => {
      const entry = await start(make);
      const connection = await RawConnection.open(entry.url);
      await connection.send(rawRequest("POST", "/charges", [HOST, "Content-Type: application/json", "Content-Length: 100", "Idempotency-Key: k-cut"], '{"amount":'));
      connection.destroy();
      await connection.closed;
      // Whatever the server still does with the cut request, it claims nothing: the full request runs, once.
      expect(summary(await once(entry.url, post("/charges", ["Idempotency-Key: k-cut"])))).toBe("201");
      expect(summary(await once(entry.url, post("/charges", ["Idempotency-Key: k-cut"])))).toBe("201 replayed");
      expect(entry.runs()).toBe(1);
    });

    it(`${name}: a hook that throws (required) is a 500, never a rejection`, async () => {
      const entry = await start(make, { required: () => { throw new Error("the route table is broken"); } });
      const answer = await once(entry.url, post("/charges", ["Idempotency-Key: k-hook"]));
      expect(summary(answer)).toBe("500 idempotency_middleware_failed");
      expect(entry.runs()).toBe(0);
    });

    it(`${name}: after a 413 the kept-alive connection answers its next request (or is closed), never hangs`, async () => {
      const entry = await start(make);
      const connection = await RawConnection.open(entry.url);
      try {
        const big = "x".repeat(LIMIT * 3);
        await connection.send(post("/charges", ["Idempotency-Key: k-big"], big, "text/plain") + rawRequest("GET", "/health", [HOST]));
        const refused = await connection.next();
        expect(summary(refused)).toBe("413 body_too_large");
        const next = await connection.next();
        if (next !== "closed") expect(next.status).toBe(200);
        else expect(refused !== "closed" && refused.headers.connection).toBe("close");
      } finally {
        connection.destroy();
      }
    });
  }

  it("node:http: the rest of a refused body is read within a bound: a larger one closes the connection", async () => {
    const entry = await start(nodeEntry);
    // Within the bound: the 413 keeps the connection, which then carries the next request.
    const within = await RawConnection.open(entry.url);
    await within.send(post("/charges", ["Idempotency-Key: k-within"], "x".repeat(LIMIT + MAX_DRAIN_BYTES / 2), "text/plain") + rawRequest("GET", "/health", [HOST]));
    const first = await within.next();
    expect(summary(first)).toBe("413 body_too_large");
    expect(first !== "closed" && first.headers.connection).not.toBe("close");
    expect(summary(await within.next())).toBe("200");
    within.destroy();

    // Declared past the bound: 413 with Connection: close, and the connection ends.
    const declared = await RawConnection.open(entry.url);
    await declared.send(rawRequest("POST", "/charges", [HOST, "Content-Type: text/plain", `Content-Length: ${LIMIT + MAX_DRAIN_BYTES * 8}`, "Idempotency-Key: k-declared"]));
    const answer = await declared.next();
    expect(summary(answer)).toBe("413 body_too_large");
    expect(answer !== "closed" && answer.headers.connection).toBe("close");
    await declared.closedWithin();

    // Chunked, with no end: the server reads about the limit plus the bound, then closes.
    const chunked = await RawConnection.open(entry.url);
    await chunked.send(rawRequest("POST", "/charges", [HOST, "Content-Type: text/plain", "Transfer-Encoding: chunked", "Idempotency-Key: k-chunked"]));
    const piece = 64 * 1024;
    const chunk = `${piece.toString(16)}\r\n${"y".repeat(piece)}\r\n`;
    const serverSide = entry.sockets.at(-1);
    for (let sent = 0; sent < 8 * MAX_DRAIN_BYTES && !chunked.socket.destroyed; sent += piece) {
      try {
        await chunked.send(chunk);
      } catch {
        break; // the server closed the connection
      }
    }
    await chunked.closedWithin();
    expect(serverSide?.bytesRead).toBeLessThan(LIMIT + MAX_DRAIN_BYTES + 4 * piece);
    expect(entry.runs()).toBe(1); // the GET only
  });
});
