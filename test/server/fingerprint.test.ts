/**
 * The request-body fingerprint: JSON bodies compare by their canonical text, computed from the
 * lexemes (no precision lost to JSON.parse), other bodies byte for byte. Real node:http servers
 * and a Hono app, per store; hostile bodies among them.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import { Hono } from "hono";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { Stores } from "../../src/contracts/stores.js";
import { honoIdempotency, idempotencyMiddleware, type IdempotentRequestFields } from "../../src/server.js";
import { manualClock, serve, storeCases, type Running } from "./support.js";

type Req = IncomingMessage & IdempotentRequestFields;

/** Pairs of JSON bodies that are the same request: the second is a replay of the first. */
const SAME: readonly (readonly [string, string])[] = [
  ['{"amount":1.0}', '{"amount":1}'],
  ['{"amount":1e0}', '{"amount":10E-1}'],
  ['{"amount":0.1e1}', '{"amount":100e-2}'],
  ['{"amount":-0}', '{"amount":0}'],
  ['{"amount":0e999}', '{"amount":0.000}'],
  ['{"amount":12345678901234567890}', '{"amount":1234567890123456789e1}'],
  ['{"b":[1,2],"a":"x"}', '{ "a" : "x" , "b" : [ 1.00 , 2e0 ] }'],
  ['{"__proto__":{"admin":true},"b":1}', '{"b":1,"__proto__":{"admin":true}}'],
  ['{"a":1,"a":2}', '{"a":2}'], // duplicate keys: the last one counts, as JSON.parse (and so the handler) reads it
];

/** Pairs of JSON bodies that are different requests: the second gets 422. */
const DIFFERENT: readonly (readonly [string, string])[] = [
  ['{"account":12345678901234567890}', '{"account":12345678901234567891}'],
  ['{"amount":9007199254740993}', '{"amount":9007199254740992}'],
  ['{"amount":0.1}', '{"amount":0.10000000000000000001}'],
  ['{"amount":1e400}', '{"amount":1e401}'],
  ['{"amount":1e-400}', '{"amount":2e-400}'],
  [`{"amount":1e${"9".repeat(400)}}`, `{"amount":1e${"9".repeat(399)}8}`],
  ['{"__proto__":{"admin":true}}', "{}"],
  ['{"s":"a\\u0000b"}', '{"s":"a"}'],
  ['{"s":"\\ud800"}', '{"s":"\\udbff"}'],
  ['{"amount":1}', '{"amount":"1"}'],
];

