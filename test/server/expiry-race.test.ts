/**
 * Expired keys and late writes, with two middleware instances ("two servers") on one ledger.
 *
 * After `remove()` a key's versions restart at 1, so a compare-and-set on the version alone
 * cannot tell a fresh record from the one it meant:
 * - a late `remove(version 2)` of an expired record deleted the fresh record once that reached
 *   version 2 (3 handler runs where 2 are right): `remove` now also compares the claim token;
 * - a late `update(version 1)` from a holder that lost its claim stored its response into the
 *   fresh claim of the same key: the middleware now confirms it still holds the claim first.
 *
 * The interleavings are not left to timing: every ledger write waits for a deterministic
 * scheduler (./schedule.ts), scripted to replay the race or driven by a seeded PRNG.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Stores } from "../../src/contracts/stores.js";
import { idempotencyMiddleware, type IdempotencyOptions, type IdempotentRequestFields } from "../../src/server.js";
import { deferred, serve, storeCases, type Running } from "./support.js";
import { scripted, seeded, WriteSchedule } from "./schedule.js";

const TTL_MS = 2_000;
const TENANT = "http:anonymous";

for (const store of storeCases()) {
  describe(`expired keys and late writes, two servers on one ${store.name} ledger`, () => {
    /** The middleware's clock (and the memory ledger's): set by hand, so expiry never depends on timing. */
    let t = Date.now();
    let ledger: Stores;
    /** Handler runs per key, counted here. */
    const runs = new Map<string, number>();
    const servers: Running[] = [];

    beforeAll(() => {
      ledger = store.make(() => t);
    });
    afterAll(async () => {
      for (const server of servers) await server.close();
      await ledger.close();
    });

    async function server(base: Stores, options: Partial<IdempotencyOptions<IncomingMessage>> = {}, app?: (req: IncomingMessage, res: ServerResponse) => Promise<void>): Promise<string> {
      const idempotency = idempotencyMiddleware({ ledger: base, ttlMs: TTL_MS, now: () => t, ...options });
      const handler = app ?? (async (req: IncomingMessage, res: ServerResponse) => {
        const key = String(req.headers["idempotency-key"]);
        const run = (runs.get(key) ?? 0) + 1;
        runs.set(key, run);
        res.statusCode = 201;
        res.setHeader("content-type", "application/json");
        res.end(JSON.stringify({ key, run }));
      });
      const running = await serve((req, res) => void idempotency(req, res, () => handler(req, res)));
      servers.push(running);
      return running.url;
    }

    async function send(url: string, key: string, body = '{"amount":1}'): Promise<{ status: number; body: string; replayed: boolean }> {
      const res = await fetch(`${url}/charges`, { method: "POST", headers: { "content-type": "application/json", "Idempotency-Key": key }, body });
      return { status: res.status, body: await res.text(), replayed: res.headers.get("idempotent-replayed") === "true" };
    }

    /**
     * Stores a completed record for `key` (handler run 1), then sets the clock to exactly its
     * expiry: the record is expired, and any record claimed from now on (stamped later by the
     * store's clock) is not.
     */
    async function expiredRecord(url: string, key: string): Promise<void> {
      expect((await send(url, key)).status).toBe(201);
      const first = await ledger.calls.get(TENANT, key);
      expect(first?.state).toBe("completed");
      t = first!.createdAt + TTL_MS;
      // SQLite and PostgreSQL stamp records by their own clock: let it pass the first record's stamp.
      while ((await ledger.calls.now()) <= first!.createdAt) await new Promise((r) => setTimeout(r, 1));
    }

    /** Both servers get the same request for an expired key, their writes interleaved as `choose` says. */
    async function race(key: string, choose: Parameters<WriteSchedule["run"]>[1]) {
      const schedule = new WriteSchedule();
      const urlA = await server(schedule.ledgerFor("A", ledger));
      const urlB = await server(schedule.ledgerFor("B", ledger));
      await expiredRecord(urlA, key);
      const answers = await schedule.run({ A: () => send(urlA, key), B: () => send(urlB, key) }, choose);
      return { answers, trace: schedule.trace };
    }

    function expectRightAnswers(key: string, answers: Record<string, { status: number; body: string; replayed: boolean }>): void {
      // The expired key ran once more, not twice: run 1 (before expiry) and run 2.
      expect(runs.get(key)).toBe(2);
      const run2 = JSON.stringify({ key, run: 2 });
      for (const answer of Object.values(answers)) {
        if (answer.status === 409) continue; // the other server was still running it
        expect(answer).toMatchObject({ status: 201, body: run2 });
      }
      expect(Object.values(answers).filter((a) => a.status === 201 && !a.replayed)).toHaveLength(1);
    }

    it("the original race: B's late remove(version 2) does not delete A's fresh record at version 2", async () => {
      const key = "race-original";
      // B reads the expired record, then A removes it, claims afresh, runs and stores (version 2); then B removes.
      const { answers, trace } = await race(key, scripted(["B", "A", "A", "A", "A", "B"]));
      expect(trace.slice(0, 6)).toEqual(["B:claim", "A:claim", "A:remove", "A:claim", "A:update", "B:remove"]);
      const fresh = await ledger.calls.get(TENANT, key);
      expect(fresh).toMatchObject({ state: "completed", version: 2 });
      expectRightAnswers(key, answers);
      expect(answers.B).toMatchObject({ status: 201, replayed: true });
    });

    it("every seeded interleaving of the two servers' writes runs the expired key exactly once more", async () => {
      for (let seed = 1; seed <= 12; seed++) {
        const key = `race-seed-${seed}`;
        const { answers, trace } = await race(key, seeded(seed));
        try {
          expectRightAnswers(key, answers);
        } catch (err) {
          throw new Error(`seed ${seed}, writes ${trace.join(" ")}: ${(err as Error).message}`);
        }
      }
    });

    it("a holder that lost its claim cannot store its late response into the fresh claim of the same key", async () => {
      const key = "late-update";
      let entered = 0;
      const holdA = deferred();
      const holdC = deferred();
      const enteredA = deferred();
      const enteredC = deferred();
      const closedA = deferred();
      const aEnded = deferred();
      const app = async (req: IncomingMessage, res: ServerResponse) => {
        const n = ++entered;
        const body = (req as IncomingMessage & IdempotentRequestFields).rawBody?.toString() ?? "";
        if (n === 1) {
          // A: the client gives up, the handler goes on and answers long after its lease ran out.
          res.once("close", () => closedA.resolve());
          enteredA.resolve();
          await holdA.promise;
          res.statusCode = 201;
          res.end(`A ran for ${body}`);
          aEnded.resolve();
          return;
        }
        if (n === 2) throw new Error("B fails before its effect"); // B: took A's claim over, fails, releases the key
        enteredC.resolve();
        await holdC.promise; // C: claims the key afresh (another body), runs
        res.statusCode = 201;
        res.end(`C ran for ${body}`);
      };
      // A's server has a short lease; the other server a long one (its lease does not run out here).
      const writesA: Promise<unknown>[] = [];
      const watchedA = Object.create(ledger) as Stores;
      const callsA = Object.create(ledger.calls) as Stores["calls"];
      callsA.update = (...args) => {
        const p = ledger.calls.update(...args);
        writesA.push(p);
        return p;
      };
      callsA.renewLease = (...args) => {
        const p = ledger.calls.renewLease(...args);
        writesA.push(p);
        return p;
      };
      Object.defineProperty(watchedA, "calls", { value: callsA });
      const urlA = await server(watchedA, { leaseMs: 200 }, app);
      const urlBC = await server(ledger, { leaseMs: 60_000 }, app);
      const post = (url: string, body: string, signal?: AbortSignal) =>
        fetch(`${url}/charges`, { method: "POST", headers: { "Idempotency-Key": key }, body, ...(signal ? { signal } : {}) });

      const abort = new AbortController();
      const a = post(urlA, "x", abort.signal).then(() => "answered", () => "aborted");
      await enteredA.promise;
      abort.abort();
      expect(await a).toBe("aborted");
      await closedA.promise;
      // A's lease runs out (its renewals stopped when its client left).
      const claimA = await ledger.calls.get(TENANT, key);
      t = Math.max(t, claimA!.leaseExpiresAt!) + 1;
      while ((await ledger.calls.now()) < claimA!.leaseExpiresAt!) await new Promise((r) => setTimeout(r, 5));

      expect((await post(urlBC, "x")).status).toBe(500); // B took over, failed, released the key
      expect(await ledger.calls.get(TENANT, key)).toBeUndefined();
      const c = post(urlBC, "y"); // C claims the key afresh: version 1 again
      await enteredC.promise;
      expect(await ledger.calls.get(TENANT, key)).toMatchObject({ state: "in_progress", version: 1 });

      // A's handler answers now: whatever A writes must not land on C's record.
      const writesBefore = writesA.length;
      holdA.resolve();
      await aEnded.promise;
      while (writesA.length === writesBefore) await new Promise((r) => setImmediate(r));
      await Promise.allSettled(writesA);
      await new Promise((r) => setImmediate(r));
      await Promise.allSettled(writesA);
      expect(await ledger.calls.get(TENANT, key)).toMatchObject({ state: "in_progress", version: 1 });

      holdC.resolve();
      const cAnswer = await c;
      expect(cAnswer.status).toBe(201);
      expect(await cAnswer.text()).toBe("C ran for y");
      const retry = await post(urlBC, "y");
      expect(retry.headers.get("idempotent-replayed")).toBe("true");
      expect(await retry.text()).toBe("C ran for y");
      expect(entered).toBe(3);
    });
  });
}
