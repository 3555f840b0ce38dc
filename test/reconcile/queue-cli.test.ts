/**
 * `effectgate reconcile` and `effectgate queue ls|show|resolve` through the BUILT command
 * (node dist/cli/main.js; build first), against a SQLite ledger the gate filled, a real
 * payments service on 127.0.0.1 with seeded drift, and a tools module the CLI imports.
 */
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createGate } from "../../src/root/create-gate.js";
import { sqliteLedger } from "../../src/stores/sqlite/index.js";
import { startPaymentService, type DriftReport, type PaymentService } from "../../demo/payment-service.js";
import { chargeCardTool } from "../../demo/payment-tool.js";
import type { QueueItem } from "../../src/reconcile/queue.js";
import type { ReconcileSummary } from "../../src/reconcile/scan.js";
import type { Finding } from "../../src/contracts/findings.js";
import type { CallRecord } from "../../src/contracts/calls.js";
import { fingerprint } from "../../src/core/keys.js";
import { tempDir } from "../support/tmp.js";
import { runCli } from "../cli/run-cli.js";

const dir = tempDir("effectgate-queue-cli-");
const db = join(dir, "ledger.db");
const toolsModule = join(dir, "tools.mjs");
const scope = { tenant: "acme", task: "billing" };
let service: PaymentService;
let drift: DriftReport;
let env: Record<string, string>;

const json = <T>(text: string): T => JSON.parse(text) as T;
const cli = (args: readonly string[]) => runCli(args, { env });

beforeAll(async () => {
  service = await startPaymentService({ seed: 7 });
  env = { PAYMENTS_URL: service.url };
  const builtTool = fileURLToPath(new URL("../../dist/demo/payment-tool.js", import.meta.url));
  writeFileSync(toolsModule, `import { chargeCardTool } from ${JSON.stringify(builtTool)};\nexport const tools = [chargeCardTool(process.env.PAYMENTS_URL)];\n`);

  const ledger = sqliteLedger(db);
  const gate = createGate({ ledger, tools: [chargeCardTool(service.url)], onAlert: () => {} });
  const uses = Array.from({ length: 12 }, (_, i) => ({ type: "tool_use", id: `toolu_c${i}`, name: "charge_card", input: { customer: `cus_${i}`, amount: 10 + i } }));
  const results = await gate.runToolUses(uses, scope);
  expect(results.filter((r) => r.is_error)).toEqual([]);
  for (const key of ["toolu_h1", "toolu_h2"]) {
    const { record } = await ledger.calls.claim({
      tenant: "acme", key, tool: "charge_card", effect: "write", task: "billing", toolUseId: key,
      fingerprint: fingerprint("charge_card", { customer: "cus_h", amount: 99 }),
      input: { customer: "cus_h", amount: 99 }, inputRedacted: false, owner: "worker-gone", leaseMs: 1,
    });
    await ledger.calls.update("acme", key, record.version, { state: "needs_human", error: "no reply within 30000 ms; no probe answer", owner: null });
  }
  drift = service.injectDrift({ seed: 7, dropped: 1, altered: 1, orphans: 1 });
  await gate.close();
  await ledger.close();
});

afterAll(async () => {
  await service?.close();
});

