/**
 * Every id `effectgate queue ls` prints works when fed back, through the BUILT command: the
 * calls waiting for a person under long keys (a derived key, a saga step's key) and the
 * findings; each printed ID is shown by `queue show` and settled by `queue resolve`.
 */
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { findingId } from "../../src/contracts/finding-rules.js";
import { fingerprint } from "../../src/core/keys.js";
import { sqliteLedger } from "../../src/stores/sqlite/index.js";
import { requireBuild } from "../support/processes.js";
import { tempDir } from "../support/tmp.js";
import { runCli } from "./run-cli.js";

const dir = tempDir("effectgate-cli-queue-ids-");
const db = join(dir, "ledger.db");

/** Keys as long as real ones get: a derived key (tenant, task, tool, SHA-256 of the input) and a saga step's. */
const LONG_KEYS = [
  `acme/checkout-2026-11-30T12:00:00Z/charge_card/${"3f9a".repeat(16)}`,
  "saga:order-2026-0042:toolu_01AbCdEfGhIjKlMnOpQrStUv",
  "toolu_01XyZ0123456789abcdefghij",
];

beforeAll(async () => {
  requireBuild();
  const ledger = sqliteLedger(db);
  for (const key of LONG_KEYS) {
    const input = { customer: "cus_1", amount: 42 };
    const { record } = await ledger.calls.claim({
      tenant: "acme", key, tool: "charge_card", effect: "write", task: "checkout", toolUseId: key,
      fingerprint: fingerprint("charge_card", input), input, inputRedacted: false, owner: "worker-gone", leaseMs: 1,
    });
    await ledger.calls.update("acme", key, record.version, { state: "needs_human", error: "no reply within 30000 ms; no probe answer", owner: null });
  }
  for (const [kind, key] of [["orphan_downstream", "pi_3OrphanChargeWithALongStripeStyleReference"], ["duplicate_downstream", "toolu_01DuplicatedTwiceDownstream"]] as const) {
    await ledger.reconcile?.recordFinding({
      id: findingId(kind, "charge_card", "acme", key, null), kind, tool: "charge_card", tenant: "acme", key,
      summary: `${kind} for ${key}`, ledger: null, downstream: [{ ref: `ch_${key.slice(-6)}`, key }], differences: [], source: "scan",
    });
  }
  await ledger.close();
});

/** The first column of a table the CLI printed (header and rule lines skipped). */
function firstColumn(table: string): string[] {
  const lines = table.split("\n");
  const rule = lines.findIndex((l) => /^-+ {2}/.test(l));
  const rows: string[] = [];
  for (const line of lines.slice(rule + 1)) {
    if (line.trim() === "") break;
    rows.push(line.split(/ {2,}/)[0] as string);
  }
  return rows;
}

describe("effectgate queue ls prints ids that queue show and queue resolve take", () => {
  let ids: string[] = [];

  it("lists every item with its full id and key, nothing cut", async () => {
    const run = await runCli(["queue", "ls", "--db", db]);
    expect(run.stderr).toBe("");
    expect(run.code).toBe(0);
    expect(run.stdout).not.toContain("…");
    ids = firstColumn(run.stdout);
    expect(ids).toHaveLength(LONG_KEYS.length + 2);
    for (const key of LONG_KEYS) expect(ids).toContain(key);
    expect(ids.filter((id) => id.startsWith("f_"))).toHaveLength(2);
  });

  it("queue show accepts every printed id", async () => {
    expect(ids.length).toBeGreaterThan(0);
    for (const id of ids) {
      const run = await runCli(["queue", "show", id, "--db", db]);
      expect(run.stderr, id).toBe("");
      expect(run.code, id).toBe(0);
      expect(run.stdout).toContain(id);
    }
  });

  it("queue resolve accepts every printed id and settles it", async () => {
    expect(ids.length).toBeGreaterThan(0);
    for (const id of ids) {
      const settle = id.startsWith("f_") ? ["--note", "checked the payments dashboard"] : ["--failed", "no charge with this key downstream"];
      const run = await runCli(["queue", "resolve", id, ...settle, "--db", db, "--by", "test"]);
      expect(run.stderr, id).toBe("");
      expect(run.code, id).toBe(0);
    }
    const after = await runCli(["queue", "ls", "--db", db]);
    expect(after.stdout).toBe(`Nothing needs a person in ${db}.\n`);
  });
});
