/**
 * Group commit in the SQLite ledger (src/stores/sqlite/group-commit.ts): writes that concurrent
 * calls of one process ask for at the same moment share one transaction and one fsync, without
 * weakening what each call is promised. The contract suite (src/testing/contract-suites/calls.ts)
 * holds the per-write semantics for every store; these are the SQLite-only parts: that writes do
 * share a commit (the WAL says so), that a failed commit fails its whole batch and writes none of
 * it, reads come after the writes asked for before them, and a real SIGKILL in the middle of
 * batches leaves no effect without its claim on disk.
 */
import { existsSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import Database from "better-sqlite3";
import { beforeAll, describe, expect, it } from "vitest";
import { sqliteLedger } from "../../src/stores/sqlite/index.js";
import { claimRequest } from "../../src/testing/contract-suites/calls.js";
import { requireBuild, runFixture } from "../support/processes.js";
import { tempDir } from "../support/tmp.js";

const dir = tempDir("effectgate-group-commit-");
const walSize = (file: string) => (existsSync(`${file}-wal`) ? statSync(`${file}-wal`).size : 0);

/** How many bytes the WAL grows by while `write` runs on a fresh ledger (opened, one call written first). */
async function walGrowth(name: string, write: (ledger: ReturnType<typeof sqliteLedger>) => Promise<void>): Promise<number> {
  const file = join(dir, name);
  const ledger = sqliteLedger(file);
  await ledger.calls.claim(claimRequest({ key: "opening" }));
  const before = walSize(file);
  await write(ledger);
  const grown = walSize(file) - before;
  await ledger.close();
  return grown;
}

describe("sqlite group commit", () => {
  it("commits claims asked for at the same moment together: the WAL grows by one commit's pages, not one per claim", async () => {
    const keys = Array.from({ length: 48 }, (_, i) => `toolu_${i}`);
    const oneByOne = await walGrowth("one-by-one.db", async (ledger) => {
      for (const key of keys) await ledger.calls.claim(claimRequest({ key }));
    });
    const together = await walGrowth("together.db", async (ledger) => {
      const claims = await Promise.all(keys.map((key) => ledger.calls.claim(claimRequest({ key }))));
      expect(claims.every((c) => c.claimed)).toBe(true);
    });
    // Each commit appends at least the table's and the index's pages (4 KiB frames); 48 commits cannot fit in 16 frames.
    expect(oneByOne).toBeGreaterThan(48 * 2 * 4096);
    expect(together).toBeLessThanOrEqual(16 * 4120);
  });

  it("a read asked for right after concurrent writes sees every one of them", async () => {
    const ledger = sqliteLedger(join(dir, "read-after.db"));
    await ledger.calls.claim(claimRequest({ key: "opening" }));
    const claims = Array.from({ length: 12 }, (_, i) => ledger.calls.claim(claimRequest({ key: `toolu_r${i}` })));
    const listed = ledger.calls.list({ tenant: "acme", limit: 100 });
    const read = ledger.calls.get("acme", "toolu_r11");
    expect((await Promise.all(claims)).every((c) => c.claimed)).toBe(true);
    expect((await listed).map((r) => r.key).sort()).toEqual(["opening", ...Array.from({ length: 12 }, (_, i) => `toolu_r${i}`)].sort());
    expect(await read).toMatchObject({ key: "toolu_r11", state: "in_progress" });
    await ledger.close();
  });

  it("a batch whose commit fails fails every write in it, and none of them is in the file", async () => {
    const file = join(dir, "locked.db");
    const ledger = sqliteLedger(file, { busyTimeoutMs: 20 });
    await ledger.calls.claim(claimRequest({ key: "opening" }));
    // Another connection holds the write lock for the whole batch: BEGIN IMMEDIATE cannot get it.
    const locker = new Database(file);
    locker.exec("BEGIN IMMEDIATE");
    const results = await Promise.allSettled([
      ledger.calls.claim(claimRequest({ key: "a" })),
      ledger.calls.claim(claimRequest({ key: "b" })),
      ledger.calls.update("acme", "opening", 1, { state: "completed", result: { ok: true }, owner: null }),
    ]);
    locker.exec("ROLLBACK");
    locker.close();
    expect(results.map((r) => r.status)).toEqual(["rejected", "rejected", "rejected"]);
    for (const r of results) expect(String((r as PromiseRejectedResult).reason)).toMatch(/EG_LEDGER_UNAVAILABLE/);
    expect(await ledger.calls.get("acme", "a")).toBeUndefined();
    expect(await ledger.calls.get("acme", "b")).toBeUndefined();
    expect(await ledger.calls.get("acme", "opening")).toMatchObject({ state: "in_progress", version: 1 });
    await ledger.close();
  });

  it("writes asked for just before close are committed by close", async () => {
    const file = join(dir, "close.db");
    const ledger = sqliteLedger(file);
    await ledger.calls.claim(claimRequest({ key: "opening" }));
    const pending = [ledger.calls.claim(claimRequest({ key: "late-1" })), ledger.calls.claim(claimRequest({ key: "late-2" }))];
    await ledger.close();
    expect((await Promise.all(pending)).every((c) => c.claimed)).toBe(true);
    const again = sqliteLedger(file);
    expect((await again.calls.list({ tenant: "acme" })).map((r) => r.key).sort()).toEqual(["late-1", "late-2", "opening"]);
    await again.close();
  });
});

describe("sqlite group commit under a real SIGKILL", () => {
  const agent = fileURLToPath(new URL("./fixtures/batch-agent.mjs", import.meta.url));
  beforeAll(() => requireBuild());

  it("a process killed in the middle of batches leaves no effect without its durable claim; a fresh process finishes every call once", async () => {
    const ledgerFile = join(dir, "killed.db");
    const effects = join(dir, "effects.txt");
    const job = { ledger: ledgerFile, effects, calls: 120, concurrency: 16 };
    const killed = await runFixture(agent, { ...job, killAfter: 57 }, { cwd: dir, label: "batch agent (killed)" });
    expect(killed.signal).toBe("SIGKILL");
    const lines = readFileSync(effects, "utf8").split("\n").filter((l) => l !== "");
    expect(lines).toHaveLength(57);

    // Every effect the downstream has was claimed durably before its tool started; every
    // completed record has its effect. (Reads the file as it was left, before anything recovers it.)
    const ledger = sqliteLedger(ledgerFile);
    const records = await ledger.calls.list({ tenant: "acme", limit: 1000 });
    const byKey = new Map(records.map((r) => [r.key, r]));
    for (const key of lines) expect(byKey.get(key)?.state, `effect of ${key} has no claim`).toMatch(/^(in_progress|completed)$/);
    for (const r of records.filter((rec) => rec.state === "completed")) expect(lines).toContain(r.key);
    const unrecorded = records.filter((r) => r.state === "in_progress");
    // The kill came while other calls were between claim and outcome (the point of the test).
    expect(unrecorded.length).toBeGreaterThan(0);
    await ledger.close();

    // A fresh process replays all 120 calls: the unrecorded ones are settled by the probe, never run twice.
    const rerun = await runFixture(agent, job, { cwd: dir, label: "batch agent (rerun)" });
    expect(rerun.code, rerun.stderr).toBe(0);
    expect(rerun.lines).toEqual([{ done: 120 }]);
    const after = readFileSync(effects, "utf8").split("\n").filter((l) => l !== "");
    expect(after).toHaveLength(120);
    expect(new Set(after).size).toBe(120);
  });
});
