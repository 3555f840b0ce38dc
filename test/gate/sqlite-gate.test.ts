import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import Database from "better-sqlite3";
import { describe, expect, it } from "vitest";
import { createGate } from "../../src/root/create-gate.js";
import { sqliteLedger } from "../../src/stores/sqlite/index.js";
import type { Alert } from "../../src/gate/alerts.js";
import { chargeTool, counter, toolUse } from "../support/tools.js";
import { tempDir } from "../support/tmp.js";

const dir = tempDir();
const scope = { tenant: "acme", task: "t1" };
const charge = (id: string) => [toolUse(id, "charge_card", { customer: "cus_1", amount: 10 })];

describe("the gate on SQLite", () => {
  it("uses .effectgate/ledger.db in the working directory by default", async () => {
    const cwd = process.cwd();
    const here = join(dir, "default");
    const { mkdirSync } = await import("node:fs");
    mkdirSync(here);
    process.chdir(here);
    try {
      const gate = createGate({ tools: [chargeTool(counter())] });
      await gate.runToolUses(charge("toolu_1"), scope);
      await gate.close();
      expect(existsSync(join(here, ".effectgate", "ledger.db"))).toBe(true);
      const again = sqliteLedger(join(here, ".effectgate", "ledger.db"));
      expect((await again.calls.get("acme", "toolu_1"))?.state).toBe("completed");
      await again.close();
    } finally {
      process.chdir(cwd);
    }
  });

  it("a corrupt ledger file: every call fails naming the file, nothing executes, the file is kept", async () => {
    const file = join(dir, "corrupt.db");
    const bytes = Buffer.alloc(8192, 0x5a);
    writeFileSync(file, bytes);
    const c = counter();
    const gate = createGate({ tools: [chargeTool(c)], ledger: sqliteLedger(file) });
    const [r] = await gate.runToolUses(charge("toolu_1"), scope);
    expect(r!.is_error).toBe(true);
    expect(r!.content).toContain(`EG_LEDGER_CORRUPT: the ledger file ${file} is damaged`);
    expect(r!.content).toMatch(/no call was executed/);
    expect(c.total).toBe(0);
    expect(readFileSync(file).equals(bytes)).toBe(true);
  });

  it("records survive a restart: a new gate on the same file replays instead of executing", async () => {
    const file = join(dir, "restart.db");
    const c = counter();
    const first = createGate({ tools: [chargeTool(c)], ledger: sqliteLedger(file) });
    const [a] = await first.runToolUses(charge("toolu_1"), scope);
    await first.ledger.close();
    const second = createGate({ tools: [chargeTool(c)], ledger: sqliteLedger(file) });
    const [b] = await second.runToolUses(charge("toolu_1"), scope);
    expect(b).toEqual(a);
    expect(c.total).toBe(1);
    await second.ledger.close();
  });

  it("another process holding the write lock makes recording fail: the agent still gets the true result, an alert is raised", async () => {
    const file = join(dir, "locked.db");
    const alerts: Alert[] = [];
    const c = counter();
    let locker: Database.Database | undefined;
    const gate = createGate({
      tools: [chargeTool(c, { probe: () => ({ status: "absent" }) })],
      ledger: sqliteLedger(file, { busyTimeoutMs: 20 }),
      onAlert: (a) => alerts.push(a),
      // Right after the side effect, a second connection takes the database's write lock.
      faults: (point) => {
        if (point !== "after_execute") return;
        locker = new Database(file);
        locker.exec("BEGIN EXCLUSIVE");
      },
    });
    const [r] = await gate.runToolUses(charge("toolu_1"), scope);
    expect(r!.is_error).toBe(false);
    expect(JSON.parse(r!.content)).toMatchObject({ customer: "cus_1", amount: 10 });
    expect(alerts.map((a) => a.code)).toEqual(["record_failed"]);
    expect(alerts[0]!.message).toMatch(/could not be recorded: EG_LEDGER_UNAVAILABLE: .*database is locked/);
    locker!.exec("ROLLBACK");
    locker!.close();
    expect((await gate.ledger.calls.get("acme", "toolu_1"))?.state).toBe("in_progress");
    // The gate keeps writing the outcome in the background: let it finish, or it reopens the file after the test.
    await gate.drain();
    await gate.ledger.close();
  });

  it("create: false refuses a missing file instead of making an empty ledger", async () => {
    const file = join(dir, "missing", "ledger.db");
    const ledger = sqliteLedger(file, { create: false });
    await expect(ledger.calls.list()).rejects.toThrow(/EG_LEDGER_UNAVAILABLE: there is no ledger at .*missing\/ledger\.db/);
    expect(existsSync(file)).toBe(false);
  });
});
