/** The Hono adapter, through `app.request(...)`, once per store (memory, SQLite). */
import { Hono } from "hono";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { Stores } from "../../src/contracts/stores.js";
import { honoIdempotency } from "../../src/server.js";
import { deferred, manualClock, storeCases, type Deferred } from "./support.js";

for (const store of storeCases()) {
  describe(`honoIdempotency (${store.name} ledger)`, () => {
    let ledger: Stores;
    let clock: ReturnType<typeof manualClock>;
    let effects: number;
    let entered: number;
    let hold: Deferred | undefined;
    let started: Deferred;
    let failNext: boolean;
    let app: Hono;

    beforeEach(() => {
      clock = manualClock();
      ledger = store.make(clock.now);
      effects = 0;
      entered = 0;
      hold = undefined;
      started = deferred();
      failNext = false;
      app = new Hono();
      app.onError((_err, c) => c.json({ error: "internal" }, 500));
      app.use("*", honoIdempotency({ ledger, now: clock.now }));
      app.post("/charges", async (c) => {
        entered++;
        started.resolve();
        const body = await c.req.json<{ amount: number }>();
        if (hold) await hold.promise;
        if (failNext) {
          failNext = false;
          throw new Error("database down");
        }
        effects++;
        return c.json({ id: `ch_${effects}`, amount: body.amount }, 201, { location: `/charges/ch_${effects}` });
      });
      app.get("/charges", (c) => {
        entered++;
        return c.json({ entered });
      });
    });
    afterEach(async () => {
      await ledger.close();
    });

    const post = async (key: string | undefined, body: unknown, headers: Record<string, string> = {}) =>
      app.request("/charges", {
        method: "POST",
        headers: { "content-type": "application/json", ...(key === undefined ? {} : { "Idempotency-Key": key }), ...headers },
        body: JSON.stringify(body),
      });

    it("replays the first response for the same key: handler ran once, same status and body, Idempotent-Replayed", async () => {
      const first = await post("h-1", { amount: 500 });
      const firstBody = await first.text();
      expect(first.status).toBe(201);
      expect(JSON.parse(firstBody)).toEqual({ id: "ch_1", amount: 500 });
      expect(first.headers.get("idempotent-replayed")).toBeNull();

      const second = await post("h-1", { amount: 500 });
      expect(second.status).toBe(201);
      expect(await second.text()).toBe(firstBody);
      expect(second.headers.get("idempotent-replayed")).toBe("true");
      expect(second.headers.get("location")).toBe("/charges/ch_1");
      expect(effects).toBe(1);
      expect(await ledger.calls.get("http:anonymous", "h-1")).toMatchObject({ state: "completed", tool: "http:POST /charges" });
    });

    it("answers a concurrent duplicate with 409 and Retry-After while the first runs", async () => {
      hold = deferred();
      const first = post("h-c", { amount: 1 });
      await started.promise;
      const twin = await post("h-c", { amount: 1 });
      expect(twin.status).toBe(409);
      expect(twin.headers.get("retry-after")).toBe("1");
      expect(await twin.json()).toMatchObject({ code: "idempotency_key_in_use" });
      hold.resolve();
      expect((await first).status).toBe(201);
      expect((await post("h-c", { amount: 1 })).headers.get("idempotent-replayed")).toBe("true");
      expect(effects).toBe(1);
      expect(entered).toBe(1);
    });

    it("rejects the same key with a different body with 422 naming the mismatch", async () => {
      await (await post("h-m", { amount: 1 })).text();
      const other = await post("h-m", { amount: 2 });
      expect(other.status).toBe(422);
      const problem = await other.text();
      expect(JSON.parse(problem)).toMatchObject({ code: "idempotency_key_mismatch", mismatch: ["body"] });
      expect(problem).not.toContain("ch_1");
      expect(effects).toBe(1);
    });

    it("answers 400 to a missing or overlong key, and runs nothing", async () => {
      const missing = await post(undefined, { amount: 1 });
      expect(missing.status).toBe(400);
      expect(await missing.json()).toMatchObject({ code: "idempotency_key_missing", header: "Idempotency-Key" });
      const long = await post("k".repeat(256), { amount: 1 });
      expect(long.status).toBe(400);
      expect(await long.json()).toMatchObject({ code: "idempotency_key_invalid" });
      expect(entered).toBe(0);
    });

    it("answers 400 to invalid JSON under a JSON content type", async () => {
      const res = await app.request("/charges", { method: "POST", headers: { "content-type": "application/json", "Idempotency-Key": "h-j" }, body: "{oops" });
      expect(res.status).toBe(400);
      expect(await res.json()).toMatchObject({ code: "invalid_json" });
      expect(entered).toBe(0);
    });

    it("releases the key when the handler throws, so the retry runs", async () => {
      failNext = true;
      const failed = await post("h-x", { amount: 3 });
      expect(failed.status).toBe(500);
      expect(await ledger.calls.list()).toEqual([]);
      const retry = await post("h-x", { amount: 3 });
      expect(retry.status).toBe(201);
      expect(retry.headers.get("idempotent-replayed")).toBeNull();
      expect(entered).toBe(2);
      expect(effects).toBe(1);
    });

    it("scopes keys per client (Authorization)", async () => {
      const a = await (await post("same", { amount: 1 }, { authorization: "Bearer a" })).json();
      const b = await (await post("same", { amount: 2 }, { authorization: "Bearer b" })).json();
      expect(a).toEqual({ id: "ch_1", amount: 1 });
      expect(b).toEqual({ id: "ch_2", amount: 2 });
      expect(effects).toBe(2);
    });

    it("forgets a key after the default 24 h", async () => {
      await (await post("h-t", { amount: 1 })).text();
      clock.advance(24 * 60 * 60 * 1000);
      const again = await post("h-t", { amount: 1 });
      expect(again.headers.get("idempotent-replayed")).toBeNull();
      expect(effects).toBe(2);
    });

    it("passes GET through untouched", async () => {
      const get = () => app.request("/charges", { headers: { "Idempotency-Key": "h-g" } });
      expect(await (await get()).json()).toEqual({ entered: 1 });
      expect(await (await get()).json()).toEqual({ entered: 2 });
      expect(await ledger.calls.list()).toEqual([]);
    });
  });
}
