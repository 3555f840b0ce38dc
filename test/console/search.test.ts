/**
 * Ledger search through the console's API is the store's own query (CallStore.list with filters and
 * a keyset cursor), on SQLite and PostgreSQL: more records than any page (and, on SQLite, more than
 * the 20,000 the console once read and filtered in memory), each page read from the store as one
 * page and one record more, pages that stay put while calls arrive, and hostile filter values
 * answered with a 400 that names the parameter, or matched as the plain data they are.
 */
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import type { CallRecord, CallStore, ListQuery } from "../../src/contracts/calls.js";
import type { Stores } from "../../src/contracts/stores.js";
import { silentLogger } from "../../src/core/logger.js";
import { startConsole, type ConsoleServer } from "../../src/root/console/server.js";
import { postgresLedger } from "../../src/stores/postgres/index.js";
import { sqliteLedger } from "../../src/stores/sqlite/index.js";
import { claimRequest } from "../../src/testing/contract-suites/calls.js";
import { usePostgres } from "../support/pg.js";
import { tempDir } from "../support/tmp.js";
import { call } from "./support.js";

const TOKEN = "search-token-0123456789abcdefghijkl";
const pg = usePostgres();
const dir = tempDir();
let n = 0;

interface Page { readonly calls: readonly CallRecord[]; readonly next: string | null }
interface Watched { readonly url: string; readonly ledger: Stores; /** How many records each `list` the console made returned, and what it asked. */ readonly reads: { query: ListQuery; returned: number }[] }

const opened: { server: ConsoleServer; ledger: Stores }[] = [];
afterAll(async () => {
  for (const o of opened.splice(0)) {
    await o.server.close();
    await o.ledger.close();
  }
});

/** The console on `ledger`, through a window that counts what the store's `list` hands back. */
async function consoleOn(ledger: Stores): Promise<Watched> {
  const reads: Watched["reads"] = [];
  const calls = new Proxy(ledger.calls, {
    get(target, prop, receiver) {
      if (prop !== "list") return Reflect.get(target, prop, receiver) as unknown;
      const list: CallStore["list"] = async (query = {}) => {
        const rows = await target.list(query);
        reads.push({ query, returned: rows.length });
        return rows;
      };
      return list;
    },
  });
  const watched = new Proxy(ledger, { get: (target, prop, receiver) => (prop === "calls" ? calls : Reflect.get(target, prop, receiver) as unknown) });
  const server = await startConsole({ ledger: watched, token: TOKEN, port: 0, logger: silentLogger });
  opened.push({ server, ledger });
  return { url: server.url, ledger, reads };
}

/** `count` calls claimed straight into the store, 200 at a time, keys k00000…, in tenant acme unless `tenant` says otherwise. */
async function claimMany(ledger: Stores, count: number, shape: (i: number) => Partial<Parameters<typeof claimRequest>[0]> = () => ({})): Promise<void> {
  for (let start = 0; start < count; start += 200) {
    await Promise.all(Array.from({ length: Math.min(200, count - start) }, (_, j) => {
      const i = start + j;
      const key = `k${String(i).padStart(5, "0")}`;
      return ledger.calls.claim(claimRequest({ key, toolUseId: key, ...shape(i) }));
    }));
  }
}

async function search(url: string, query: string): Promise<Page> {
  const reply = await call(url, TOKEN, "GET", `/api/calls?${query}`);
  expect(reply.status, JSON.stringify(reply.body)).toBe(200);
  return reply.body as Page;
}

/** Every page of a search, following `next`. */
async function allPages(url: string, query: string): Promise<Page[]> {
  const pages: Page[] = [];
  let cursor: string | null = "";
  while (cursor !== null && pages.length < 1000) {
    const page = await search(url, `${query}${cursor ? `&cursor=${cursor}` : ""}`);
    pages.push(page);
    cursor = page.next;
  }
  return pages;
}

const ids = (calls: readonly CallRecord[]) => calls.map((c) => `${c.tenant}/${c.key}`);

const stores: { name: string; records: number; open: () => Stores; skip?: string }[] = [
  // More than the 20,000 records the console used to read per search (and then filter and page in memory).
  { name: "SQLite", records: 20_050, open: () => sqliteLedger(join(dir, `search-${n++}.db`), { durability: "process" }) },
  { name: "PostgreSQL", records: 1_250, open: () => postgresLedger({ connectionString: pg.url, poolSize: 8 }, { schema: pg.freshSchema() }) },
];

