/**
 * Keys longer than a ledger keeps (issue 23). PostgreSQL refuses an index entry over about a third
 * of a page, and the ledger's indexes on calls hold tenant, task and key together: a claim with a
 * long key failed with "the ledger is unavailable … replay once the database is reachable", which
 * never succeeds. Every store now keeps the same limits (KEY_LIMITS, src/core/keys.ts), so a
 * ledger can move from SQLite or memory to PostgreSQL, and a key over them is refused up front,
 * before governance and the claim, with EG_KEY_TOO_LONG saying what to do.
 *
 * The parts are random text of every UTF-8 width (1 to 4 bytes a character), so nothing compresses
 * and the byte counts are exact: at the limits a claim goes through on every store, PostgreSQL's
 * indexes included; one byte over any limit is refused everywhere, and nothing is written. The last
 * test measures, on PostgreSQL itself, how long a key its indexes take beside a tenant and a task at
 * their limits (1908 bytes on PostgreSQL 15: 2676 in all), so the margin the limits leave is a figure.
 */
import { join } from "node:path";
import Database from "better-sqlite3";
import { z } from "zod";
import { describe, expect, it } from "vitest";
import type { Stores } from "../../src/contracts/stores.js";
import { KEY_LIMITS } from "../../src/core/keys.js";
import { defineTool } from "../../src/core/tool.js";
import { createGate } from "../../src/root/create-gate.js";
import { memoryLedger } from "../../src/stores/memory/index.js";
import { postgresLedger } from "../../src/stores/postgres/index.js";
import { sqliteLedger } from "../../src/stores/sqlite/index.js";
import { claimRequest } from "../../src/testing/contract-suites/calls.js";
import { seededRng, type Rng } from "../../src/testing/explorer/rng.js";
import { usePostgres } from "../support/pg.js";
import { tempDir } from "../support/tmp.js";

const db = usePostgres();

/** Random text of exactly `bytes` bytes of UTF-8, mixing 1-, 2-, 3- and 4-byte characters (no control characters). */
function text(rng: Rng, bytes: number): string {
  let out = "";
  let left = bytes;
  while (left > 0) {
    const width = Math.min(left, rng.between(1, 4));
    const [from, to] = ([[0x21, 0x7e], [0xa1, 0x7ff], [0x4e00, 0x9fff], [0x1f300, 0x1faff]] as const)[width - 1]!;
    out += String.fromCodePoint(rng.between(from, to));
    left -= width;
  }
  expect(Buffer.byteLength(out, "utf8")).toBe(bytes);
  return out;
}

interface Kind {
  readonly name: string;
  open(): Stores;
  /** Gives the record (tenant, key) a new key, as a ledger written before the limit could hold (undefined: this store cannot). */
  rekey?(stores: Stores, tenant: string, from: string, to: string): Promise<void>;
}

const KINDS: readonly Kind[] = [
  { name: "memory", open: () => memoryLedger() },
  {
    name: "SQLite",
    open: () => sqliteLedger(join(tempDir(), "ledger.db")),
    async rekey(stores, tenant, from, to) {
      const file = stores.location.replace(/^sqlite:/, "");
      const conn = new Database(file);
      conn.prepare("UPDATE calls SET key = ? WHERE tenant = ? AND key = ?").run(to, tenant, from);
      conn.close();
    },
  },
  {
    name: "PostgreSQL",
    open: () => postgresLedger({ connectionString: db.url }, { schema: db.freshSchema() }),
    async rekey(stores, tenant, from, to) {
      const schema = /schema (\S+)$/.exec(stores.location)?.[1] ?? "";
      await db.sql(`UPDATE "${schema}".calls SET key = $1 WHERE tenant = $2 AND key = $3`, [to, tenant, from]);
    },
  },
];

function ticketTool(runs: string[]) {
  return defineTool({
    name: "open_ticket", effect: "write", input: z.object({ title: z.string() }),
    execute: (input, ctx) => {
      runs.push(ctx.idempotencyKey);
      return { ticket: input.title };
    },
  });
}

const REFUSED = new RegExp(
  `^EG_KEY_TOO_LONG: The (call's idempotency key|scope's (tenant|task)) \\(.*\\) is \\d+ bytes of UTF-8; a ledger keeps at most ` +
    `${KEY_LIMITS.key} bytes of key, ${KEY_LIMITS.tenant} of tenant and ${KEY_LIMITS.task} of task, on every store\\. ` +
    "Nothing was executed and nothing was written: use a shorter ", "s");

