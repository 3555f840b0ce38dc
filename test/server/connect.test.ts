/**
 * The Connect-style middleware against real node:http servers on 127.0.0.1 and real fetch
 * calls, once per store (memory, SQLite).
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { sha256Hex } from "../../src/core/keys.js";
import type { Stores } from "../../src/contracts/stores.js";
import { idempotencyMiddleware, type IdempotencyOptions, type IdempotentRequestFields } from "../../src/server.js";
import { deferred, manualClock, serve, storeCases, type Deferred, type Running } from "./support.js";

type Req = IncomingMessage & IdempotentRequestFields;

for (const store of storeCases()) {
  describe(`idempotencyMiddleware on node:http (${store.name} ledger)`, () => {
    let ledger: Stores;
    let clock: ReturnType<typeof manualClock>;
    let server: Running | undefined;
    /** Times the charge handler applied its effect. */
    let effects: number;
    /** Times any handler was entered. */
    let entered: number;
    /** When set, the charge handler waits for it before applying its effect. */
    let hold: Deferred | undefined;
    /** Resolved when the charge handler is entered. */
    let started: Deferred;
    /** When set, the charge handler throws this (before its effect) once. */
    let failNext: Error | undefined;
    /** When set, the next response's `end` destroys the socket instead of sending (a reply lost on the wire). */
    let loseNextReply: boolean;
    /** The ledger's record states when the lost reply was sent. */
    let stateAtSend: Promise<string[]> | undefined;
    /** Resolved when the server sees a response's connection close. */
    let closed: Deferred;

    beforeEach(() => {
      clock = manualClock();
      ledger = store.make(clock.now);
      effects = 0;
      entered = 0;
      hold = undefined;
      started = deferred();
      failNext = undefined;
      loseNextReply = false;
      stateAtSend = undefined;
      closed = deferred();
    });
    afterEach(async () => {
      await server?.close();
      server = undefined;
      await ledger.close();
    });

    /** The application: POST /charges makes a charge; GET /charges lists; POST /bytes answers with binary written in pieces. */
    async function app(req: Req, res: ServerResponse): Promise<void> {
      entered++;
      started.resolve();
      const url = new URL(req.url ?? "/", "http://x");
      if (req.method === "GET") {
        res.setHeader("content-type", "application/json");
        res.end(JSON.stringify({ entered }));
        return;
      }
      if (url.pathname === "/quiet") {
        // Gives up without answering when its client has left; only its first run waits for `hold`.
        if (hold && entered === 1) await hold.promise;
        if (res.destroyed) return;
        res.end("late");
        return;
      }
      if (url.pathname === "/bytes") {
        effects++;
        res.writeHead(200, { "content-type": "application/octet-stream", "x-effect": String(effects) });
        res.write(Buffer.from([0xff, 0x00, 0xfe]));
        res.write("tail-", "utf8");
        res.end("6869", "hex");
        return;
      }
      if (hold) await hold.promise;
      if (failNext) {
        const err = failNext;
        failNext = undefined;
        throw err;
      }
      effects++;
      const body = req.body as { amount?: number } | undefined;
      res.statusCode = 201;
      res.setHeader("content-type", "application/json; charset=utf-8");
      res.setHeader("location", `/charges/ch_${effects}`);
      res.setHeader("set-cookie", "session=secret");
      res.write(`{"id":"ch_${effects}",`);
      res.end(`"amount":${body?.amount ?? "null"},"raw":${req.rawBody?.length ?? -1}}`);
    }

    async function start(options: Partial<IdempotencyOptions<IncomingMessage>> = {}): Promise<string> {
      const idempotency = idempotencyMiddleware({ ledger, now: clock.now, ...options });
      server = await serve((req, res) => {
        res.once("close", () => closed.resolve());
        if (loseNextReply) {
          // Outermost: the response is produced and stored, then the connection dies instead of carrying it.
          loseNextReply = false;
          res.end = (() => {
            // What the ledger held at the moment the response went out (both stores read synchronously on call).
            stateAtSend = ledger.calls.list().then((records) => records.map((r) => r.state));
            res.socket?.destroy();
            return res;
          }) as typeof res.end;
        }
        void idempotency(req, res, () => app(req, res));
      });
      return server.url;
    }

    const post = (url: string, key: string | undefined, body: unknown, headers: Record<string, string> = {}) =>
      fetch(`${url}/charges`, {
        method: "POST",
        headers: { "content-type": "application/json", ...(key === undefined ? {} : { "Idempotency-Key": key }), ...headers },
        body: JSON.stringify(body),
      });

    it("replays the first response for the same key: handler ran once, same status and body, Idempotent-Replayed", async () => {
      const url = await start();
      const first = await post(url, "key-1", { amount: 500 });
      const firstBody = await first.text();
      expect(first.status).toBe(201);
      expect(first.headers.get("idempotent-replayed")).toBeNull();
      expect(JSON.parse(firstBody)).toEqual({ id: "ch_1", amount: 500, raw: 14 });

      const second = await post(url, "key-1", { amount: 500 });
      expect(second.status).toBe(201);
      expect(await second.text()).toBe(firstBody);
      expect(second.headers.get("idempotent-replayed")).toBe("true");
      expect(second.headers.get("content-type")).toBe("application/json; charset=utf-8");
      expect(second.headers.get("location")).toBe("/charges/ch_1");
      // Cookies are never replayed.
      expect(second.headers.get("set-cookie")).toBeNull();
      expect(effects).toBe(1);
    });

    it("stores the record under the client's tenant with the route as tool, and never the request body", async () => {
      const url = await start();
      await (await post(url, "key-rec", { amount: 777 }, { authorization: "Bearer abc" })).text();
      const record = await ledger.calls.get(`http:${sha256Hex("Bearer abc")}`, "key-rec");
      expect(record).toMatchObject({ state: "completed", tool: "http:POST /charges", effect: "write", inputRedacted: true });
      expect(JSON.stringify(record?.input)).not.toContain("777");
    });

    it("replays a binary body written in pieces (Buffer, string, hex) byte for byte", async () => {
      const url = await start();
      const send = () => fetch(`${url}/bytes`, { method: "POST", headers: { "Idempotency-Key": "bin-1" } });
      const first = await send();
      const firstBytes = Buffer.from(await first.arrayBuffer());
      expect(firstBytes).toEqual(Buffer.concat([Buffer.from([0xff, 0x00, 0xfe]), Buffer.from("tail-"), Buffer.from("hi")]));
      const second = await send();
      expect(second.headers.get("idempotent-replayed")).toBe("true");
      expect(second.headers.get("x-effect")).toBe("1");
      expect(Buffer.from(await second.arrayBuffer())).toEqual(firstBytes);
      expect(effects).toBe(1);
    });

    it("answers a concurrent duplicate with 409 and Retry-After while the first runs, then replays", async () => {
      const url = await start();
      hold = deferred();
      const first = post(url, "key-c", { amount: 100 });
      await started.promise;

      const twin = await post(url, "key-c", { amount: 100 });
      expect(twin.status).toBe(409);
      expect(twin.headers.get("retry-after")).toBe("1");
      expect(twin.headers.get("content-type")).toBe("application/problem+json");
      expect(await twin.json()).toMatchObject({ status: 409, code: "idempotency_key_in_use" });
      expect(entered).toBe(1);

      hold.resolve();
      const done = await first;
      expect(done.status).toBe(201);
      const firstBody = await done.text();
      const later = await post(url, "key-c", { amount: 100 });
      expect(later.headers.get("idempotent-replayed")).toBe("true");
      expect(await later.text()).toBe(firstBody);
      expect(effects).toBe(1);
    });

    it("rejects the same key with a different body or path with 422 naming the mismatch, never the first result", async () => {
      const url = await start();
      await (await post(url, "key-m", { amount: 500 })).text();

      const otherBody = await post(url, "key-m", { amount: 9999 });
      expect(otherBody.status).toBe(422);
      const problem = (await otherBody.json()) as Record<string, unknown>;
      expect(problem).toMatchObject({ code: "idempotency_key_mismatch", mismatch: ["body"] });
      expect(JSON.stringify(problem)).not.toContain("ch_1");

      const otherPath = await fetch(`${url}/refunds`, {
        method: "POST", headers: { "content-type": "application/json", "Idempotency-Key": "key-m" }, body: JSON.stringify({ amount: 500 }),
      });
      expect(otherPath.status).toBe(422);
      expect(await otherPath.json()).toMatchObject({ mismatch: ["path"] });
      expect(effects).toBe(1);
    });

    it("treats JSON bodies that differ only in key order and spacing as the same request", async () => {
      const url = await start();
      const send = (raw: string) => fetch(`${url}/charges`, { method: "POST", headers: { "content-type": "application/json", "Idempotency-Key": "key-j" }, body: raw });
      const first = await (await send('{"amount":5,"currency":"eur"}')).text();
      const again = await send('{ "currency": "eur",\n  "amount": 5 }');
      expect(again.headers.get("idempotent-replayed")).toBe("true");
      expect(await again.text()).toBe(first);
      expect(effects).toBe(1);
    });

    it("answers 400 naming the header when a required key is missing, and runs nothing", async () => {
      const url = await start();
      const res = await post(url, undefined, { amount: 1 });
      expect(res.status).toBe(400);
      expect(await res.json()).toMatchObject({ code: "idempotency_key_missing", header: "Idempotency-Key" });
      expect(entered).toBe(0);
    });

    it("answers 400 to an empty key or one longer than 255 characters, and accepts 255", async () => {
      const url = await start();
      const long = await post(url, "k".repeat(256), { amount: 1 });
      expect(long.status).toBe(400);
      expect(await long.json()).toMatchObject({ code: "idempotency_key_invalid" });
      const empty = await post(url, "", { amount: 1 });
      expect(empty.status).toBe(400);
      expect(await empty.json()).toMatchObject({ code: "idempotency_key_invalid" });
      expect(entered).toBe(0);
      const max = await post(url, "k".repeat(255), { amount: 1 });
      expect(max.status).toBe(201);
      expect(effects).toBe(1);
    });

    it("answers 400 to invalid JSON under a JSON content type, and runs nothing", async () => {
      const url = await start();
      const res = await fetch(`${url}/charges`, { method: "POST", headers: { "content-type": "application/json", "Idempotency-Key": "key-bad" }, body: "{oops" });
      expect(res.status).toBe(400);
      expect(await res.json()).toMatchObject({ code: "invalid_json" });
      expect(entered).toBe(0);
    });

    it("scopes keys per client: two Authorization headers with the same key both run, each gets its own response", async () => {
      const url = await start();
      const alice = await (await post(url, "shared", { amount: 10 }, { authorization: "Bearer alice" })).json();
      const bob = await (await post(url, "shared", { amount: 20 }, { authorization: "Bearer bob" })).json();
      expect(effects).toBe(2);
      expect(alice).toMatchObject({ id: "ch_1", amount: 10 });
      expect(bob).toMatchObject({ id: "ch_2", amount: 20 });
      expect(await (await post(url, "shared", { amount: 10 }, { authorization: "Bearer alice" })).json()).toEqual(alice);
      expect(await (await post(url, "shared", { amount: 20 }, { authorization: "Bearer bob" })).json()).toEqual(bob);
      expect(effects).toBe(2);
    });

    it("forgets a key after ttlMs: the expired key is removed and the request runs again", async () => {
      const url = await start({ ttlMs: 60_000 });
      const first = await (await post(url, "key-t", { amount: 1 })).json();
      clock.advance(59_000);
      expect((await post(url, "key-t", { amount: 1 })).headers.get("idempotent-replayed")).toBe("true");
      expect(effects).toBe(1);
      clock.advance(1_000);
      const after = await post(url, "key-t", { amount: 2 });
      expect(after.status).toBe(201);
      expect(after.headers.get("idempotent-replayed")).toBeNull();
      expect(await after.json()).toMatchObject({ id: "ch_2", amount: 2 });
      expect(first).toMatchObject({ id: "ch_1" });
      expect(effects).toBe(2);
    });

    it("keeps a reply lost on the wire: the client sees a socket error, the retry gets the stored response, effect once", async () => {
      const url = await start();
      loseNextReply = true;
      await expect(post(url, "key-lost", { amount: 42 })).rejects.toThrow();
      expect(effects).toBe(1);
      // Stored before sent.
      expect(await stateAtSend).toEqual(["completed"]);
      expect((await ledger.calls.list({ state: "completed" })).map((r) => r.key)).toEqual(["key-lost"]);

      const retry = await post(url, "key-lost", { amount: 42 });
      expect(retry.status).toBe(201);
      expect(retry.headers.get("idempotent-replayed")).toBe("true");
      expect(await retry.json()).toEqual({ id: "ch_1", amount: 42, raw: 13 });
      expect(effects).toBe(1);
    });

    it("releases the key when the handler throws: 500, nothing stored, the retry runs", async () => {
      const errors: unknown[] = [];
      const url = await start({ onError: (err) => errors.push(err) });
      const boom = new Error("database down");
      failNext = boom;
      const failed = await post(url, "key-x", { amount: 3 });
      expect(failed.status).toBe(500);
      expect(await failed.json()).toMatchObject({ code: "handler_failed" });
      expect(errors).toEqual([boom]);
      expect(await ledger.calls.list()).toEqual([]);

      const retry = await post(url, "key-x", { amount: 3 });
      expect(retry.status).toBe(201);
      expect(retry.headers.get("idempotent-replayed")).toBeNull();
      expect(entered).toBe(2);
      expect(effects).toBe(1);
    });

    it("releases the key when the response is a 5xx, so the retry runs", async () => {
      const idempotency = idempotencyMiddleware({ ledger, now: clock.now });
      let calls = 0;
      server = await serve((req, res) => {
        void idempotency(req, res, () => {
          calls++;
          res.statusCode = calls === 1 ? 503 : 200;
          res.end(calls === 1 ? "busy" : "ok");
        });
      });
      const send = () => fetch(`${server!.url}/jobs`, { method: "POST", headers: { "Idempotency-Key": "key-5" }, body: "x" });
      expect((await send()).status).toBe(503);
      expect(await ledger.calls.list()).toEqual([]);
      const retry = await send();
      expect(retry.status).toBe(200);
      expect(await retry.text()).toBe("ok");
      expect((await send()).headers.get("idempotent-replayed")).toBe("true");
      expect(calls).toBe(2);
    });

    it("keeps the key while a handler whose client left is still running (409), then stores its response for the retry", async () => {
      const url = await start();
      hold = deferred();
      const abort = new AbortController();
      const first = fetch(`${url}/charges`, {
        method: "POST", signal: abort.signal, headers: { "content-type": "application/json", "Idempotency-Key": "key-gone" }, body: JSON.stringify({ amount: 8 }),
      });
      const outcome = first.then(() => "answered", () => "aborted");
      await started.promise;
      // The client gives up (a timeout) while the handler is still applying the effect.
      abort.abort();
      expect(await outcome).toBe("aborted");
      await closed.promise;

      const retryWhileRunning = await post(url, "key-gone", { amount: 8 });
      expect(retryWhileRunning.status).toBe(409);
      hold.resolve();
      await vi.waitFor(async () => expect((await ledger.calls.list({ state: "completed" })).map((r) => r.key)).toEqual(["key-gone"]), { timeout: 10_000 });

      const retry = await post(url, "key-gone", { amount: 8 });
      expect(retry.headers.get("idempotent-replayed")).toBe("true");
      expect(await retry.json()).toMatchObject({ id: "ch_1", amount: 8 });
      expect(effects).toBe(1);
    });

    it("releases the key once a handler whose client left finishes without responding, so the retry runs", async () => {
      const url = await start();
      hold = deferred();
      const abort = new AbortController();
      const send = (signal?: AbortSignal) => fetch(`${url}/quiet`, { method: "POST", headers: { "Idempotency-Key": "key-quiet" }, body: "x", ...(signal ? { signal } : {}) });
      const outcome = send(abort.signal).then(() => "answered", () => "aborted");
      await started.promise;
      abort.abort();
      expect(await outcome).toBe("aborted");
      await closed.promise;
      expect((await send()).status).toBe(409);
      hold.resolve();
      await vi.waitFor(async () => expect(await ledger.calls.list()).toEqual([]), { timeout: 10_000 });
      const retry = await send();
      expect(retry.status).toBe(200);
      expect(await retry.text()).toBe("late");
      expect(retry.headers.get("idempotent-replayed")).toBeNull();
      expect(entered).toBe(2);
    });

    it("lets a retry take the key over once the claim's lease runs out (holder gone, never answering)", async () => {
      const url = await start({ leaseMs: 300 });
      hold = deferred(); // never resolved: the first run hangs, as in a stuck or dead process
      const abort = new AbortController();
      const send = (signal?: AbortSignal) => fetch(`${url}/quiet`, { method: "POST", headers: { "Idempotency-Key": "key-lease" }, body: "x", ...(signal ? { signal } : {}) });
      const outcome = send(abort.signal).then(() => "answered", () => "aborted");
      await started.promise;
      abort.abort();
      expect(await outcome).toBe("aborted");
      await closed.promise;
      expect((await send()).status).toBe(409);
      // The memory ledger judges leases by the test clock; SQLite by the real one (300 ms).
      clock.advance(300);
      let retry: Response | undefined;
      await vi.waitFor(async () => {
        retry = await send();
        expect(retry.status).toBe(200);
      }, { timeout: 10_000, interval: 50 });
      expect(await retry!.text()).toBe("late");
      expect(entered).toBe(2);
      expect((await send()).headers.get("idempotent-replayed")).toBe("true");
    });

    it("passes GET through untouched, even with a key, and stores nothing", async () => {
      const url = await start();
      const get = (key?: string) => fetch(`${url}/charges`, { headers: key === undefined ? {} : { "Idempotency-Key": key } });
      expect(await (await get()).json()).toEqual({ entered: 1 });
      expect(await (await get("key-g")).json()).toEqual({ entered: 2 });
      const again = await get("key-g");
      expect(again.headers.get("idempotent-replayed")).toBeNull();
      expect(await again.json()).toEqual({ entered: 3 });
      expect(await ledger.calls.list()).toEqual([]);
    });

    it("with required: false, runs keyless POSTs every time and still honours a key that is sent", async () => {
      const url = await start({ required: false });
      expect((await post(url, undefined, { amount: 1 })).status).toBe(201);
      expect((await post(url, undefined, { amount: 1 })).status).toBe(201);
      expect(effects).toBe(2);
      await (await post(url, "key-opt", { amount: 1 })).text();
      expect((await post(url, "key-opt", { amount: 1 })).headers.get("idempotent-replayed")).toBe("true");
      expect(effects).toBe(3);
    });

    it("answers 413 to a body over maxBodyBytes, and runs nothing", async () => {
      const url = await start({ maxBodyBytes: 16 });
      const res = await post(url, "key-big", { amount: 1, note: "x".repeat(64) });
      expect(res.status).toBe(413);
      expect(await res.json()).toMatchObject({ code: "body_too_large" });
      expect(entered).toBe(0);
      expect(await ledger.calls.list()).toEqual([]);
    });

    it("fingerprints a body a parser already read (Express-style req.body) by canonical JSON", async () => {
      const idempotency = idempotencyMiddleware({ ledger, now: clock.now });
      server = await serve((req: Req, res) => {
        // A body parser mounted before the middleware: reads the stream, leaves req.body.
        const chunks: Buffer[] = [];
        req.on("data", (c: Buffer) => chunks.push(c));
        req.on("end", () => {
          req.body = JSON.parse(Buffer.concat(chunks).toString("utf8"));
          void idempotency(req, res, () => app(req, res));
        });
      });
      const send = (raw: string) => fetch(`${server!.url}/charges`, { method: "POST", headers: { "content-type": "application/json", "Idempotency-Key": "key-p" }, body: raw });
      const first = await send('{"amount":7,"note":"a"}');
      expect(await first.json()).toEqual({ id: "ch_1", amount: 7, raw: -1 });
      expect((await send('{"note":"a","amount":7}')).headers.get("idempotent-replayed")).toBe("true");
      expect((await send('{"note":"b","amount":7}')).status).toBe(422);
      expect(effects).toBe(1);
    });
  });
}