for (const store of stores) {
  describe(`ledger search on ${store.name}`, { timeout: 120_000 }, () => {
    it(`pages through ${store.records.toLocaleString("en")} calls with a cursor, reading one page (and one record) from the store per request`, async () => {
      const ledger = store.open();
      const late = 50;
      await claimMany(ledger, store.records, (i) => ({ task: i >= store.records - late ? "late" : "bulk", tool: i % 10 === 0 ? "delete_account" : "send_email" }));
      const { url, reads } = await consoleOn(ledger);

      // The last calls, found by a filter the store applies: never cut off by how many came before them.
      const lateCalls = await search(url, "task=late&limit=500");
      expect(lateCalls.calls).toHaveLength(late);
      expect(lateCalls.calls.every((c) => c.task === "late")).toBe(true);
      expect(lateCalls.next).toBeNull();

      reads.length = 0;
      const pages = await allPages(url, "tenant=acme&limit=500");
      const seen = pages.flatMap((p) => ids(p.calls));
      expect(seen).toHaveLength(store.records);
      expect(new Set(seen).size).toBe(store.records);
      const everything = await ledger.calls.list({ limit: store.records + 1 });
      expect(seen).toEqual(ids(everything));
      expect(pages.map((p) => p.calls.length)).toEqual(Array.from({ length: Math.ceil(store.records / 500) }, (_, i) => Math.min(500, store.records - i * 500)));
      // Each request asked the store for one page and one record more, and got no more than that.
      expect(reads).toHaveLength(pages.length);
      expect(reads.every((r) => r.query.limit === 501 && r.returned <= 501)).toBe(true);
      expect(reads.slice(1).every((r) => r.query.after !== undefined)).toBe(true);

      const deletes = (await allPages(url, "tool=delete_account&tenant=acme&limit=100")).flatMap((p) => ids(p.calls));
      expect(deletes).toEqual(ids(everything.filter((c) => c.tool === "delete_account")));
    });

    it("a page stays the same page while calls arrive, and paging on lists each call once", async () => {
      const ledger = store.open();
      await claimMany(ledger, 25);
      const { url } = await consoleOn(ledger);
      const before = ids(await ledger.calls.list({ tenant: "acme", limit: 1000 }));
      expect(before).toHaveLength(25);
      const first = await search(url, "tenant=acme&limit=10");
      const second = await search(url, `tenant=acme&limit=10&cursor=${first.next!}`);
      // New calls arrive, in this tenant and another, later than every call listed so far.
      await new Promise((resolve) => setTimeout(resolve, 5));
      for (let i = 0; i < 5; i++) await ledger.calls.claim(claimRequest({ key: `a-new${i}`, toolUseId: `a-new${i}` }));
      await ledger.calls.claim(claimRequest({ key: "a-other", tenant: "globex" }));
      const secondAgain = await search(url, `tenant=acme&limit=10&cursor=${first.next!}`);
      expect(ids(secondAgain.calls)).toEqual(ids(second.calls));
      expect(ids((await search(url, "tenant=acme&limit=10")).calls)).toEqual(ids(first.calls));
      const rest = await allPages(url, `tenant=acme&limit=10&cursor=${second.next!}`);
      const seen = [...ids(first.calls), ...ids(second.calls), ...rest.flatMap((p) => ids(p.calls))];
      expect(seen).toEqual([...before, ...Array.from({ length: 5 }, (_, i) => `acme/a-new${i}`)]);
    });

    it("hostile filter values: NUL bytes, overlong strings, unsafe numbers and forged cursors are a 400 naming the parameter; \"__proto__\" is plain data", async () => {
      const ledger = store.open();
      await claimMany(ledger, 3);
      await ledger.calls.claim(claimRequest({ tenant: "__proto__", key: "constructor", task: "__proto__", toolUseId: "toolu_p" }));
      const { url, reads } = await consoleOn(ledger);
      const refused = async (query: string, message: RegExp) => {
        const reply = await call(url, TOKEN, "GET", `/api/calls?${query}`);
        expect(reply.status, query.slice(0, 80)).toBe(400);
        expect((reply.body as { error: { code: string; message: string } }).error).toMatchObject({ code: "bad_request", message: expect.stringMatching(message) as unknown });
      };
      for (const name of ["tenant", "tool", "task", "key"]) {
        await refused(`${name}=a%00b`, new RegExp(`^${name} contains the NUL character \\(U\\+0000\\) at index 1`));
        await refused(`${name}=${"x".repeat(5000)}`, new RegExp(`^${name} is 5000 characters long; a filter is at most 4096`));
      }
      await refused("since=99999999999999999999", /^since must be epoch milliseconds or an ISO-8601 time/);
      await refused("until=not-a-time", /^until must be epoch milliseconds or an ISO-8601 time/);
      await refused("limit=0", /^limit must be a whole number from 1 to 500/);
      await refused("limit=501", /^limit must be a whole number from 1 to 500/);
      await refused("state=__proto__", /^state must be one of in_progress, /);
      const forged = (value: string) => Buffer.from(value).toString("base64url");
      for (const cursor of ["garbage!", forged("[1e400,\"acme\",\"k\"]"), forged('{"__proto__":{"admin":true}}'), forged('[1,"acme"]'), forged('[1.5,"acme","k"]'), forged('["1","acme","k"]')]) {
        await refused(`cursor=${cursor}`, /^cursor is not one this API gave out/);
      }
      // None of those reached the store.
      expect(reads).toEqual([]);
      // Beyond what node:http reads in a request line and headers (16 KiB): its own clear status, and the server stays up.
      expect((await call(url, TOKEN, "GET", `/api/calls?tenant=${"x".repeat(100_000)}`)).status).toBe(431);

      expect(ids((await search(url, "tenant=__proto__")).calls)).toEqual(["__proto__/constructor"]);
      expect(ids((await search(url, "task=__proto__&key=constructor")).calls)).toEqual(["__proto__/constructor"]);
      expect(ids((await search(url, "tool=__proto__")).calls)).toEqual([]);
      const acme = ids(await ledger.calls.list({ tenant: "acme" }));
      expect(acme).toHaveLength(3);
      expect(ids((await search(url, "tenant=acme&__proto__=x&constructor=y")).calls)).toEqual(acme);
      expect(ids((await search(url, `tool=${encodeURIComponent("x' OR '1'='1")}`)).calls)).toEqual([]);
      expect(ids((await search(url, `key=${encodeURIComponent("k%")}`)).calls)).toEqual([]);
      // A cursor carrying a "__proto__" tenant is a place in the order like any other: time 0 comes
      // before every record. (The store's own order, not a written one: the four claims may share a
      // millisecond, and then the tenant breaks the tie and "__proto__" sorts before "acme".)
      const everyCall = ids(await ledger.calls.list({}));
      expect([...everyCall].sort()).toEqual([...acme, "__proto__/constructor"].sort());
      expect(ids((await search(url, `cursor=${forged('[0,"__proto__",""]')}`)).calls)).toEqual(everyCall);
    });
  });
}
