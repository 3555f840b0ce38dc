import { writeFileSync, readFileSync, existsSync, statSync } from "node:fs";
import { join } from "node:path";
import Database from "better-sqlite3";
import * as vitest from "vitest";
import { describe, expect, it } from "vitest";
import { sqliteLedger } from "../../src/stores/sqlite/index.js";
import { contractSuite } from "../../src/testing/contract-suite.js";
import { claimRequest } from "../../src/testing/contract-suites/calls.js";
import { tempDir } from "../support/tmp.js";

const dir = tempDir();
let n = 0;
contractSuite({ vitest, name: "sqlite", open: () => sqliteLedger(join(dir, `contract-${n++}.db`)) });
contractSuite({ vitest, name: "sqlite (process durability)", open: () => sqliteLedger(join(dir, `contract-fast-${n++}.db`), { durability: "process" }) });

describe("sqlite ledger files", () => {
  it("keeps records across close and reopen", async () => {
    const file = join(dir, "reopen.db");
    const a = sqliteLedger(file);
    await a.calls.claim(claimRequest());
    await a.calls.update("acme", "toolu_1", 1, { state: "completed", result: { id: "T-1" }, owner: null });
    await a.close();
    const b = sqliteLedger(file);
    expect(await b.calls.get("acme", "toolu_1")).toMatchObject({ state: "completed", result: { id: "T-1" } });
    await b.close();
  });

  it("refuses a file that is not a database, names it, and leaves it untouched", async () => {
    const file = join(dir, "garbage.db");
    const garbage = "this is not a sqlite database, it is a text file ".repeat(200);
    writeFileSync(file, garbage);
    const ledger = sqliteLedger(file);
    await expect(ledger.calls.claim(claimRequest())).rejects.toThrow(/EG_LEDGER_CORRUPT: the ledger file .*garbage\.db is damaged/);
    await expect(ledger.calls.get("acme", "toolu_1")).rejects.toThrow(/EG_LEDGER_CORRUPT/);
    expect(readFileSync(file, "utf8")).toBe(garbage);
  });

  it("refuses a record whose stored JSON is damaged, naming the record, and keeps the others readable", async () => {
    const file = join(dir, "bad-row.db");
    const ledger = sqliteLedger(file);
    await ledger.calls.claim(claimRequest({ key: "good" }));
    await ledger.calls.claim(claimRequest({ key: "bad" }));
    await ledger.close();
    const raw = new Database(file);
    raw.prepare("UPDATE calls SET result = '{not json', state = 'completed' WHERE key = 'bad'").run();
    raw.close();
    const again = sqliteLedger(file);
    await expect(again.calls.get("acme", "bad")).rejects.toThrow(/EG_LEDGER_CORRUPT.*record acme\/bad has unreadable result/);
    expect((await again.calls.get("acme", "good"))?.state).toBe("in_progress");
    await again.close();
  });

  it("refuses a ledger written by a newer schema, by name, without touching it", async () => {
    const file = join(dir, "future.db");
    const raw = new Database(file);
    raw.pragma("user_version = 99");
    raw.close();
    const ledger = sqliteLedger(file);
    await expect(ledger.calls.claim(claimRequest())).rejects.toThrow(/EG_LEDGER_TOO_NEW.*schema version 99/);
    const check = new Database(file);
    expect(check.pragma("user_version", { simple: true })).toBe(99);
    check.close();
  });

  it("says the ledger is unavailable when its directory cannot be created", async () => {
    const blocker = join(dir, "a-file");
    writeFileSync(blocker, "x");
    const ledger = sqliteLedger(join(blocker, "ledger.db"));
    await expect(ledger.calls.claim(claimRequest())).rejects.toThrow(/EG_LEDGER_UNAVAILABLE: the ledger .*a-file\/ledger\.db is unavailable \(could not open it/);
    expect(existsSync(join(blocker, "ledger.db"))).toBe(false);
  });

  it("create: false and readOnly refuse an empty file or another program's database, untouched", async () => {
    const empty = join(dir, "empty.db");
    writeFileSync(empty, "");
    const foreign = join(dir, "foreign.db");
    const raw = new Database(foreign);
    raw.exec("CREATE TABLE invoices (id INTEGER PRIMARY KEY)");
    raw.close();
    const before = readFileSync(foreign);
    for (const options of [{ create: false }, { readOnly: true }]) {
      await expect(sqliteLedger(empty, options).calls.list()).rejects.toThrow(/EG_LEDGER_UNAVAILABLE: .*empty\.db is not an effectgate ledger/);
      await expect(sqliteLedger(foreign, options).calls.list()).rejects.toThrow(/EG_LEDGER_UNAVAILABLE: .*foreign\.db is not an effectgate ledger/);
    }
    expect(readFileSync(empty).length).toBe(0);
    expect(readFileSync(foreign).equals(before)).toBe(true);
    expect(existsSync(`${foreign}-wal`)).toBe(false);
  });

  it("readOnly reads an existing ledger and cannot write to it", async () => {
    const file = join(dir, "ro.db");
    const rw = sqliteLedger(file);
    await rw.calls.claim(claimRequest());
    await rw.close();
    const ro = sqliteLedger(file, { readOnly: true });
    expect((await ro.calls.get("acme", "toolu_1"))?.state).toBe("in_progress");
    await expect(ro.calls.claim(claimRequest({ key: "new" }))).rejects.toThrow(/EG_LEDGER_UNAVAILABLE: .*readonly/);
    await ro.close();
  });

  it("keeps its WAL bounded: writes are checkpointed as they go, not left to grow with the ledger", async () => {
    const file = join(dir, "wal-bound.db");
    const ledger = sqliteLedger(file, { durability: "process" });
    for (let i = 0; i < 3000; i++) {
      const { record } = await ledger.calls.claim(claimRequest({ key: `k${i}` }));
      await ledger.calls.update("acme", `k${i}`, record.version, { state: "completed", result: { i }, owner: null });
    }
    // 3,000 calls write ~6,000 commits of several pages each; without checkpoints the WAL passes 40 MB.
    expect(statSync(`${file}-wal`).size).toBeLessThan(8 * 1024 * 1024);
    await ledger.close();
  });
});

// Switching a new file to WAL reads page 1, then upgrades to a write lock: SQLite refuses that
// upgrade at once (SQLITE_BUSY, no busy handler) while another connection holds the write lock,
// so opening used to fail with "database is locked" instead of waiting (test/stores/open-storm.test.ts
// is the same race between processes).
describe("opening a sqlite ledger another connection has locked", () => {
  /**
   * An empty SQLite database (a header, no tables: a zero-byte file is refused, not adopted)
   * in rollback-journal mode, whose write lock another connection holds.
   */
  function lockedNewFile(name: string) {
    const file = join(dir, name);
    const locker = new Database(file);
    locker.pragma("user_version = 0"); // writes the header
    locker.exec("BEGIN IMMEDIATE");
    return { file, release: () => { locker.exec("ROLLBACK"); locker.close(); } };
  }

  it("waits for the lock to go, then opens, switches the file to WAL and migrates it", async () => {
    const { file, release } = lockedNewFile("locked-new.db");
    const ledger = sqliteLedger(file, { busyTimeoutMs: 5000 });
    const released = new Promise<void>((resolve) => setTimeout(() => { release(); resolve(); }, 100));
    const started = Date.now();
    expect(await ledger.calls.list()).toEqual([]);
    await released;
    expect(Date.now() - started).toBeGreaterThanOrEqual(90);
    await ledger.calls.claim(claimRequest());
    await ledger.close();
    const check = new Database(file, { readonly: true });
    expect(check.pragma("journal_mode", { simple: true })).toBe("wal");
    expect(check.pragma("user_version", { simple: true })).toBeGreaterThan(0);
    check.close();
  });

  it("gives up after busyTimeoutMs, not at once, and says the ledger is unavailable; the next call opens it", async () => {
    const { file, release } = lockedNewFile("locked-long.db");
    const ledger = sqliteLedger(file, { busyTimeoutMs: 150 });
    const started = Date.now();
    await expect(ledger.calls.list()).rejects.toThrow(/EG_LEDGER_UNAVAILABLE: the ledger .*locked-long\.db is unavailable \(could not open it: database is locked\)/);
    expect(Date.now() - started).toBeGreaterThanOrEqual(140);
    release();
    expect(await ledger.calls.list()).toEqual([]);
    await ledger.close();
  });
});
