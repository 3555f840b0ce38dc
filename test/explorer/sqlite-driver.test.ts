/**
 * The fault explorer on SQLite with real driver faults inside its batches
 * (src/testing/explorer/sqlite-faults.ts): a second connection holding the write lock past the
 * store's busy timeout (SQLITE_BUSY) and a process that may not grow the WAL (SQLITE_IOERR), at
 * points the seed decides, on top of each schedule's own faults. Nothing a fault fails may end the
 * process, turn into a false answer or lose an outcome.
 */
import { describe, expect, it } from "vitest";
import { explore, type ExploreReport } from "../../src/testing/explorer/explore.js";

function summary(r: ExploreReport) {
  return `${r.schedules} schedules, ${r.calls} calls, faults ${JSON.stringify(r.faults)}, driver ${JSON.stringify(r.driver)}, ` +
    `violations ${JSON.stringify(r.byInvariant)}, process faults ${r.processFaults.length}` +
    [...r.violations, ...r.processFaults].slice(0, 10).map((v) => `\n  seed ${v.seed}: ${v.message}`).join("");
}

describe("the fault explorer on SQLite with driver faults inside its batches", () => {
  it("60 schedules: BUSY and IOERR fail real writes, no violation, and no fault ends the process", async () => {
    const r = await explore({ seed: 41_001, schedules: 60, ledger: { sqlite: true, driverFaults: true } });
    expect(r.ledger).toBe("sqlite+driver faults");
    expect(r.processFaults, summary(r)).toEqual([]);
    expect(r.violations, summary(r)).toEqual([]);
    expect(r.driver!.injected.busy, summary(r)).toBeGreaterThan(5);
    if (r.driver!.ioErrorUnavailable === undefined) expect(r.driver!.injected.ioError, summary(r)).toBeGreaterThan(3);
    // Faults that only slowed a write are not the point: the driver failed writes under the gate.
    expect(r.driver!.failed, summary(r)).toBeGreaterThan(5);
    console.log(`explorer with SQLite driver faults: ${summary(r)}`);
  }, 300_000);

  it("a seed replays its driver faults exactly", async () => {
    const run = () => explore({ seed: 41_101, schedules: 6, ledger: { sqlite: true, driverFaults: { busy: 0.2, ioError: 0.1 } } });
    const a = await run();
    const b = await run();
    expect(a.driver!.failed).toBeGreaterThan(0);
    expect(b.driver).toEqual(a.driver);
    expect(b.faults).toEqual(a.faults);
    expect(b.calls).toBe(a.calls);
  }, 300_000);
});
