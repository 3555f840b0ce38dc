/**
 * Small things an operator reads, through the BUILT command: `queue show` keeps one blank line
 * under its header; `ledger show` calls a completed call's note a note, not an error; a ledger
 * that is missing or too old says which command fixes it, in an operator's words.
 */
import { copyFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { beforeAll, describe, expect, it } from "vitest";
import { fingerprint } from "../../src/core/keys.js";
import { sqliteLedger } from "../../src/stores/sqlite/index.js";
import { requireBuild } from "../support/processes.js";
import { usePostgres } from "../support/pg.js";
import { tempDir } from "../support/tmp.js";
import { fingerprintOf } from "./ledger-files.js";
import { runCli } from "./run-cli.js";

const pg = usePostgres();
const dir = tempDir("effectgate-cli-details-");
const db = join(dir, "ledger.db");
const V4_FIXTURE = fileURLToPath(new URL("../fixtures/ledgers-0.1.0/sqlite-v4.db", import.meta.url));

beforeAll(async () => {
  requireBuild();
  const ledger = sqliteLedger(db);
  const call = (key: string) => ({
    tenant: "acme", key, tool: "book_room", effect: "write" as const, task: "trip", toolUseId: key,
    fingerprint: fingerprint("book_room", { room: 1 }), input: { room: 1 }, inputRedacted: false, owner: "w1", leaseMs: 60_000,
  });
  // Completed by a reply that came after the timeout, as the gate records it (src/gate/execute.ts).
  const late = await ledger.calls.claim(call("toolu_late"));
  await ledger.calls.update("acme", "toolu_late", late.record.version, {
    state: "completed", result: { booking: "B-1" }, owner: null, error: "completed by a reply that arrived after the timeout",
  });
  const stuck = await ledger.calls.claim(call("toolu_stuck"));
  await ledger.calls.update("acme", "toolu_stuck", stuck.record.version, { state: "needs_human", error: "no reply within 30000 ms", owner: null });
  await ledger.close();
});

describe("what the commands print", () => {
  it("ledger show: a completed call's note is under Note:, with no Error: section", async () => {
    const run = await runCli(["ledger", "show", "toolu_late", "--db", db]);
    expect(run.code).toBe(0);
    expect(run.stdout).toContain("\nNote:\n  completed by a reply that arrived after the timeout\n");
    expect(run.stdout).not.toContain("Error:");
  });

  it("ledger show: a stuck call's reason stays under Error:", async () => {
    const run = await runCli(["ledger", "show", "toolu_stuck", "--db", db]);
    expect(run.code).toBe(0);
    expect(run.stdout).toContain("\nError:\n  no reply within 30000 ms\n");
  });

  it("queue show: one blank line under the header, not two", async () => {
    const run = await runCli(["queue", "show", "toolu_stuck", "--db", db]);
    expect(run.code).toBe(0);
    const [header, blank, first] = run.stdout.split("\n");
    expect(header).toBe(`Call toolu_stuck in tenant acme  (${db})`);
    expect(blank).toBe("");
    expect(first).toMatch(/^ {2}state {8}needs_human$/);
  });

  it("a ledger an older effectgate wrote is read-only here: it names the migrate command, and is left as it is", async () => {
    const old = join(dir, "old.db");
    copyFileSync(V4_FIXTURE, old);
    const before = fingerprintOf(old);
    const run = await runCli(["ledger", "ls", "--db", old]);
    expect(run.code).toBe(1);
    expect(run.stderr).toContain(`the ledger ${old} has schema version 4, older than this effectgate reads`);
    expect(run.stderr).toContain(`Migrate it with \`effectgate migrate --db ${old}\``);
    expect(run.stderr).not.toMatch(/writable|readOnly|create: false/);
    expect(fingerprintOf(old)).toBe(before);
  });

  it("a PostgreSQL schema without a ledger: the message names the command that creates it, not API options", async () => {
    const schema = pg.freshSchema();
    const run = await runCli(["ledger", "ls", "--pg", pg.url, "--pg-schema", schema]);
    expect(run.code).toBe(1);
    expect(run.stderr).toContain(`there is no effectgate ledger in schema ${schema}`);
    expect(run.stderr).toContain(`run \`effectgate migrate --pg URL --pg-schema ${schema}\``);
    expect(run.stderr).not.toMatch(/readOnly|create: false/);
  });
});