describe("effectgate reconcile and queue, built", () => {
  let findings: Finding[] = [];

  it("reconcile --json finds exactly the drift and the two calls waiting for a person", async () => {
    const { code, stdout, stderr } = await cli(["reconcile", "--db", db, "--tools", toolsModule, "--settle", "0", "--json"]);
    expect(stderr).toBe("");
    expect(code).toBe(0);
    const summary = json<ReconcileSummary>(stdout);
    findings = [...summary.newFindings];
    expect(findings.map((f) => `${f.kind} ${f.key}`).sort()).toEqual([
      `missing_downstream ${drift.dropped[0]!.key}`,
      `mismatch ${drift.altered[0]!.before.key}`,
      `orphan_downstream ${drift.orphans[0]!.key}`,
      "unresolved toolu_h1",
      "unresolved toolu_h2",
    ].sort());
    expect(summary).toMatchObject({ recordsRead: 14, confirmed: 10, incremental: true });
  });

  it("a second reconcile reads nothing new and says so in its table", async () => {
    const { code, stdout } = await cli(["reconcile", "--db", db, "--tools", toolsModule, "--settle", "0"]);
    expect(code).toBe(0);
    expect(stdout).toMatch(/^TOOL\s+LEDGER READ\s+DOWNSTREAM READ\s+CONFIRMED\s+NEW FINDINGS/m);
    expect(stdout).toMatch(/^charge_card\s+0\s+\d+\s+0\s+0\s/m);
    expect(stdout).toMatch(/No new differences\./);
  });

  it("queue ls lists the calls waiting for a person, with their findings attached, and the other findings", async () => {
    const { code, stdout, stderr } = await cli(["queue", "ls", "--db", db, "--json"]);
    expect(stderr).toBe("");
    expect(code).toBe(0);
    const items = json<QueueItem[]>(stdout);
    expect(items.map((i) => `${i.kind} ${i.key}`).sort()).toEqual([
      `missing_downstream ${drift.dropped[0]!.key}`,
      `mismatch ${drift.altered[0]!.before.key}`,
      "needs_human toolu_h1",
      "needs_human toolu_h2",
      `orphan_downstream ${drift.orphans[0]!.key}`,
    ].sort());
    const h1 = items.find((i) => i.key === "toolu_h1")!;
    expect(h1.related.map((f) => f.kind)).toEqual(["unresolved"]);
    expect(h1.call).toMatchObject({ state: "needs_human", input: { customer: "cus_h", amount: 99 } });

    const table = await cli(["queue", "ls", "--db", db]);
    expect(table.code).toBe(0);
    expect(table.stdout).toMatch(/^ID\s+KIND\s+TENANT\s+TOOL\s+KEY\s+WAITING SINCE\s+WHAT$/m);
    expect(table.stdout).toMatch(/^toolu_h1\s+needs_human\s+acme\s+charge_card\s+toolu_h1\s+\S+\s+no reply within 30000 ms; no probe answer \(\+1 finding\)$/m);
    expect(table.stdout).toMatch(/^f_[0-9a-f]{16}\s+orphan_downstream\s+-\s+charge_card\s+orphan_7_0\s/m);
    expect(table.stdout).toMatch(/5 items need a person in /);
  });

  it("queue show explains a finding and a call, with how to resolve each", async () => {
    const mismatch = findings.find((f) => f.kind === "mismatch")!;
    const shown = await cli(["queue", "show", mismatch.id, "--db", db]);
    expect(shown.code).toBe(0);
    expect(shown.stdout).toContain(`Finding ${mismatch.id}`);
    expect(shown.stdout).toMatch(/kind\s+mismatch/);
    expect(shown.stdout).toContain(`amount: ledger ${drift.altered[0]!.before.amount}, downstream ${drift.altered[0]!.after.amount}`);
    expect(shown.stdout).toMatch(/The ledger's call:\n\s+state\s+completed/);
    expect(shown.stdout).toMatch(/To resolve:\n.*--note/);

    const call = await cli(["queue", "show", "toolu_h1", "--db", db, "--json"]);
    expect(call.code).toBe(0);
    expect(json<QueueItem>(call.stdout)).toMatchObject({ kind: "needs_human", key: "toolu_h1", related: [{ kind: "unresolved" }] });
    const text = await cli(["queue", "show", "toolu_h1", "--db", db]);
    expect(text.stdout).toMatch(/Call toolu_h1 in tenant acme/);
    expect(text.stdout).toMatch(/Open findings about this call:/);
    expect(text.stdout).toMatch(/--completed-with JSON/);

    expect(await cli(["queue", "show", "f_0000000000000000", "--db", db])).toMatchObject({ code: 1, stderr: expect.stringMatching(/no finding or call "f_0000000000000000"/) });
  });

  it("queue resolve closes a finding with a note, and it stays resolved on the next scans", async () => {
    const orphan = findings.find((f) => f.kind === "orphan_downstream")!;
    expect(await cli(["queue", "resolve", orphan.id, "--db", db])).toMatchObject({ code: 2, stderr: expect.stringMatching(/needs --note/) });
    const done = await cli(["queue", "resolve", orphan.id, "--db", db, "--note", "a test charge made by hand in the dashboard", "--by", "ops"]);
    expect(done).toMatchObject({ code: 0, stderr: "" });
    expect(done.stdout).toMatch(/Resolved finding f_[0-9a-f]{16} \(orphan_downstream, charge_card orphan_7_0\)/);

    // A full rescan (explicit window) sees the same orphan again; an incremental one reads nothing.
    const rescan = json<ReconcileSummary>((await cli(["reconcile", "--db", db, "--tools", toolsModule, "--since", "0", "--json"])).stdout);
    expect(rescan).toMatchObject({ incremental: false, newFindings: [] });
    expect(rescan.seenAgain).toBeGreaterThanOrEqual(1);
    const incremental = json<ReconcileSummary>((await cli(["reconcile", "--db", db, "--tools", toolsModule, "--settle", "0", "--json"])).stdout);
    expect(incremental).toMatchObject({ recordsRead: 0, newFindings: [] });

    const shown = json<{ finding: Finding }>((await cli(["queue", "show", orphan.id, "--db", db, "--json"])).stdout);
    expect(shown.finding).toMatchObject({ status: "resolved", resolution: "a test charge made by hand in the dashboard", resolvedBy: "ops" });
    expect(shown.finding.timesSeen).toBeGreaterThanOrEqual(2);
    const items = json<QueueItem[]>((await cli(["queue", "ls", "--db", db, "--json"])).stdout);
    expect(items.map((i) => i.id)).not.toContain(orphan.id);

    const again = await cli(["queue", "resolve", orphan.id, "--db", db, "--note", "twice"]);
    expect(again).toMatchObject({ code: 0 });
    expect(again.stdout).toMatch(/was already resolved .* by ops: a test charge made by hand in the dashboard\. Left as it was\./);
  });

  it("queue resolve settles needs_human calls as completed or failed, as the state table allows", async () => {
    const completed = await cli(["queue", "resolve", "toolu_h1", "--db", db, "--completed-with", '{"id":"ch_manual","amount":99}', "--note", "found in the dashboard", "--by", "ops"]);
    expect(completed).toMatchObject({ code: 0, stderr: "" });
    expect(completed.stdout).toMatch(/Call toolu_h1 \(tenant acme, charge_card\) is now completed\. .* Closed 1 finding about it\./);
    const failed = await cli(["queue", "resolve", "toolu_h2", "--db", db, "--failed", "no charge with this key in the dashboard", "--json"]);
    expect(failed.code).toBe(0);
    expect(json<CallRecord>(failed.stdout)).toMatchObject({ state: "failed", error: expect.stringMatching(/^EG_TOOL_FAILED: charge_card failed \(settled by a person \(\S+\)\): no charge with this key/) });

    // The agent replaying the settled call gets what the person recorded, and nothing runs.
    const ledger = sqliteLedger(db);
    const gate = createGate({ ledger, tools: [chargeCardTool(service.url)], onAlert: () => {} });
    const charges = service.charges.length;
    const [replayed] = await gate.runToolUses([{ type: "tool_use", id: "toolu_h1", name: "charge_card", input: { customer: "cus_h", amount: 99 } }], scope);
    expect(replayed).toMatchObject({ is_error: false, content: '{"id":"ch_manual","amount":99}' });
    expect(service.charges.length).toBe(charges);
    await gate.close();
    await ledger.close();

    const items = json<QueueItem[]>((await cli(["queue", "ls", "--db", db, "--json"])).stdout);
    expect(items.map((i) => i.kind).sort()).toEqual(["mismatch", "missing_downstream"]);
  });

  it("--help says how the tools reach the CLI, and that the queue needs none", async () => {
    const reconcileHelp = await cli(["reconcile", "--help"]);
    expect(reconcileHelp.code).toBe(0);
    expect(reconcileHelp.stdout).toContain("--tools <module>");
    expect(reconcileHelp.stdout).toContain("export const tools = [chargeCard, sendEmail];");
    expect(reconcileHelp.stdout).toMatch(/missing_downstream\s+the ledger says completed/);
    const queueHelp = await cli(["queue", "--help"]);
    expect(queueHelp.stdout).toContain("These commands need no tools module.");
    expect((await cli(["queue", "resolve", "--help"])).stdout).toContain("--completed-with <json>");
  });

  it("refuses what it cannot do, with the exit codes documented", async () => {
    const notWaiting = await cli(["queue", "resolve", "toolu_c0", "--db", db, "--failed", "x"]);
    expect(notWaiting.code).toBe(1);
    expect(notWaiting.stderr).toMatch(/EG_ILLEGAL_TRANSITION: call toolu_c0 cannot move from completed to failed .*Only a needs_human call is settled here/);
    expect((await cli(["queue", "resolve", "toolu_c1", "--db", db])).code).toBe(2);
    expect((await cli(["queue", "resolve", "toolu_c1", "--db", db, "--completed-with", "{nope"])).stderr).toMatch(/--completed-with must be JSON/);
    expect((await cli(["queue", "resolve", "toolu_c1", "--db", db, "--completed-with", "1", "--failed", "x"])).code).toBe(2);
    const finding = findings.find((f) => f.kind === "mismatch")!;
    expect(await cli(["queue", "resolve", finding.id, "--db", db, "--failed", "x"])).toMatchObject({ code: 2, stderr: expect.stringMatching(/is a finding, not a call/) });
    expect((await cli(["queue", "ls", "--db", join(dir, "typo.db")])).code).toBe(2);
    expect((await cli(["reconcile", "--db", db])).code).toBe(2);
    expect(await cli(["reconcile", "--db", db, "--tools", join(dir, "missing.mjs")])).toMatchObject({ code: 2, stderr: expect.stringMatching(/there is no tools module/) });
    writeFileSync(join(dir, "bad-tools.mjs"), "export const tools = 42;\n");
    expect(await cli(["reconcile", "--db", db, "--tools", join(dir, "bad-tools.mjs")])).toMatchObject({ code: 2, stderr: expect.stringMatching(/must export `tools`/) });
    expect(await cli(["reconcile", "--db", db, "--tools", toolsModule, "--tool", "nope"])).toMatchObject({ code: 2, stderr: expect.stringMatching(/EG_UNKNOWN_TOOL/) });
    expect((await cli(["reconcile", "--db", db, "--tools", toolsModule, "--since", "yesterday-ish"])).code).toBe(2);
  });
});
