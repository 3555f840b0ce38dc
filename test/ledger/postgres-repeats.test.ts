/**
 * Intent windows on PostgreSQL across workers: two ledgers (two pools, as two processes would
 * have) claim the same input under different keys at the same moment. Under READ COMMITTED an
 * `INSERT … WHERE NOT EXISTS` alone lets both through (neither sees the other's uncommitted row);
 * the store serialises the two on an advisory lock of (tenant, task, fingerprint). A trigger that
 * holds every INSERT for 150 ms makes the two statements overlap on every run, so without the lock
 * this test fails every time.
 */
import { afterAll, describe, expect, it } from "vitest";
import { postgresLedger } from "../../src/stores/postgres/index.js";
import { claimRequest } from "../../src/testing/contract-suites/calls.js";
import type { Stores } from "../../src/contracts/stores.js";
import { usePostgres } from "../support/pg.js";

const pg = usePostgres();
const opened: Stores[] = [];
afterAll(async () => {
  await Promise.all(opened.map((l) => l.close()));
});

async function twoWorkers(): Promise<{ a: Stores; b: Stores; schema: string }> {
  const schema = pg.freshSchema();
  const a = postgresLedger({ connectionString: pg.url }, { schema });
  const b = postgresLedger({ connectionString: pg.url }, { schema });
  opened.push(a, b);
  await a.calls.get("acme", "warm-up");
  await b.calls.get("acme", "warm-up");
  await pg.sql(`CREATE FUNCTION ${schema}.slow_insert() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_sleep(0.15); RETURN NEW; END $$`);
  await pg.sql(`CREATE TRIGGER slow_insert BEFORE INSERT ON ${schema}.calls FOR EACH ROW EXECUTE FUNCTION ${schema}.slow_insert()`);
  return { a, b, schema };
}

describe("claims unless repeated, from two workers at once (PostgreSQL)", () => {
  it("exactly one of two overlapping claims of one input is claimed; the other is told which call it repeats", async () => {
    const { a, b } = await twoWorkers();
    const [first, second] = await Promise.all([
      a.calls.claimUnlessRepeated!(claimRequest({ key: "toolu_a", toolUseId: "toolu_a", owner: "worker-a" }), 60_000),
      b.calls.claimUnlessRepeated!(claimRequest({ key: "toolu_b", toolUseId: "toolu_b", owner: "worker-b" }), 60_000),
    ]);
    const results = [first, second];
    expect(results.filter((r) => r.claimed)).toHaveLength(1);
    const winner = results.find((r) => r.claimed);
    const loser = results.find((r) => !r.claimed);
    expect(loser).toMatchObject({ claimed: false, repeats: { key: winner?.claimed ? winner.record.key : "?" } });
    expect((await a.calls.list({})).map((r) => r.key)).toEqual([winner?.claimed ? winner.record.key : "?"]);
  });

  it("overlapping claims of two different inputs are both claimed", async () => {
    const { a, b } = await twoWorkers();
    const [first, second] = await Promise.all([
      a.calls.claimUnlessRepeated!(claimRequest({ key: "toolu_a", fingerprint: "fp-a" }), 60_000),
      b.calls.claimUnlessRepeated!(claimRequest({ key: "toolu_b", fingerprint: "fp-b" }), 60_000),
    ]);
    expect([first.claimed, second.claimed]).toEqual([true, true]);
  });
});