describe.each(KINDS)("the key limits on the $name store", (kind) => {
  it("a call at every limit at once (tenant, task and key, characters of every width) is claimed, run and replayed", async () => {
    const rng = seededRng(23);
    const stores = kind.open();
    const runs: string[] = [];
    const gate = createGate({ tools: [ticketTool(runs)], ledger: stores, onAlert: () => {} });
    try {
      const scope = { tenant: text(rng, KEY_LIMITS.tenant), task: text(rng, KEY_LIMITS.task) };
      const id = text(rng, KEY_LIMITS.key);
      const call = { type: "tool_use", id, name: "open_ticket", input: { title: "at the limit" } } as const;
      const [first] = await gate.runToolUses([call], scope);
      expect(first).toMatchObject({ is_error: false, content: JSON.stringify({ ticket: "at the limit" }) });
      expect(await gate.runToolUses([call], scope)).toEqual([first]);
      expect(runs).toEqual([id]);
      expect(await stores.calls.get(scope.tenant, id)).toMatchObject({ state: "completed", task: scope.task });
    } finally {
      await gate.close();
      await stores.close();
    }
  });

  for (const part of ["key", "tenant", "task"] as const) {
    it(`a ${part} one byte over its limit is refused up front: EG_KEY_TOO_LONG, nothing run, nothing written`, async () => {
      const rng = seededRng(part.length);
      const stores = kind.open();
      const runs: string[] = [];
      const gate = createGate({ tools: [ticketTool(runs)], ledger: stores, onAlert: () => {} });
      try {
        const over = (p: typeof part) => text(rng, p === part ? KEY_LIMITS[p] + 1 : 20);
        const scope = { tenant: over("tenant"), task: over("task") };
        const call = { type: "tool_use", id: over("key"), name: "open_ticket", input: { title: "too long" } } as const;
        const [answer] = await gate.runToolUses([call], scope);
        expect(answer!.is_error).toBe(true);
        expect(answer!.content).toMatch(REFUSED);
        expect(answer!.content).toContain(part === "key" ? "The call's idempotency key" : `The scope's ${part}`);
        expect(answer!.content).not.toMatch(/reachable|replay/i);
        expect(runs).toEqual([]);
        expect(await stores.calls.list({})).toEqual([]);

        // The store itself refuses it too, whoever asks (the HTTP middleware, a saga, your own code), on every way to claim.
        const request = claimRequest({ tenant: scope.tenant, task: scope.task, key: call.id, toolUseId: call.id });
        const calls = stores.calls;
        const claims: Promise<unknown>[] = [
          calls.claim(request),
          calls.claimAnswered!(request, { state: "completed", result: { ticket: "x" }, error: null }),
          calls.claimUnlessRepeated!(request, 60_000),
          ...(calls.claimUnlessHalted ? [calls.claimUnlessHalted(request, "agent")] : []),
        ];
        for (const claim of claims) await expect(claim).rejects.toMatchObject({ code: "EG_KEY_TOO_LONG", outcome: "terminal" });
        expect(await stores.calls.list({})).toEqual([]);
      } finally {
        await gate.close();
        await stores.close();
      }
    });
  }

  it("a key PostgreSQL's own index cannot hold (3000 bytes) gets the same clear answer on every store, never 'replay once the database is reachable'", async () => {
    const stores = kind.open();
    const runs: string[] = [];
    const gate = createGate({ tools: [ticketTool(runs)], ledger: stores, onAlert: () => {} });
    try {
      const id = text(seededRng(3000), 3000);
      const [answer] = await gate.runToolUses([{ type: "tool_use", id, name: "open_ticket", input: { title: "far too long" } }], { tenant: "acme", task: "t" });
      expect(answer!.content).toMatch(REFUSED);
      expect(answer!.content).toContain("is 3000 bytes of UTF-8");
      expect(runs).toEqual([]);
    } finally {
      await gate.close();
      await stores.close();
    }
  });

  it("a destructive call with a key over the limit is refused before governance: no person is asked to approve a call that could never be claimed", async () => {
    const stores = kind.open();
    const runs: string[] = [];
    const wipe = defineTool({
      name: "wipe_disk", effect: "destructive", input: z.object({ disk: z.string() }),
      execute: (input, ctx) => {
        runs.push(ctx.idempotencyKey);
        return { wiped: input.disk };
      },
      dryRun: (input) => ({ effect: "would_wipe", would_affect: { disk: input.disk }, reversible: false }),
    });
    const gate = createGate({ tools: [wipe], ledger: stores, onAlert: () => {} });
    try {
      const scope = { tenant: "acme", task: "t" };
      const [short] = await gate.runToolUses([{ type: "tool_use", id: "toolu_short", name: "wipe_disk", input: { disk: "a" } }], scope);
      expect(short!.content).toMatch(/^EG_AWAITING_APPROVAL: /);
      const id = text(seededRng(9), KEY_LIMITS.key + 1);
      const [answer] = await gate.runToolUses([{ type: "tool_use", id, name: "wipe_disk", input: { disk: "b" } }], scope);
      expect(answer!.content).toMatch(REFUSED);
      expect((await stores.governance!.listApprovals({ tenant: "acme" })).map((a) => a.key)).toEqual(["toolu_short"]);
      expect(runs).toEqual([]);
    } finally {
      await gate.close();
      await stores.close();
    }
  });

  it.skipIf(kind.rekey === undefined)("a record a ledger already holds under a longer key (written before the limit) is answered from it, not refused", async () => {
    const stores = kind.open();
    const runs: string[] = [];
    const gate = createGate({ tools: [ticketTool(runs)], ledger: stores, onAlert: () => {} });
    try {
      const scope = { tenant: "acme", task: "old" };
      const [done] = await gate.runToolUses([{ type: "tool_use", id: "toolu_short", name: "open_ticket", input: { title: "before" } }], scope);
      // Text that compresses fits PostgreSQL's index whatever its length, so such records exist.
      const long = `toolu_${"x".repeat(KEY_LIMITS.key * 2)}`;
      await kind.rekey!(stores, "acme", "toolu_short", long);
      const [replayed] = await gate.runToolUses([{ type: "tool_use", id: long, name: "open_ticket", input: { title: "before" } }], scope);
      expect(replayed).toMatchObject({ is_error: false, content: done!.content });
      expect(runs).toEqual(["toolu_short"]);
    } finally {
      await gate.close();
      await stores.close();
    }
  });
});

