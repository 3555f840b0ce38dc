/**
 * Files that are not effectgate ledgers: another program's SQLite database and a zero-byte file
 * are refused, untouched, by the BUILT command (migrate, a write, a read) and by the library
 * (`sqliteLedger()` under a gate, whose tool then never runs); the refusal names the tables found.
 * A path with no file is created whole, and migrate says what it did each time.
 */
import { copyFileSync, existsSync, readdirSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import Database from "better-sqlite3";
import { beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { createGate } from "../../src/root/create-gate.js";
import { defineTool } from "../../src/core/tool.js";
import { sqliteLedger } from "../../src/stores/sqlite/index.js";
import { SCHEMA_VERSION } from "../../src/stores/sqlite/migrations.js";
import { requireBuild } from "../support/processes.js";
import { tempDir } from "../support/tmp.js";
import { fingerprintOf } from "./ledger-files.js";
import { runCli } from "./run-cli.js";

const dir = tempDir("effectgate-cli-foreign-");
const V4_FIXTURE = fileURLToPath(new URL("../fixtures/ledgers-0.1.0/sqlite-v4.db", import.meta.url));

beforeAll(() => requireBuild());

/** Another program's database: its own tables, user_version as given. */
function appDatabase(name: string, userVersion = 0): string {
  const file = join(dir, name);
  const raw = new Database(file);
  raw.exec("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT); CREATE TABLE orders (id INTEGER PRIMARY KEY, total REAL); INSERT INTO users (name) VALUES ('ann')");
  raw.pragma(`user_version = ${userVersion}`);
  raw.close();
  return file;
}

/** A tool that counts its executions, to prove a refused ledger runs nothing. */
function countingGate(file: string) {
  let executed = 0;
  const tool = defineTool({ name: "send_note", effect: "write", input: z.object({ text: z.string() }), execute: ({ text }) => ((executed += 1), { sent: text }) });
  const ledger = sqliteLedger(file);
  const gate = createGate({ tools: [tool], ledger, onAlert: () => {} });
  return { gate, ledger, executed: () => executed };
}

const COMMANDS: readonly (readonly string[])[] = [["migrate"], ["kill", "on"], ["ledger", "ls"]];

describe("another program's SQLite database", () => {
  it.each(COMMANDS.map((args) => [args.join(" "), args] as const))("%s refuses it naming its tables, and changes nothing", async (_name, args) => {
    const app = appDatabase(`app-${args.join("-")}.db`);
    const before = fingerprintOf(app);
    const run = await runCli([...args, "--db", app]);
    expect(run.stderr).toContain(`EG_LEDGER_UNAVAILABLE: ${app} is not an effectgate ledger: it is another program's SQLite database (tables orders, users).`);
    expect(run.stderr).toContain("It was left exactly as it is; nothing was written to it.");
    expect(run.code).toBe(1);
    expect(run.stdout).toBe("");
    expect(fingerprintOf(app)).toBe(before);
    const raw = new Database(app, { readonly: true });
    expect(raw.prepare("SELECT name FROM sqlite_schema WHERE type = 'table' ORDER BY name").pluck().all()).toEqual(["orders", "users"]);
    raw.close();
  });

  it("with a user_version of its own it is still refused by its tables, not migrated as an old ledger", async () => {
    const app = appDatabase("app-v3.db", 3);
    const before = fingerprintOf(app);
    const run = await runCli(["migrate", "--db", app]);
    expect(run.code).toBe(1);
    expect(run.stderr).toContain("is not an effectgate ledger: it is another program's SQLite database (tables orders, users, user_version 3).");
    expect(fingerprintOf(app)).toBe(before);
  });

  it("createGate({ ledger: sqliteLedger(app.db) }) refuses it too: the call is answered with the reason and its tool never runs", async () => {
    const app = appDatabase("app-gate.db");
    const before = fingerprintOf(app);
    const { gate, ledger, executed } = countingGate(app);
    const [result] = await gate.runToolUses([{ type: "tool_use", id: "toolu_1", name: "send_note", input: { text: "hi" } }], { tenant: "acme", task: "t" });
    expect(result?.is_error).toBe(true);
    expect(result?.content).toContain("is not an effectgate ledger: it is another program's SQLite database (tables orders, users)");
    expect(executed()).toBe(0);
    await gate.close();
    await ledger.close();
    expect(fingerprintOf(app)).toBe(before);
  });
});

describe("a zero-byte file", () => {
  it.each(COMMANDS.map((args) => [args.join(" "), args] as const))("%s refuses it, and it stays empty", async (_name, args) => {
    const empty = join(dir, `empty-${args.join("-")}.db`);
    writeFileSync(empty, "");
    const run = await runCli([...args, "--db", empty]);
    expect(run.stderr).toContain(`EG_LEDGER_UNAVAILABLE: ${empty} is not an effectgate ledger: it is an empty file (0 bytes).`);
    expect(run.stderr).toContain("delete it and effectgate creates the ledger itself");
    expect(run.code).toBe(1);
    expect(statSync(empty).size).toBe(0);
    expect(existsSync(`${empty}-wal`)).toBe(false);
  });

  it("does not silently become a ledger under a gate either: refused, nothing runs", async () => {
    const empty = join(dir, "empty-gate.db");
    writeFileSync(empty, "");
    const { gate, ledger, executed } = countingGate(empty);
    const [result] = await gate.runToolUses([{ type: "tool_use", id: "toolu_1", name: "send_note", input: { text: "hi" } }], { tenant: "acme", task: "t" });
    expect(result?.content).toContain("is not an effectgate ledger: it is an empty file (0 bytes)");
    expect(executed()).toBe(0);
    await gate.close();
    await ledger.close();
    expect(statSync(empty).size).toBe(0);
  });
});

describe("effectgate migrate says what it did", () => {
  it("creates a missing file whole (no temporary file left beside it), then finds it up to date", async () => {
    const sub = join(dir, "new");
    const file = join(sub, "ledger.db");
    const created = await runCli(["migrate", "--db", file]);
    expect(created.stderr).toBe("");
    expect(created.code).toBe(0);
    expect(created.stdout).toBe(`created the SQLite ledger ${file} (schema version ${SCHEMA_VERSION})\n`);
    expect(readdirSync(sub)).toEqual(["ledger.db"]);
    const again = await runCli(["migrate", "--db", file]);
    expect(again.code).toBe(0);
    expect(again.stdout).toBe(`the SQLite ledger ${file} is up to date (schema version ${SCHEMA_VERSION}); nothing was changed\n`);
  });

  it("migrates a ledger an older effectgate wrote, and says from which version", async () => {
    const file = join(dir, "old.db");
    copyFileSync(V4_FIXTURE, file);
    const run = await runCli(["migrate", "--db", file]);
    expect(run.code).toBe(0);
    expect(run.stdout).toBe(`migrated the SQLite ledger ${file} from schema version 4 to ${SCHEMA_VERSION}\n`);
  });

  it("the gate creates a missing ledger in WAL mode at the current schema, leaving no temporary file beside it", async () => {
    const file = join(dir, "gate-new", "ledger.db");
    const { gate, ledger, executed } = countingGate(file);
    const [result] = await gate.runToolUses([{ type: "tool_use", id: "toolu_1", name: "send_note", input: { text: "hi" } }], { tenant: "acme", task: "t" });
    expect(result?.is_error).toBe(false);
    expect(executed()).toBe(1);
    await gate.close();
    await ledger.close();
    expect(readdirSync(join(dir, "gate-new"))).toEqual(["ledger.db"]);
    const raw = new Database(file, { readonly: true });
    expect(raw.pragma("user_version", { simple: true })).toBe(SCHEMA_VERSION);
    expect(raw.pragma("journal_mode", { simple: true })).toBe("wal");
    raw.close();
  });
});
