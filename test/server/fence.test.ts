/**
 * The `Effectgate-Fence` header: gated tools send their fencing token beside the key, and the
 * middleware refuses a request from a holder that lost its lease (a lower fence than the highest
 * it saw for the key) with 409 stale-fence, never running the handler and never replaying the
 * newer holder's response to it. Real node:http servers on 127.0.0.1, per store; Hono too.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import { Hono } from "hono";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { Stores } from "../../src/contracts/stores.js";
import { honoIdempotency, idempotencyMiddleware, type IdempotencyOptions, type IdempotentRequestFields } from "../../src/server.js";
import { deferred, manualClock, serve, storeCases, type Deferred, type Running } from "./support.js";

const TENANT = "http:anonymous";
const STALE_TYPE = /^urn:effectgate:problem:stale-fence$/;

for (const store of storeCases()) {
  describe(`Effectgate-Fence on node:http (${store.name} ledger)`, () => {
    let ledger: Stores;
    let clock: ReturnType<typeof manualClock>;
    let server: Running | undefined;
    /** Handler runs, counted here, and the fence each run was sent with. */
    let runs: (string | undefined)[];
    let hold: Deferred | undefined;
    let started: Deferred;
    let closed: Deferred;
    /** What the middleware told `onError`, by phase. */
    let reported: string[];
    let storeRefused: Deferred;

    beforeEach(() => {
      clock = manualClock();
      ledger = store.make(clock.now);
      runs = [];
      hold = undefined;
      started = deferred();
      closed = deferred();
      reported = [];
      storeRefused = deferred();
    });
    afterEach(async () => {
      await server?.close();
      server = undefined;
      await ledger.close();
    });

    async function start(options: Partial<IdempotencyOptions<IncomingMessage>> = {}): Promise<string> {
      const idempotency = idempotencyMiddleware({
        ledger, now: clock.now, ...options,
        onError: (_err, { phase }) => {
          reported.push(phase);
          if (phase === "store") storeRefused.resolve();
        },
      });
      server = await serve((req: IncomingMessage & IdempotentRequestFields, res: ServerResponse) => {
        res.once("close", () => closed.resolve());
        void idempotency(req, res, async () => {
          const fence = req.headers[(options.fenceHeader ?? "effectgate-fence").toLowerCase()] as string | undefined;
          runs.push(fence);
          started.resolve();
          if (hold && runs.length === 1) await hold.promise;
          // Answers even when its client has left (the late answer of a holder that lost its lease).
          res.statusCode = 201;
          res.setHeader("content-type", "application/json");
          res.end(JSON.stringify({ run: runs.length, fence: fence ?? null }));
        });
      });
      return server.url;
    }

    const send = (url: string, key: string, fence?: string | string[], signal?: AbortSignal, header = "Effectgate-Fence") => {
      const headers = new Headers({ "content-type": "application/json", "Idempotency-Key": key });
      for (const f of fence === undefined ? [] : Array.isArray(fence) ? fence : [fence]) headers.append(header, f);
      return fetch(`${url}/charges`, { method: "POST", headers, body: '{"amount":5}', ...(signal ? { signal } : {}) });
    };

    const replayBody = async (url: string, key: string, fence: string) => (await send(url, key, fence)).text();

    it("refuses a stale fence after a newer one completed: 409 stale-fence, no run, never the newer response", async () => {
      const url = await start();
      const newer = await send(url, "k-stale", "2");
      expect(newer.status).toBe(201);
      const newerBody = await newer.text();
      expect((await ledger.calls.get(TENANT, "k-stale"))?.fence).toBe(2);

      const stale = await send(url, "k-stale", "1");
      expect(stale.status).toBe(409);
      expect(stale.headers.get("content-type")).toBe("application/problem+json");
      expect(stale.headers.get("idempotent-replayed")).toBeNull();
      const problem = await stale.text();
      expect(JSON.parse(problem)).toMatchObject({ status: 409, code: "stale_fence", type: expect.stringMatching(STALE_TYPE), header: "Effectgate-Fence" });
      expect(JSON.parse(problem).detail).toMatch(/lost its lease/);
      expect(problem).not.toContain('"run"');
      expect(runs).toEqual(["2"]);

      // Equal or higher fences, and requests without the header, get the replay as before.
      for (const fence of ["2", "3", undefined]) {
        const again = await send(url, "k-stale", fence);
        expect(again.headers.get("idempotent-replayed"), String(fence)).toBe("true");
        expect(await again.text()).toBe(newerBody);
      }
      expect(runs).toEqual(["2"]);
    });

    it("refuses a stale fence while the newer request runs (not 409 in use), and an equal one gets 409 in use", async () => {
      const url = await start();
      hold = deferred();
      const first = send(url, "k-run", "5");
      await started.promise;
      const stale = await send(url, "k-run", "4");
      expect(stale.status).toBe(409);
      expect(await stale.json()).toMatchObject({ code: "stale_fence" });
      const twin = await send(url, "k-run", "5");
      expect(twin.status).toBe(409);
      expect(await twin.json()).toMatchObject({ code: "idempotency_key_in_use" });
      hold.resolve();
      expect((await first).status).toBe(201);
      expect(runs).toEqual(["5"]);
    });

    it("a newer fence takes over a claim whose lease ran out and runs once; the older holder's late answer is not stored", async () => {
      const url = await start({ leaseMs: 300 });
      hold = deferred();
      const abort = new AbortController();
      const older = send(url, "k-take", "1", abort.signal).then(() => "answered", () => "aborted");
      await started.promise;
      abort.abort(); // the older holder's request is gone; its handler still runs
      expect(await older).toBe("aborted");
      await closed.promise;
      const claim = await ledger.calls.get(TENANT, "k-take");
      clock.advance(300);
      while ((await ledger.calls.now()) < claim!.leaseExpiresAt!) await new Promise((r) => setTimeout(r, 5));

      const newer = await send(url, "k-take", "2");
      expect(newer.status).toBe(201);
      const newerBody = await newer.text();
      expect(JSON.parse(newerBody)).toEqual({ run: 2, fence: "2" });
      expect(await ledger.calls.get(TENANT, "k-take")).toMatchObject({ state: "completed", fence: 2 });

      hold.resolve(); // the older handler answers late: its answer must not replace the newer one
      await storeRefused.promise;
      expect(reported).toEqual(["store"]);
      const replay = await send(url, "k-take", "2");
      expect(await replay.text()).toBe(newerBody);
      expect((await send(url, "k-take", "1")).status).toBe(409);
      expect(runs).toEqual(["1", "2"]);
    });

    it("the same fence retried after its own claim was taken over is not taken for stale (the store's fence went up by one)", async () => {
      const url = await start({ leaseMs: 300 });
      hold = deferred();
      const abort = new AbortController();
      const first = send(url, "k-same", "7", abort.signal).then(() => "answered", () => "aborted");
      await started.promise;
      abort.abort();
      expect(await first).toBe("aborted");
      await closed.promise;
      const claim = await ledger.calls.get(TENANT, "k-same");
      clock.advance(300);
      while ((await ledger.calls.now()) < claim!.leaseExpiresAt!) await new Promise((r) => setTimeout(r, 5));

      const retry = await send(url, "k-same", "7");
      expect(retry.status).toBe(201);
      const body = await retry.text();
      // A take-over raises the stored fence by at least one (the store's rule): 8, while the highest sent is 7.
      expect((await ledger.calls.get(TENANT, "k-same"))?.fence).toBe(8);
      const again = await send(url, "k-same", "7");
      expect(again.status).toBe(201);
      expect(again.headers.get("idempotent-replayed")).toBe("true");
      expect(await again.text()).toBe(body);
      expect((await send(url, "k-same", "6")).status).toBe(409);
      hold.resolve();
      await storeRefused.promise;
      expect(await replayBody(url, "k-same", "7")).toBe(body);
      expect(runs).toEqual(["7", "7"]);
    });

    it("records the first request's fence on the claim", async () => {
      const url = await start();
      await (await send(url, "k-rec", "42")).text();
      expect(await ledger.calls.get(TENANT, "k-rec")).toMatchObject({ state: "completed", fence: 42 });
      await (await send(url, "k-none")).text();
      expect(await ledger.calls.get(TENANT, "k-none")).toMatchObject({ state: "completed", fence: 1 });
    });

    it("answers 400 naming the header to a fence that is not one positive integer, and runs nothing", async () => {
      const url = await start();
      for (const [i, bad] of ["0", "-1", "1.5", "abc", "", "1e3", "+3", "0x10", "9007199254740993", ["1", "2"]].entries()) {
        const res = await send(url, `k-bad-${i}`, bad);
        expect(res.status, JSON.stringify(bad)).toBe(400);
        expect(await res.json()).toMatchObject({ code: "fence_invalid", header: "Effectgate-Fence" });
      }
      expect(runs).toEqual([]);
      expect(await ledger.calls.list()).toEqual([]);
    });

    it("takes the fence from the fenceHeader option, and ignores a fence on requests it does not handle", async () => {
      const url = await start({ fenceHeader: "X-Lease-Fence" });
      expect((await (await send(url, "k-opt", "3", undefined, "X-Lease-Fence")).text())).toContain('"run":1');
      expect((await send(url, "k-opt", "2", undefined, "X-Lease-Fence")).status).toBe(409);
      // The default header name means nothing here.
      expect((await send(url, "k-opt", "1")).headers.get("idempotent-replayed")).toBe("true");
      const get = await fetch(`${url}/charges`, { headers: { "Effectgate-Fence": "nope", "X-Lease-Fence": "nope" } });
      expect(get.status).toBe(201);
      expect(runs).toHaveLength(2);
    });
  });
}

describe("Effectgate-Fence on Hono", () => {
  it("refuses a stale fence with 409 stale-fence and a bad one with 400, running the handler once", async () => {
    const { memoryLedger } = await import("../../src/stores/memory/index.js");
    const ledger = memoryLedger();
    let runs = 0;
    const app = new Hono();
    app.use("*", honoIdempotency({ ledger }));
    app.post("/charges", (c) => c.json({ run: ++runs }, 201));
    const send = (fence: string) =>
      app.request("/charges", { method: "POST", headers: { "Idempotency-Key": "h-f", "Effectgate-Fence": fence }, body: "x" });
    expect((await send("3")).status).toBe(201);
    const stale = await send("2");
    expect(stale.status).toBe(409);
    const problem = (await stale.json()) as { code: string; type: string };
    expect(problem.code).toBe("stale_fence");
    expect(problem.type).toMatch(STALE_TYPE);
    expect((await send("3")).headers.get("idempotent-replayed")).toBe("true");
    expect((await send("x")).status).toBe(400);
    expect(runs).toBe(1);
    await ledger.close();
  });
});