describe("what PostgreSQL's indexes on calls actually refuse", () => {
  it("more than the limits together and less than a btree entry's 2704 bytes: the limits fit with room to spare", async () => {
    const stores = postgresLedger({ connectionString: db.url }, { schema: db.freshSchema() });
    const rng = seededRng(2704);
    try {
      // The largest key that fits beside a tenant and a task at their limits, found by bisection on PostgreSQL itself
      // (rows written straight into the table: the stores refuse such keys before PostgreSQL could).
      const tenant = text(rng, KEY_LIMITS.tenant);
      const task = text(rng, KEY_LIMITS.task);
      const schema = /schema (\S+)$/.exec(stores.location)?.[1] ?? "";
      const raw = async (bytes: number) => {
        try {
          await db.sql(`INSERT INTO "${schema}".calls (tenant, key, tool, effect, task, tool_use_id, fingerprint, intent, input, input_redacted, state, owner, lease_expires_at, attempts, fence, started_at, claim_token, version, created_at, updated_at)
            VALUES ($1, $2, 't', 'write', $3, 'u', 'fp', 'fp', '{}', false, 'in_progress', 'o', 0, 1, 1, 0, 'c', 1, 0, 0)`, [tenant, text(rng, bytes), task]);
          return true;
        } catch (err) {
          expect(String(err)).toMatch(/index row size \d+ exceeds btree version 4 maximum 2704/);
          return false;
        }
      };
      await stores.calls.get("acme", "opening"); // the schema is made
      let fits: number = KEY_LIMITS.key;
      let refused = 2704;
      expect(await raw(fits)).toBe(true);
      expect(await raw(refused)).toBe(false);
      while (refused - fits > 1) {
        const mid = Math.floor((fits + refused) / 2);
        if (await raw(mid)) fits = mid;
        else refused = mid;
      }
      const total = KEY_LIMITS.tenant + KEY_LIMITS.task + fits;
      console.log(`PostgreSQL's calls indexes: beside a ${KEY_LIMITS.tenant}-byte tenant and a ${KEY_LIMITS.task}-byte task, a key of ${fits} bytes fits and ${refused} is refused (${total} bytes in all); the key limit is ${KEY_LIMITS.key}`);
      expect(fits).toBeGreaterThan(KEY_LIMITS.key + 256);
      expect(total).toBeLessThan(2704);
    } finally {
      await stores.close();
    }
  });
});

