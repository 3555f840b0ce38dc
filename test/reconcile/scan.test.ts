/**
 * The pull scan's rules against an in-process downstream with a clock the test moves:
 * incremental cursors, the settle horizon, explicit windows, auto-resolution, and the cases
 * between "completed" and "orphan" (failed calls, calls still running, tenants, bad lookups).
 */
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { createGate, type Gate } from "../../src/root/create-gate.js";
import type { Stores } from "../../src/contracts/stores.js";
import { memoryLedger } from "../../src/stores/memory/index.js";
import { sqliteLedger } from "../../src/stores/sqlite/index.js";
import { reconcile } from "../../src/reconcile/scan.js";
import { resolveCall } from "../../src/reconcile/queue.js";
import { defineTool } from "../../src/core/tool.js";
import { z } from "zod";
import { tempDir } from "../support/tmp.js";
import { emailTool, emailUse, fakeDownstream, manualClock } from "./support.js";

const scope = { tenant: "acme", task: "t1" };

const dir = tempDir("effectgate-scan-");

function setup(options: { ledger?: Stores; clockStart?: number } = {}) {
  const clock = manualClock(options.clockStart);
  const downstream = fakeDownstream();
  const ledger = options.ledger ?? memoryLedger({ clock: clock.now });
  const tool = emailTool(downstream, clock);
  const gate = createGate({ ledger, tools: [tool], onAlert: () => {} });
  return { clock, downstream, ledger, tool, gate };
}

async function send(gate: Gate, ids: readonly string[]) {
  const results = await gate.runToolUses(ids.map((id) => emailUse(id)), scope);
  expect(results.filter((r) => r.is_error)).toEqual([]);
}

describe("incremental scans", () => {
  it("a second scan over an unchanged ledger reads nothing and reports nothing new; a third reads exactly what is new", async () => {
    const { gate, clock } = setup();
    await send(gate, Array.from({ length: 30 }, (_, i) => `toolu_${i}`));
    clock.advance(120_000);
    const first = await gate.reconcile();
    expect(first).toMatchObject({ recordsRead: 30, confirmed: 30, newFindings: [] });

    const second = await gate.reconcile();
    expect(second).toMatchObject({ recordsRead: 0, confirmed: 0, newFindings: [], seenAgain: 0 });
    expect(second.tools[0]).toMatchObject({ keyLookups: 0 });

    await send(gate, ["toolu_new_1", "toolu_new_2", "toolu_new_3"]);
    clock.advance(120_000);
    const third = await gate.reconcile();
    expect(third).toMatchObject({ recordsRead: 3, confirmed: 3, newFindings: [] });
    expect(third.tools[0]?.cursor).toMatchObject({ tenant: "acme", key: "toolu_new_3" });
  });

  it("on SQLite with 2,000 records a repeat scan reads 0 records and a scan after 5 new calls reads 5", async () => {
    // SQLite stamps records with the real clock: the downstream's clock starts there too.
    const { gate, ledger } = setup({ ledger: sqliteLedger(join(dir, "big.db"), { durability: "process" }), clockStart: Date.now() });
    for (let i = 0; i < 2000; i += 100) await send(gate, Array.from({ length: 100 }, (_, j) => `toolu_${i + j}`));
    const first = await gate.reconcile({ settleMs: 0 });
    expect(first).toMatchObject({ recordsRead: 2000, confirmed: 2000, newFindings: [] });
    const second = await gate.reconcile({ settleMs: 0 });
    expect(second).toMatchObject({ recordsRead: 0, newFindings: [] });
    await send(gate, ["a1", "a2", "a3", "a4", "a5"]);
    const third = await gate.reconcile({ settleMs: 0 });
    expect(third).toMatchObject({ recordsRead: 5, confirmed: 5, newFindings: [] });
    await gate.close();
    await ledger.close();
  });

  it("records changed within settleMs of the ledger's clock are left for the next scan, not skipped", async () => {
    const { gate, clock } = setup();
    await send(gate, ["toolu_1"]);
    clock.advance(10_000);
    await send(gate, ["toolu_2"]);
    const early = await gate.reconcile({ settleMs: 30_000 });
    expect(early.recordsRead).toBe(0);
    clock.advance(25_000); // toolu_1 is 35 s old, toolu_2 25 s
    const middle = await gate.reconcile({ settleMs: 30_000 });
    expect(middle).toMatchObject({ recordsRead: 1, confirmed: 1 });
    clock.advance(10_000);
    const late = await gate.reconcile({ settleMs: 30_000 });
    expect(late).toMatchObject({ recordsRead: 1, confirmed: 1, newFindings: [] });
  });

  it("asks the downstream for a window covering the new records and the last window's end, widened by the skew", async () => {
    const { gate, clock, downstream } = setup();
    const start = clock.now();
    await send(gate, ["toolu_1"]);
    clock.advance(100_000);
    await gate.reconcile({ settleMs: 1000, skewMs: 5000 });
    expect(downstream.windows.at(-1)).toEqual({ since: start - 5000, until: start + 100_000 - 1000 + 5000 });
    clock.advance(50_000);
    await gate.reconcile({ settleMs: 1000, skewMs: 5000 });
    expect(downstream.windows.at(-1)).toEqual({ since: start + 99_000 - 5000, until: start + 149_000 + 5000 });
  });

  it("an explicit window scans what changed in it and neither reads nor moves the saved cursor", async () => {
    const { gate, clock } = setup();
    await send(gate, ["toolu_1"]);
    clock.advance(60_000);
    const mid = clock.now();
    await send(gate, ["toolu_2"]);
    clock.advance(120_000);
    const window = await gate.reconcile({ since: mid, until: clock.now() });
    // One ledger record changed in the window; the downstream window, widened by the skew, also shows toolu_1's record.
    expect(window).toMatchObject({ incremental: false, recordsRead: 1, newFindings: [] });
    const incremental = await gate.reconcile();
    expect(incremental).toMatchObject({ incremental: true, recordsRead: 2 });
  });
});

