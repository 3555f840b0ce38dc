/**
 * The Hono adapter stops reading a body at `maxBodyBytes`: a chunked body (no Content-Length)
 * is read as a stream and refused with 413 as soon as more than the limit arrived, without
 * reading or buffering the rest. Through Hono's own `app.fetch`, with a body that counts what is
 * pulled from it.
 */
import { Hono } from "hono";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { Stores } from "../../src/contracts/stores.js";
import { memoryLedger } from "../../src/stores/memory/index.js";
import { honoIdempotency } from "../../src/server.js";

const LIMIT = 1024;
const CHUNK = 16 * 1024;

/** A body of `total` bytes in 16 KiB chunks, made only as they are pulled; counts what was pulled. */
function countingBody(total: number) {
  const meter = { pulled: 0, cancelled: false };
  const stream = new ReadableStream<Uint8Array>({
    pull(controller) {
      if (meter.pulled >= total) {
        controller.close();
        return;
      }
      const size = Math.min(CHUNK, total - meter.pulled);
      meter.pulled += size;
      controller.enqueue(new Uint8Array(size).fill(0x61));
    },
    cancel() {
      meter.cancelled = true;
    },
  }, { highWaterMark: 0 });
  return { stream, meter };
}

describe("honoIdempotency body limit", () => {
  let ledger: Stores;
  let app: Hono;
  let runs: number;

  beforeEach(() => {
    ledger = memoryLedger();
    runs = 0;
    app = new Hono();
    app.use("*", honoIdempotency({ ledger, maxBodyBytes: LIMIT }));
    app.post("/upload", async (c) => {
      runs++;
      const body = await c.req.text();
      return c.json({ run: runs, length: body.length }, 201);
    });
  });
  afterEach(async () => {
    await ledger.close();
  });

  const request = (body: ReadableStream<Uint8Array> | string, key = "up-1", type = "text/plain") =>
    app.fetch(new Request("http://127.0.0.1/upload", {
      method: "POST",
      headers: { "content-type": type, "Idempotency-Key": key },
      body,
      duplex: "half",
    }));

  it("answers 413 to a chunked body far over the limit after pulling little more than the limit, and cancels the rest", async () => {
    const { stream, meter } = countingBody(64 * 1024 * 1024);
    const res = await request(stream);
    expect(res.status).toBe(413);
    expect(await res.json()).toMatchObject({ code: "body_too_large" });
    expect(meter.pulled).toBeGreaterThan(LIMIT);
    expect(meter.pulled).toBeLessThan(LIMIT + 64 * 1024);
    expect(meter.cancelled).toBe(true);
    expect(runs).toBe(0);
    expect(await ledger.calls.list()).toEqual([]);
  });

  it("reads a chunked body within the limit whole, and the handler still reads it (c.req.text, c.req.json)", async () => {
    const small = countingBody(LIMIT);
    const first = await request(small.stream, "up-2");
    expect(first.status).toBe(201);
    expect(await first.json()).toEqual({ run: 1, length: LIMIT });
    // The same bytes again are a replay; one byte more is over the limit.
    const again = await request("a".repeat(LIMIT), "up-2");
    expect(again.headers.get("idempotent-replayed")).toBe("true");
    const over = countingBody(LIMIT + 1);
    expect((await request(over.stream, "up-3")).status).toBe(413);
    expect(runs).toBe(1);

    const json = new Hono();
    json.use("*", honoIdempotency({ ledger, maxBodyBytes: LIMIT }));
    json.post("/j", async (c) => c.json(await c.req.json(), 201));
    const encoder = new TextEncoder();
    const parts = ['{"amount":', "12345678901234567890", "}"];
    const body = new ReadableStream<Uint8Array>({
      pull(controller) {
        const part = parts.shift();
        if (part === undefined) controller.close();
        else controller.enqueue(encoder.encode(part));
      },
    });
    const res = await json.fetch(new Request("http://127.0.0.1/j", {
      method: "POST", headers: { "content-type": "application/json", "Idempotency-Key": "j-1" }, body, duplex: "half",
    }));
    expect(res.status).toBe(201);
    expect(await res.text()).toBe('{"amount":12345678901234567000}');
  });

  it("uses the body an earlier middleware already read through Hono (c.req.json), limit included", async () => {
    const earlier = new Hono();
    earlier.use("*", async (c, next) => {
      await c.req.json();
      await next();
    });
    earlier.use("*", honoIdempotency({ ledger, maxBodyBytes: LIMIT }));
    earlier.post("/upload", async (c) => c.json({ run: ++runs, body: await c.req.json() }, 201));
    const send = (body: string, key: string) =>
      earlier.request("/upload", { method: "POST", headers: { "content-type": "application/json", "Idempotency-Key": key }, body });
    const first = await send('{"n":1}', "e-1");
    expect(first.status).toBe(201);
    expect(await first.json()).toEqual({ run: 1, body: { n: 1 } });
    expect((await send('{ "n": 1.0 }', "e-1")).headers.get("idempotent-replayed")).toBe("true");
    expect((await send(JSON.stringify({ s: "x".repeat(LIMIT) }), "e-2")).status).toBe(413);
    expect(runs).toBe(1);
  });

  it("still answers 413 from a declared Content-Length without reading the body", async () => {
    const { stream, meter } = countingBody(LIMIT * 4);
    const res = await app.fetch(new Request("http://127.0.0.1/upload", {
      method: "POST", headers: { "content-length": String(LIMIT * 4), "Idempotency-Key": "up-4" }, body: stream, duplex: "half",
    }));
    expect(res.status).toBe(413);
    expect(meter.pulled).toBe(0);
    expect(runs).toBe(0);
  });
});
