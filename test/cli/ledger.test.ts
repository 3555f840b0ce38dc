import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import Database from "better-sqlite3";
import { beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { DEFAULT_LEDGER_PATH as CLI_DEFAULT_LEDGER_PATH } from "../../src/cli/defaults.js";
import { createGate, DEFAULT_LEDGER_PATH, defineTool, type AnyTool } from "../../src/index.js";
import { CALL_STATES, type CallRecord } from "../../src/operator.js";
import { sqliteLedger } from "../../src/sqlite.js";
import { tempDir } from "../support/tmp.js";
import { runCli } from "./run-cli.js";

const dir = tempDir("effectgate-cli-ledger-");
/** At the default path relative to `dir`, so one test can run without --db. */
const db = join(dir, ".effectgate", "ledger.db");

// The cast works around GateOptions.tools rejecting tools with concrete input types (reported separately).
const asGateTool = (tool: unknown) => tool as AnyTool;

beforeAll(async () => {
  const ledger = sqliteLedger(db);
  const sendNote = defineTool({
    name: "send_note",
    effect: "write",
    input: z.object({ text: z.string() }),
    execute: async ({ text }) => ({ sent: text }),
  });
  const charge = defineTool({
    name: "charge",
    effect: "destructive",
    input: z.object({ amount: z.number() }),
    execute: async ({ amount }) => {
      if (amount > 100) throw new Error("card declined");
      return { charged: amount };
    },
    dryRun: ({ amount }) => ({ effect: "would_charge", would_affect: { amount }, reversible: false }),
  });
  // Destructive calls need approval (docs/governance.md): approved in code here, so they run at once.
  const gate = createGate({ tools: [asGateTool(sendNote), asGateTool(charge)], ledger, approver: () => ({ approve: true, by: "test" }) });
  const use = (id: string, name: string, input: object) => ({ type: "tool_use", id, name, input });
  await gate.runToolUses([use("toolu_note_1", "send_note", { text: "hello" }), use("toolu_charge_1", "charge", { amount: 500 })], { tenant: "acme", task: "t1" });
  await gate.runToolUses([use("toolu_shared", "send_note", { text: "for acme" })], { tenant: "acme", task: "t2" });
  await gate.runToolUses([use("toolu_shared", "send_note", { text: "for globex" }), use("toolu_charge_2", "charge", { amount: 20 })], { tenant: "globex", task: "t3" });
  // A call a worker on another host is still holding.
  await ledger.calls.claim({
    tenant: "globex", key: "toolu_running", tool: "charge", effect: "destructive", task: "t4", toolUseId: "toolu_running",
    fingerprint: "f".repeat(64), input: { amount: 1 }, inputRedacted: false, owner: "worker-7/4242/beef", leaseMs: 600_000,
  });
  await gate.close();
  await ledger.close();
});

const json = <T>(text: string): T => JSON.parse(text) as T;

describe("effectgate ledger ls", () => {
  it("lists every call as a table with key, tenant, tool, effect, state, attempts, time and result/error", async () => {
    const { code, stdout, stderr } = await runCli(["ledger", "ls", "--db", db]);
    expect(stderr).toBe("");
    expect(code).toBe(0);
    const [header, , ...rest] = stdout.split("\n");
    expect(header).toMatch(/^KEY\s+TENANT\s+TOOL\s+EFFECT\s+STATE\s+ATTEMPTS\s+UPDATED\s+RESULT \/ ERROR$/);
    const rows = rest.filter((l) => l.startsWith("toolu_"));
    expect(rows).toHaveLength(6);
    expect(rows.find((r) => r.startsWith("toolu_charge_1"))).toMatch(/acme\s+charge\s+destructive\s+failed\s+1\s+\d{4}-\d\d-\d\dT[\d:.]+Z\s+EG_TOOL_FAILED: charge failed: card declined/);
    expect(rows.find((r) => r.startsWith("toolu_charge_2"))).toMatch(/globex\s+charge\s+destructive\s+completed\s+1\s+\S+Z\s+\{"charged":20\}/);
    expect(rows.find((r) => r.startsWith("toolu_running"))).toMatch(/in_progress .*held by worker-7\/4242\/beef/);
    expect(stdout).toContain(`6 calls in ${db}`);
  });

  it("prints the records as a JSON array with --json", async () => {
    const { code, stdout } = await runCli(["ledger", "ls", "--db", db, "--json"]);
    expect(code).toBe(0);
    const records = json<CallRecord[]>(stdout);
    expect(records.map((r) => `${r.tenant}/${r.key}`).sort()).toEqual(
      ["acme/toolu_charge_1", "acme/toolu_note_1", "acme/toolu_shared", "globex/toolu_charge_2", "globex/toolu_running", "globex/toolu_shared"],
    );
    expect(records.find((r) => r.key === "toolu_note_1")).toMatchObject({
      tool: "send_note", effect: "write", state: "completed", input: { text: "hello" }, result: { sent: "hello" }, attempts: 1, error: null,
    });
  });

  it("filters by tenant, state and tool, and limits the count", async () => {
    const keys = async (...args: string[]) => {
      const { code, stdout } = await runCli(["ledger", "ls", "--db", db, "--json", ...args]);
      expect(code).toBe(0);
      return json<CallRecord[]>(stdout).map((r) => `${r.tenant}/${r.key}`).sort();
    };
    expect(await keys("--tenant", "globex")).toEqual(["globex/toolu_charge_2", "globex/toolu_running", "globex/toolu_shared"]);
    expect(await keys("--state", "failed")).toEqual(["acme/toolu_charge_1"]);
    expect(await keys("--tool", "charge", "--state", "completed")).toEqual(["globex/toolu_charge_2"]);
    expect(await keys("--tenant", "acme", "--tool", "send_note")).toEqual(["acme/toolu_note_1", "acme/toolu_shared"]);
    expect(await keys("--limit", "2")).toHaveLength(2);
    expect(await keys("--tenant", "initech")).toEqual([]);
  });

  it("says so when nothing matches, rather than printing an empty table", async () => {
    const { code, stdout } = await runCli(["ledger", "ls", "--db", db, "--state", "needs_human"]);
    expect(code).toBe(0);
    expect(stdout).toBe(`No calls in ${db} (state=needs_human).\n`);
  });

  it("reads the ledger from EFFECTGATE_DB, and from .effectgate/ledger.db in the working directory by default", async () => {
    const fromEnv = await runCli(["ledger", "ls", "--json"], { env: { EFFECTGATE_DB: db } });
    expect(fromEnv.code).toBe(0);
    expect(json<CallRecord[]>(fromEnv.stdout)).toHaveLength(6);
    const fromCwd = await runCli(["ledger", "ls", "--json"], { cwd: dir });
    expect(fromCwd.code).toBe(0);
    expect(json<CallRecord[]>(fromCwd.stdout)).toHaveLength(6);
  });

  it("rejects an unknown --state with exit 2, naming the allowed states", async () => {
    const { code, stdout, stderr } = await runCli(["ledger", "ls", "--db", db, "--state", "done"]);
    expect(code).toBe(2);
    expect(stdout).toBe("");
    expect(stderr).toContain("'done' is invalid");
    for (const state of CALL_STATES) expect(stderr).toContain(state);
  });

  it("rejects a --limit that is not a positive whole number with exit 2", async () => {
    for (const limit of ["0", "-3", "ten", "1.5"]) {
      const { code, stderr } = await runCli(["ledger", "ls", "--db", db, `--limit=${limit}`]);
      expect(code, limit).toBe(2);
      expect(stderr).toContain("must be a whole number of at least 1");
    }
  });

  it("fails with exit 2 and the path when the ledger file does not exist, and creates nothing", async () => {
    const missing = join(dir, "typo", "ledgr.db");
    for (const args of [["ledger", "ls", "--db", missing], ["ledger", "ls", "--db", missing, "--json"], ["ledger", "show", "toolu_note_1", "--db", missing]]) {
      const { code, stdout, stderr } = await runCli(args);
      expect(code).toBe(2);
      expect(stdout).toBe("");
      expect(stderr).toContain(`there is no ledger at ${missing}`);
    }
    expect(existsSync(join(dir, "typo"))).toBe(false);
    // The default path, when it is missing, is reported the same way.
    const empty = join(dir, "empty-cwd");
    mkdirSync(empty);
    const byDefault = await runCli(["ledger", "ls"], { cwd: empty });
    expect(byDefault.code).toBe(2);
    expect(byDefault.stderr).toContain(join(empty, ".effectgate", "ledger.db"));
    expect(readdirSync(empty)).toEqual([]);
  });

  it("refuses a corrupt ledger with EG_LEDGER_CORRUPT and leaves the file exactly as it was", async () => {
    const sub = join(dir, "corrupt");
    mkdirSync(sub);
    const file = join(sub, "ledger.db");
    const garbage = Buffer.from("SQLite format 2\u0000 but really just text ".repeat(300));
    writeFileSync(file, garbage);
    for (const args of [["ledger", "ls", "--db", file], ["ledger", "show", "toolu_note_1", "--db", file], ["ledger", "show", "k", "--tenant", "acme", "--db", file]]) {
      const { code, stdout, stderr } = await runCli(args);
      expect(code).toBe(1);
      expect(stdout).toBe("");
      expect(stderr).toContain(`EG_LEDGER_CORRUPT: the ledger file ${file} is damaged`);
    }
    expect(readFileSync(file).equals(garbage)).toBe(true);
    expect(readdirSync(sub)).toEqual(["ledger.db"]);
  });

  it("refuses an empty file and a SQLite database that is not a ledger, without changing them", async () => {
    const emptyFile = join(dir, "empty.db");
    writeFileSync(emptyFile, "");
    const empty = await runCli(["ledger", "ls", "--db", emptyFile]);
    expect(empty.code).toBe(1);
    expect(empty.stderr).toContain(`EG_LEDGER_UNAVAILABLE: ${emptyFile} is not an effectgate ledger: it is an empty file (0 bytes).`);
    expect(empty.stderr).toContain("It was left exactly as it is; nothing was written to it.");
    expect(readFileSync(emptyFile).length).toBe(0);

    const foreign = join(dir, "app.db");
    const raw = new Database(foreign);
    raw.exec("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)");
    raw.close();
    const before = readFileSync(foreign);
    const other = await runCli(["ledger", "ls", "--db", foreign]);
    expect(other.code).toBe(1);
    expect(other.stderr).toContain(`EG_LEDGER_UNAVAILABLE: ${foreign} is not an effectgate ledger`);
    expect(readFileSync(foreign).equals(before)).toBe(true);
  });
});

describe("effectgate ledger show", () => {
  it("shows a call whose key exists in one tenant without --tenant: input, result, error, owner, lease, times", async () => {
    const { code, stdout, stderr } = await runCli(["ledger", "show", "toolu_charge_1", "--db", db]);
    expect(stderr).toBe("");
    expect(code).toBe(0);
    expect(stdout).toContain("Call toolu_charge_1 in tenant acme");
    expect(stdout).toMatch(/state\s+failed/);
    expect(stdout).toMatch(/tool\s+charge \(effect: destructive\)/);
    expect(stdout).toMatch(/task\s+t1/);
    expect(stdout).toMatch(/owner\s+- \(nobody\)/);
    expect(stdout).toMatch(/lease\s+- \(nobody holds the call\)/);
    expect(stdout).toMatch(/created\s+\d{4}-\d\d-\d\dT[\d:.]+Z/);
    expect(stdout).toMatch(/updated\s+\d{4}-\d\d-\d\dT[\d:.]+Z/);
    expect(stdout).toMatch(/Input:\n\s+\{\n\s+"amount": 500\n\s+\}/);
    expect(stdout).toMatch(/Result:\n\s+\(none\)/);
    expect(stdout).toMatch(/Error:\n\s+EG_TOOL_FAILED: charge failed: card declined/);
  });

  it("shows the owner and lease of a call that is held", async () => {
    const { code, stdout } = await runCli(["ledger", "show", "toolu_running", "--db", db]);
    expect(code).toBe(0);
    expect(stdout).toMatch(/state\s+in_progress/);
    expect(stdout).toMatch(/owner\s+worker-7\/4242\/beef/);
    expect(stdout).toMatch(/lease\s+\d{4}-\d\d-\d\dT[\d:.]+Z \(ends in \d+[smh]\)/);
  });

  it("prints the whole record as JSON with --json", async () => {
    const { code, stdout } = await runCli(["ledger", "show", "toolu_note_1", "--db", db, "--json"]);
    expect(code).toBe(0);
    expect(json<CallRecord>(stdout)).toMatchObject({
      tenant: "acme", key: "toolu_note_1", tool: "send_note", state: "completed", input: { text: "hello" }, result: { sent: "hello" },
      owner: null, leaseExpiresAt: null, toolUseId: "toolu_note_1", task: "t1",
    });
  });

  it("asks for --tenant (exit 2) when the key exists in several tenants, and shows the one named", async () => {
    const ambiguous = await runCli(["ledger", "show", "toolu_shared", "--db", db]);
    expect(ambiguous.code).toBe(2);
    expect(ambiguous.stdout).toBe("");
    expect(ambiguous.stderr).toContain('key "toolu_shared" exists in 2 tenants (acme, globex)');
    expect(ambiguous.stderr).toContain("--tenant");
    const chosen = await runCli(["ledger", "show", "toolu_shared", "--db", db, "--tenant", "globex", "--json"]);
    expect(chosen.code).toBe(0);
    expect(json<CallRecord>(chosen.stdout)).toMatchObject({ tenant: "globex", input: { text: "for globex" }, result: { sent: "for globex" } });
  });

  it("says clearly that a key is unknown, with exit 1", async () => {
    const unknown = await runCli(["ledger", "show", "toolu_nope", "--db", db]);
    expect(unknown.code).toBe(1);
    expect(unknown.stdout).toBe("");
    expect(unknown.stderr).toContain(`no call with key "toolu_nope" in ${db}`);
    const wrongTenant = await runCli(["ledger", "show", "toolu_note_1", "--db", db, "--tenant", "globex"]);
    expect(wrongTenant.code).toBe(1);
    expect(wrongTenant.stderr).toContain('no call with key "toolu_note_1" in tenant "globex"');
    expect(wrongTenant.stderr).toContain("It exists in tenant acme.");
  });
});

describe("effectgate command line", () => {
  it("--help explains each command", async () => {
    const top = await runCli(["--help"]);
    expect(top.code).toBe(0);
    expect(top.stdout).toMatch(/Usage: effectgate/);
    expect(top.stdout).toMatch(/ledger\s+inspect the effects ledger/);
    expect(top.stdout).toMatch(/demo\s+run demonstrations/);
    expect(top.stdout).toContain("Exit codes:");
    expect(top.stdout).not.toContain("crash-worker");

    const ledger = await runCli(["ledger", "--help"]);
    expect(ledger.code).toBe(0);
    expect(ledger.stdout).toMatch(/ls \[options\]\s+list recorded tool calls/);
    expect(ledger.stdout).toMatch(/show \[options\] <key>\s+show everything recorded about one call/);

    const ls = await runCli(["ledger", "ls", "--help"]);
    for (const option of ["--db <path>", "--tenant <tenant>", "--state <state>", "--tool <name>", "--limit <n>", "--json", "EFFECTGATE_DB", ".effectgate/ledger.db"]) {
      expect(ls.stdout).toContain(option);
    }
    for (const state of CALL_STATES) expect(ls.stdout).toContain(state);

    const show = await runCli(["ledger", "show", "--help"]);
    expect(show.stdout).toContain("<key>");
    expect(show.stdout).toContain("--tenant <tenant>");

    const demo = await runCli(["demo", "--help"]);
    expect(demo.stdout).toMatch(/crash \[options\]\s+kill an agent/);
    expect(demo.stdout).not.toContain("crash-worker");

    const crash = await runCli(["demo", "crash", "--help"]);
    expect(crash.stdout).toContain("SIGKILL");
    expect(crash.stdout).toContain("--json");
  });

  it("answers an unknown command or option with a helpful message and exit 2", async () => {
    const command = await runCli(["ledger", "lst"]);
    expect(command.code).toBe(2);
    expect(command.stderr).toContain("unknown command 'lst'");
    expect(command.stderr).toContain("Did you mean ls?");
    expect(command.stderr).toContain("--help");

    const option = await runCli(["ledger", "ls", "--db", db, "--colour"]);
    expect(option.code).toBe(2);
    expect(option.stderr).toContain("unknown option '--colour'");

    const missing = await runCli(["ledger", "show", "--db", db]);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain("missing required argument 'key'");

    const nothing = await runCli([]);
    expect(nothing.code).toBe(2);
    expect(nothing.stderr).toContain("Usage: effectgate");
  });

  it("uses the gate's default ledger path", () => {
    expect(CLI_DEFAULT_LEDGER_PATH).toBe(DEFAULT_LEDGER_PATH);
  });

  it("prints its version", async () => {
    const { code, stdout } = await runCli(["--version"]);
    expect(code).toBe(0);
    const pkg = json<{ version: string }>(readFileSync(new URL("../../package.json", import.meta.url), "utf8"));
    expect(stdout.trim()).toBe(pkg.version);
  });
});