describe("what a scan reports", () => {
  it("a resolved finding stays resolved when a full rescan sees the same difference again", async () => {
    const { gate, clock, downstream, ledger } = setup();
    await send(gate, ["toolu_1"]);
    downstream.records[0] = { ...downstream.records[0]!, fields: { to: "mallory@example.com" } };
    clock.advance(120_000);
    const first = await gate.reconcile();
    const [mismatch] = first.newFindings;
    expect(mismatch).toMatchObject({ kind: "mismatch", differences: [{ field: "to", ledger: "ann@example.com", downstream: "mallory@example.com" }] });
    await ledger.reconcile!.resolveFinding(mismatch!.id, { note: "the address was corrected downstream by support", by: "ops" });
    const rescan = await gate.reconcile({ since: 0, until: clock.now() });
    expect(rescan).toMatchObject({ newFindings: [], seenAgain: 1 });
    expect(await ledger.reconcile!.getFinding(mismatch!.id)).toMatchObject({ status: "resolved", timesSeen: 2, resolution: "the address was corrected downstream by support" });
  });

  it("an unresolved call's finding closes itself once the call is settled, and the next scan confirms the call", async () => {
    const { gate, clock, downstream, ledger } = setup();
    const { record } = await ledger.calls.claim({
      tenant: "acme", key: "toolu_x", tool: "send_email", effect: "write", task: "t1", toolUseId: "toolu_x", fingerprint: "f",
      input: { to: "ann@example.com", subject: "hello" }, inputRedacted: false, owner: "gone", leaseMs: 1,
    });
    await ledger.calls.update("acme", "toolu_x", record.version, { state: "needs_human", error: "no probe", owner: null });
    downstream.records.push({ ref: "msg_77", key: "toolu_x", at: clock.now(), fields: { to: "ann@example.com" } });
    clock.advance(120_000);
    const first = await gate.reconcile();
    expect(first.newFindings.map((f) => f.kind)).toEqual(["unresolved"]);
    await resolveCall(ledger, "acme", "toolu_x", { completedWith: { id: "msg_77", to: "ann@example.com" }, note: "sent, per the mail log" });
    expect(await ledger.reconcile!.getFinding(first.newFindings[0]!.id)).toMatchObject({ status: "resolved" });
    clock.advance(120_000);
    const second = await gate.reconcile();
    expect(second).toMatchObject({ recordsRead: 1, confirmed: 1, newFindings: [] });
  });

  it("a call that goes from uncertain to needs_human has one open unresolved finding, not two", async () => {
    const { gate, clock, ledger } = setup();
    const { record } = await ledger.calls.claim({
      tenant: "acme", key: "toolu_u", tool: "send_email", effect: "write", task: "t1", toolUseId: "toolu_u", fingerprint: "f",
      input: { to: "ann@example.com", subject: "hello" }, inputRedacted: false, owner: "gone", leaseMs: 1,
    });
    const uncertain = await ledger.calls.update("acme", "toolu_u", record.version, { state: "uncertain", error: "timed out", owner: null });
    clock.advance(120_000);
    const first = await gate.reconcile();
    expect(first.newFindings).toEqual([expect.objectContaining({ kind: "unresolved", ledger: expect.objectContaining({ state: "uncertain" }) })]);
    await ledger.calls.update("acme", "toolu_u", uncertain!.version, { state: "needs_human", error: "probe budget spent", owner: null });
    clock.advance(120_000);
    const second = await gate.reconcile();
    expect(second).toMatchObject({ recordsRead: 1, autoResolved: 1 });
    expect(second.newFindings).toEqual([expect.objectContaining({ kind: "unresolved", ledger: expect.objectContaining({ state: "needs_human" }) })]);
    expect((await ledger.reconcile!.listFindings({ status: "open" })).map((f) => f.ledger?.state)).toEqual(["needs_human"]);
  });

  it("a missing_downstream finding closes itself when the downstream record turns up in a later window", async () => {
    const { gate, clock, downstream, ledger } = setup();
    await send(gate, ["toolu_1"]);
    const late = downstream.records.pop()!;
    clock.advance(120_000);
    const first = await gate.reconcile();
    expect(first.newFindings.map((f) => f.kind)).toEqual(["missing_downstream"]);
    downstream.records.push({ ...late, at: clock.now() });
    clock.advance(120_000);
    const second = await gate.reconcile();
    expect(second).toMatchObject({ recordsRead: 0, newFindings: [], autoResolved: 1, confirmed: 1 });
    expect(second.tools[0]).toMatchObject({ keyLookups: 1 });
    expect(await ledger.reconcile!.listFindings({ status: "open" })).toEqual([]);
  });

  it("a failed call with a downstream record is an orphan: the ledger says no effect happened", async () => {
    const clock = manualClock();
    const downstream = fakeDownstream();
    const ledger = memoryLedger({ clock: clock.now });
    const flaky = defineTool({
      name: "send_email", effect: "write", input: z.object({ to: z.string() }),
      async execute(_input, ctx) {
        downstream.records.push({ ref: "msg_1", key: ctx.idempotencyKey, at: clock.now() });
        throw Object.assign(new Error("422 rejected"), { status: 422 });
      },
      async lookup() {
        return downstream.records;
      },
    });
    const gate = createGate({ ledger, tools: [flaky], onAlert: () => {} });
    await gate.runToolUses([{ type: "tool_use", id: "toolu_f", name: "send_email", input: { to: "a" } }], scope);
    expect((await ledger.calls.get("acme", "toolu_f"))?.state).toBe("failed");
    clock.advance(120_000);
    const summary = await gate.reconcile();
    expect(summary.newFindings).toHaveLength(1);
    expect(summary.newFindings[0]).toMatchObject({ kind: "orphan_downstream", tenant: "acme", key: "toolu_f", ledger: { state: "failed" } });
    expect(summary.newFindings[0]!.summary).toMatch(/records this call as failed/);
  });

  it("a downstream record whose call is still in progress is linked, not reported; once completed it is confirmed", async () => {
    const { gate, clock, downstream, ledger } = setup();
    const { record } = await ledger.calls.claim({
      tenant: "acme", key: "toolu_r", tool: "send_email", effect: "write", task: "t1", toolUseId: "toolu_r", fingerprint: "f",
      input: { to: "ann@example.com", subject: "hello" }, inputRedacted: false, owner: "worker-b", leaseMs: 600_000,
    });
    downstream.records.push({ ref: "msg_r", key: "toolu_r", at: clock.now(), fields: { to: "ann@example.com" } });
    clock.advance(120_000);
    const running = await gate.reconcile();
    expect(running).toMatchObject({ recordsRead: 0, newFindings: [] });
    expect(running.tools[0]).toMatchObject({ keyLookups: 1 });
    await ledger.calls.update("acme", "toolu_r", record.version, { state: "completed", result: { id: "msg_r", to: "ann@example.com" }, owner: null });
    clock.advance(120_000);
    const done = await gate.reconcile();
    expect(done).toMatchObject({ recordsRead: 1, confirmed: 1, newFindings: [] });
    expect(done.tools[0]).toMatchObject({ alreadyMatched: 0 });
  });

  it("downstream records naming a tenant match that tenant's call; a key in two tenants without one is reported, not guessed", async () => {
    const { gate, clock, downstream } = setup();
    for (const tenant of ["acme", "globex"]) {
      await gate.runToolUses([emailUse("toolu_same")], { tenant, task: "t" });
      downstream.records.push({ ...downstream.records.pop()!, tenant });
    }
    clock.advance(120_000);
    expect(await gate.reconcile()).toMatchObject({ recordsRead: 2, confirmed: 2, newFindings: [] });
    // Two new records for that key: one says its tenant, one does not.
    downstream.records.push({ ref: "msg_t", key: "toolu_same", tenant: "globex", at: clock.now(), fields: { to: "ann@example.com" } });
    downstream.records.push({ ref: "msg_u", key: "toolu_same", at: clock.now(), fields: { to: "ann@example.com" } });
    clock.advance(120_000);
    const summary = await gate.reconcile();
    const kinds = summary.newFindings.map((f) => `${f.kind} ${f.tenant ?? "-"} ${f.downstream.map((d) => d.ref).join("+")}`).sort();
    expect(kinds).toEqual([
      "duplicate_downstream globex msg_2+msg_t",
      "orphan_downstream - msg_u",
    ]);
    expect(summary.newFindings.find((f) => f.kind === "orphan_downstream")!.summary).toMatch(/several tenants \(acme, globex\)/);
  });

  it("skips tools without a lookup, refuses to be pointed at one, and refuses a lookup's malformed record", async () => {
    const clock = manualClock();
    const downstream = fakeDownstream();
    const ledger = memoryLedger({ clock: clock.now });
    const plain = emailTool(downstream, clock, { name: "plain", lookup: false });
    const summary = await reconcile({ ledger, tools: [plain] });
    expect(summary.tools).toEqual([expect.objectContaining({ tool: "plain", skipped: "it has no lookup" })]);
    await expect(reconcile({ ledger, tools: [plain] }, { tools: ["plain"] })).rejects.toThrow(/EG_BAD_TOOL_DEFINITION: cannot reconcile plain: it has no lookup/);
    await expect(reconcile({ ledger, tools: [plain] }, { tools: ["nope"] })).rejects.toThrow(/EG_UNKNOWN_TOOL/);
    const broken = defineTool({
      name: "broken", effect: "write", input: z.object({}), execute: async () => null,
      async lookup() {
        return [{ key: "k" } as never];
      },
    });
    await expect(reconcile({ ledger, tools: [broken] })).rejects.toThrow(/broken.lookup returned .*non-empty string ref/);
  });

  it("refuses a ledger without a reconcile store, naming it", async () => {
    const clock = manualClock();
    const { reconcile: _omit, ...bare } = memoryLedger({ clock: clock.now });
    await expect(reconcile({ ledger: bare, tools: [] })).rejects.toThrow(/EG_LEDGER_UNAVAILABLE: the ledger memory keeps no reconciliation data/);
  });
});
