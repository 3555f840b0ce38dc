import { join } from "node:path";
import Database from "better-sqlite3";
import { describe, expect, it } from "vitest";
import { sqliteLedger } from "../../src/stores/sqlite/index.js";
import { tempDir } from "../support/tmp.js";
import { beginRequest, stepRequest } from "../../src/testing/contract-suites/sagas.js";

const dir = tempDir("effectgate-saga-sqlite-");
// The SagaLog contract suite runs on SQLite in test/ledger/sqlite.test.ts, with the other suites.

describe("sqlite saga log files", () => {
  it("keeps sagas, steps and history across close and reopen", async () => {
    const file = join(dir, "reopen.db");
    const a = sqliteLedger(file);
    await a.sagas!.begin(beginRequest(), { kind: "saga_started", message: "started" });
    await a.sagas!.addStep(stepRequest(), { kind: "step_started", step: "charge", message: "charging" });
    await a.close();
    const b = sqliteLedger(file, { readOnly: true });
    expect(await b.sagas!.get("acme", "order-1")).toMatchObject({ state: "running" });
    expect((await b.sagas!.steps("acme", "order-1")).map((s) => s.name)).toEqual(["charge"]);
    expect((await b.sagas!.history("acme", "order-1")).map((e) => e.kind)).toEqual(["saga_started", "step_started"]);
    await expect(b.sagas!.update("acme", "order-1", 1, { state: "completed" })).rejects.toThrow(/EG_LEDGER_UNAVAILABLE/);
    await b.close();
  });

  it("refuses a damaged step row by name and keeps the others readable", async () => {
    const file = join(dir, "bad-step.db");
    const ledger = sqliteLedger(file);
    await ledger.sagas!.begin(beginRequest(), { kind: "saga_started", message: "started" });
    await ledger.sagas!.addStep(stepRequest({ name: "good" }));
    await ledger.sagas!.addStep(stepRequest({ name: "bad" }));
    await ledger.close();
    const raw = new Database(file);
    raw.prepare("UPDATE saga_steps SET result = '{not json', state = 'completed' WHERE name = 'bad'").run();
    raw.close();
    const again = sqliteLedger(file);
    await expect(again.sagas!.getStep("acme", "order-1", "bad")).rejects.toThrow(/EG_LEDGER_CORRUPT.*step bad of saga acme\/order-1 has unreadable result/);
    await expect(again.sagas!.steps("acme", "order-1")).rejects.toThrow(/EG_LEDGER_CORRUPT/);
    expect((await again.sagas!.getStep("acme", "order-1", "good"))?.state).toBe("pending");
    await again.close();
  });

  it("refuses a saga row with an unknown state instead of guessing", async () => {
    const file = join(dir, "bad-saga.db");
    const ledger = sqliteLedger(file);
    await ledger.sagas!.begin(beginRequest(), { kind: "saga_started", message: "started" });
    await ledger.close();
    const raw = new Database(file);
    raw.prepare("UPDATE sagas SET state = 'exploded'").run();
    raw.close();
    const again = sqliteLedger(file);
    await expect(again.sagas!.get("acme", "order-1")).rejects.toThrow(/EG_LEDGER_CORRUPT.*saga acme\/order-1.*unknown state "exploded"/);
    await again.close();
  });
});
