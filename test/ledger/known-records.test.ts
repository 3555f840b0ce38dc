/**
 * The SQL stores answer an update or take-over of a record they wrote with the record computed from
 * what they wrote (src/stores/sql/known-records.ts), not a read-back of the row. The contract suite
 * checks, in every store, that such a record is what get() reads right after. These are the cases
 * only a second store on the same file or schema (another worker) can make: it removes the record
 * and claims the key again at the same version, or renews the lease this store knew. And on
 * PostgreSQL: what the statement returns is only what cannot be computed.
 */
import { join } from "node:path";
import pg from "pg";
import { describe, expect, it } from "vitest";
import type { Stores } from "../../src/contracts/stores.js";
import { postgresLedger } from "../../src/stores/postgres/index.js";
import { sqliteLedger } from "../../src/stores/sqlite/index.js";
import { claimRequest } from "../../src/testing/contract-suites/calls.js";
import { usePostgres } from "../support/pg.js";
import { tempDir } from "../support/tmp.js";

const db = usePostgres();
const dir = tempDir("effectgate-known-");
let files = 0;

/** Two stores on one ledger, as two workers have. */
const pairs: Record<string, () => [Stores, Stores]> = {
  sqlite: () => {
    const file = join(dir, `known-${files++}.db`);
    return [sqliteLedger(file), sqliteLedger(file)];
  },
  postgres: () => {
    const schema = db.freshSchema();
    return [postgresLedger({ connectionString: db.url }, { schema }), postgresLedger({ connectionString: db.url }, { schema })];
  },
};

for (const [name, open] of Object.entries(pairs)) {
  describe(`records written by ${name} stores, with another worker on the same ledger`, () => {
    it("a record another worker removed and claimed again is written as that new claim, even at the version this store knew", async () => {
      const [a, b] = open();
      try {
        await a.calls.claim(claimRequest({ key: "k", input: { title: "first" } }));
        await a.calls.claim(claimRequest({ key: "t", leaseMs: -1 }));
        for (const key of ["k", "t"]) {
          const seen = (await b.calls.get("acme", key))!;
          expect(await b.calls.remove("acme", key, 1, seen.claimToken)).toBe(true);
        }
        const second = (await b.calls.claim(claimRequest({ key: "k", owner: "worker-b", input: { title: "second" }, fingerprint: "fp-2" }))).record;
        const third = (await b.calls.claim(claimRequest({ key: "t", owner: "worker-b", leaseMs: -1, input: { title: "third" } }))).record;

        const done = await a.calls.update("acme", "k", 1, { state: "completed", result: { n: 2 }, owner: null });
        expect(done).toStrictEqual(await a.calls.get("acme", "k"));
        expect(done).toMatchObject({ claimToken: second.claimToken, input: { title: "second" }, fingerprint: "fp-2", state: "completed" });
        const taken = await a.calls.takeOver({ tenant: "acme", key: "t", version: 1, owner: "worker-a", leaseMs: 60_000 });
        expect(taken).toStrictEqual(await a.calls.get("acme", "t"));
        expect(taken).toMatchObject({ claimToken: third.claimToken, input: { title: "third" }, owner: "worker-a", version: 2 });
      } finally {
        await a.close();
        await b.close();
      }
    });

    it("a lease another worker renewed shows in the next record this store writes", async () => {
      const [a, b] = open();
      try {
        const { record } = await a.calls.claim(claimRequest({ key: "k", owner: "worker-a", leaseMs: 1_000 }));
        expect(await b.calls.renewLease("acme", "k", 1, "worker-a", 600_000)).toBe(true);
        const probing = await a.calls.update("acme", "k", 1, { state: "uncertain", error: "timed out, probing" });
        expect(probing).toStrictEqual(await a.calls.get("acme", "k"));
        expect(probing!.leaseExpiresAt).toBeGreaterThanOrEqual(record.createdAt + 600_000);
        expect(await b.calls.renewLease("acme", "k", 2, "worker-a", 900_000)).toBe(true);
        const taken = await a.calls.takeOver({ tenant: "acme", key: "k", version: 2, owner: "worker-c", leaseMs: 1_000, holderIsDead: true });
        // The take-over's last possible send is judged from the renewed lease: now, not the old lease's end.
        expect(taken).toStrictEqual(await a.calls.get("acme", "k"));
      } finally {
        await a.close();
        await b.close();
      }
    });
  });
}

describe("postgres: a write of a known record returns only what the store cannot compute", () => {
  it("the outcome update and the take-over return the clock, the lease and the start, never the row's JSON", async () => {
    const sent: string[] = [];
    class Logging extends pg.Client {
      constructor(config?: pg.ClientConfig) {
        super(config);
        const query = this.query.bind(this) as (...args: unknown[]) => unknown;
        (this as unknown as { query: (...args: unknown[]) => unknown }).query = (...args: unknown[]) => {
          const config = args[0] as string | { text: string };
          sent.push(typeof config === "string" ? config : config.text);
          return query(...args);
        };
      }
    }
    const pool = new pg.Pool({ connectionString: db.url, max: 2, Client: Logging });
    pool.on("error", () => undefined);
    const ledger = postgresLedger({ pool }, { schema: db.freshSchema() });
    try {
      await ledger.calls.claim(claimRequest({ key: "k", leaseMs: -1 }));
      sent.length = 0;
      const taken = await ledger.calls.takeOver({ tenant: "acme", key: "k", version: 1, owner: "worker-b", leaseMs: 60_000 });
      const done = await ledger.calls.update("acme", "k", 2, { state: "completed", result: { ok: true }, owner: null });
      expect(taken).toMatchObject({ owner: "worker-b", version: 2, input: { title: "printer on fire" } });
      expect(done).toMatchObject({ state: "completed", result: { ok: true }, version: 3, input: { title: "printer on fire" } });
      expect(sent).toHaveLength(2);
      for (const text of sent) expect(text).toMatch(/RETURNING lease_expires_at, started_at, updated_at$/);
    } finally {
      await ledger.close();
      await pool.end();
    }
  });
});
