/**
 * The fault explorer on PostgreSQL through the wire-level proxy (src/testing/explorer/proxy-ledger.ts):
 * on top of each schedule's own faults, the proxy cuts connections, drops the replies to COMMITs
 * (committed, never heard), delays and stalls replies, at points its seed decides. The ledger's
 * clock option sends every statement on a checked-out connection, so every cut lands where the
 * missing 'error' listener ended the process; the explorer counts each uncaught error as a
 * process fault, so this file failed before the listener fix.
 */
import { describe, expect, it } from "vitest";
import { explore, type ExploreReport } from "../../src/testing/explorer/explore.js";
import { usePostgres } from "../support/pg.js";

const db = usePostgres();

function summary(r: ExploreReport) {
  return `${r.schedules} schedules, ${r.calls} calls, faults ${JSON.stringify(r.faults)}, proxy ${JSON.stringify(r.proxy)}, ` +
    `violations ${JSON.stringify(r.byInvariant)}, process faults ${r.processFaults.length}` +
    [...r.violations, ...r.processFaults].slice(0, 10).map((v) => `\n  seed ${v.seed}: ${v.message}`).join("");
}

describe("the fault explorer on PostgreSQL behind a faulty network", () => {
  it("16 schedules: faults at the wire as well as in the schedule, no violation, and no fault ends the process", async () => {
    const r = await explore({ seed: 31_001, schedules: 16, ledger: { postgres: db.url, proxy: true } });
    expect(r.ledger).toBe("postgres+proxy");
    expect(r.processFaults, summary(r)).toEqual([]);
    expect(r.violations, summary(r)).toEqual([]);
    // The proxy did inject: connections cut before a request, and COMMITs whose reply was dropped.
    expect(r.proxy!.cuts + r.proxy!.droppedReplies, summary(r)).toBeGreaterThan(10);
    console.log(`explorer behind the proxy: ${summary(r)}`);
  }, 300_000);

  it("a seed replays its wire faults exactly: the same schedules twice meet the same faults", async () => {
    const run = () => explore({ seed: 31_101, schedules: 4, ledger: { postgres: db.url, proxy: true } });
    const a = await run();
    const b = await run();
    expect(a.proxy!.cuts + a.proxy!.droppedReplies + a.proxy!.delayedReplies + a.proxy!.stalls).toBeGreaterThan(0);
    expect(b.proxy).toEqual(a.proxy);
    expect(b.faults).toEqual(a.faults);
    expect(b.calls).toBe(a.calls);
  }, 300_000);
});