for (const store of storeCases()) {
  describe(`the body fingerprint on node:http (${store.name} ledger)`, () => {
    let ledger: Stores;
    let server: Running | undefined;
    let runs: number;
    let url: string;
    let keySeq = 0;

    beforeEach(async () => {
      const clock = manualClock();
      ledger = store.make(clock.now);
      runs = 0;
      const idempotency = idempotencyMiddleware({ ledger, now: clock.now });
      server = await serve((req: Req, res: ServerResponse) => {
        void idempotency(req, res, () => {
          runs++;
          res.statusCode = 201;
          res.setHeader("content-type", "application/json");
          // What the handler sees: JSON.parse's view of the body.
          res.end(JSON.stringify({ run: runs, body: req.body === undefined ? null : req.body }));
        });
      });
      url = server.url;
    });
    afterEach(async () => {
      await server?.close();
      server = undefined;
      await ledger.close();
    });

    const send = (key: string, body: string, type = "application/json") =>
      fetch(`${url}/charges`, { method: "POST", headers: { "content-type": type, "Idempotency-Key": key }, body });

    it("answers 422 to a 20-digit number that differs from the first only past double precision", async () => {
      const first = await send("acct", '{"account":12345678901234567890}');
      expect(first.status).toBe(201);
      const second = await send("acct", '{"account":12345678901234567891}');
      expect(second.status).toBe(422);
      expect(await second.json()).toMatchObject({ code: "idempotency_key_mismatch", mismatch: ["body"] });
      expect(runs).toBe(1);
    });

    it("replays bodies that are the same JSON value written differently (numbers, spacing, key order)", async () => {
      for (const [a, b] of SAME) {
        const key = `same-${++keySeq}`;
        const first = await send(key, a);
        expect(first.status, a).toBe(201);
        const firstBody = await first.text();
        const second = await send(key, b);
        expect(second.status, `${a} then ${b}`).toBe(201);
        expect(second.headers.get("idempotent-replayed"), `${a} then ${b}`).toBe("true");
        expect(await second.text()).toBe(firstBody);
      }
      expect(runs).toBe(SAME.length);
    });

    it("answers 422 to bodies that are different JSON values, however close (hostile numbers, __proto__, NUL, lone surrogates)", async () => {
      for (const [a, b] of DIFFERENT) {
        const key = `diff-${++keySeq}`;
        expect((await send(key, a)).status, a).toBe(201);
        const second = await send(key, b);
        expect(second.status, `${a} then ${b}`).toBe(422);
        expect(await second.json()).toMatchObject({ code: "idempotency_key_mismatch", mismatch: ["body"] });
      }
      expect(runs).toBe(DIFFERENT.length);
    });

    it("still gives the handler JSON.parse's view of the body", async () => {
      const res = await send("view", '{"__proto__":{"admin":true},"n":1.50}');
      const seen = (await res.json()) as { body: Record<string, unknown> };
      expect(Object.keys(seen.body)).toEqual(["__proto__", "n"]);
      expect(seen.body.n).toBe(1.5);
    });

    it("answers 400 to invalid JSON under a JSON content type: a raw NUL in a string, a trailing comma, a lone minus", async () => {
      for (const bad of ['{"s":"a\u0000b"}', '{"a":1,}', '{"a":-}', '{"a":01}', "\uFEFF{}"]) {
        const res = await send(`bad-${++keySeq}`, bad);
        expect(res.status, JSON.stringify(bad)).toBe(400);
        expect(await res.json()).toMatchObject({ code: "invalid_json" });
      }
      expect(runs).toBe(0);
    });

    it("answers a clear 400 to JSON nested deeper than the limit, and accepts it up to the limit", async () => {
      const deep = (n: number) => "[".repeat(n) + "]".repeat(n);
      const tooDeep = await send("deep-1", deep(100_000));
      expect(tooDeep.status).toBe(400);
      expect(await tooDeep.json()).toMatchObject({ code: "json_too_deep" });
      const objects = await send("deep-2", '{"a":'.repeat(5_000) + "1" + "}".repeat(5_000));
      expect(objects.status).toBe(400);
      expect(runs).toBe(0);
      // Brackets inside strings do not count.
      expect((await send("deep-3", JSON.stringify({ s: "[".repeat(10_000) }))).status).toBe(201);
      expect((await send("deep-4", deep(512))).status).toBe(201);
      expect(runs).toBe(2);
      expect(await ledger.calls.list({ key: "deep-1" })).toEqual([]);
    });

    it("keeps comparing non-JSON bodies byte for byte", async () => {
      expect((await send("text", "1.0", "text/plain")).status).toBe(201);
      expect((await send("text", "1.0", "text/plain")).headers.get("idempotent-replayed")).toBe("true");
      expect((await send("text", "1", "text/plain")).status).toBe(422);
      expect((await send("text", "1.00", "text/plain")).status).toBe(422);
      // Not even spacing is forgiven outside JSON.
      expect((await send("form", "a=1&b=2", "application/x-www-form-urlencoded")).status).toBe(201);
      expect((await send("form", "b=2&a=1", "application/x-www-form-urlencoded")).status).toBe(422);
      expect(runs).toBe(2);
    });

    it("answers a huge exponent quickly, and tells 1e(200 000 nines) from 1e(one less)", async () => {
      const nines = "9".repeat(200_000);
      const started = Date.now();
      expect((await send("exp", `{"x":1e${nines}}`)).status).toBe(201);
      expect((await send("exp", `{"x":1e${nines.slice(1)}8}`)).status).toBe(422);
      expect((await send("exp", `{"x":10e${nines.slice(1)}8}`)).headers.get("idempotent-replayed")).toBe("true");
      expect(Date.now() - started).toBeLessThan(10_000);
    });
  });
}

describe("the body fingerprint on Hono", () => {
  it("answers 422 to 20-digit numbers that JSON.parse cannot tell apart, and replays 1.0 as 1", async () => {
    const { memoryLedger } = await import("../../src/stores/memory/index.js");
    const ledger = memoryLedger();
    let runs = 0;
    const app = new Hono();
    app.use("*", honoIdempotency({ ledger }));
    app.post("/charges", async (c) => {
      runs++;
      return c.json({ run: runs, body: await c.req.json() }, 201);
    });
    const send = (key: string, body: string) =>
      app.request("/charges", { method: "POST", headers: { "content-type": "application/json", "Idempotency-Key": key }, body });
    expect((await send("h-acct", '{"account":12345678901234567890}')).status).toBe(201);
    expect((await send("h-acct", '{"account":12345678901234567891}')).status).toBe(422);
    expect((await send("h-one", '{"amount":1.0}')).status).toBe(201);
    expect((await send("h-one", '{"amount":10E-1}')).headers.get("idempotent-replayed")).toBe("true");
    const deep = await send("h-deep", "[".repeat(100_000) + "]".repeat(100_000));
    expect(deep.status).toBe(400);
    expect(await deep.json()).toMatchObject({ code: "json_too_deep" });
    expect(runs).toBe(2);
    await ledger.close();
  });
});
