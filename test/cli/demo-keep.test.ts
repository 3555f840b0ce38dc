/**
 * After the quick start there is something to inspect: `effectgate demo --keep DIR` (the BUILT
 * command, a real run of levels 4 and 6) keeps each level's ledger, prints the exact commands
 * that look inside, and each printed command works; so does every id those listings print, fed
 * back to the matching show (or close) command (up to 8 of each, to keep the test short).
 * `effectgate demo --help` shows the options.
 */
import { existsSync, mkdirSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { requireBuild } from "../support/processes.js";
import { tempDir } from "../support/tmp.js";
import { fingerprintOf } from "./ledger-files.js";
import { CLI, runCli, type CliRun } from "./run-cli.js";

const dir = tempDir("effectgate-cli-demo-keep-");
const tmp = join(dir, "tmp");
const kept = join(dir, "kept");
const level6 = join(kept, "level-6", "ledger.db");
let demo: CliRun;

beforeAll(async () => {
  requireBuild();
  mkdirSync(tmp);
  // Run from `dir`, as a user runs it from a project: the printed paths are relative to it.
  demo = await runCli(["demo", "--levels", "4,6", "--tasks", "16", "--keep", "kept", "--out", "out"], { cwd: dir, env: { TMPDIR: tmp } });
}, 120_000);

/** Rows of a table the CLI printed, split into cells (header and rule skipped, up to the first blank line). */
function rows(table: string): string[][] {
  const lines = table.split("\n");
  const rule = lines.findIndex((l) => /^-+ {2}/.test(l));
  const out: string[][] = [];
  for (const line of lines.slice(rule + 1)) {
    if (line.trim() === "") break;
    out.push(line.split(/ {2,}/));
  }
  return out;
}

const inKept = (args: readonly string[]) => runCli([...args, "--db", level6], { cwd: dir });

describe("effectgate demo --keep DIR", () => {
  it("keeps each level's ledger as one self-contained file and removes its temp files", () => {
    expect(demo.stderr).toBe("");
    expect(demo.code).toBe(0);
    expect(readdirSync(kept).sort()).toEqual(["level-4", "level-6"]);
    for (const level of ["level-4", "level-6"]) expect(readdirSync(join(kept, level))).toEqual(["ledger.db"]);
    expect(readdirSync(tmp)).toEqual([]);
  });

  it("prints the exact commands that look inside, and each of them works", async () => {
    expect(demo.stdout).toContain("Kept the ledgers of levels 4, 6: kept/level-4/ledger.db, kept/level-6/ledger.db. Look inside:");
    const commands = demo.stdout.split("\n").filter((l) => l.startsWith(`  node ${CLI} `)).map((l) => l.slice(`  node ${CLI} `.length).split(" "));
    expect(commands.map((c) => c.slice(0, 2).join(" "))).toEqual(["queue ls", "ledger ls", "saga ls", "breaker ls"]);
    expect(commands).toContainEqual(["ledger", "ls", "--db", "kept/level-6/ledger.db", "--state", "needs_human"]);
    for (const args of commands) {
      const run = await runCli(args, { cwd: dir });
      expect(run.stderr, args.join(" ")).toBe("");
      expect(run.code, args.join(" ")).toBe(0);
      expect(run.stdout).not.toBe("");
    }
  });

  it("every id the listings print is accepted by the command that shows it", async () => {
    const queue = rows((await inKept(["queue", "ls"])).stdout);
    expect(queue.length).toBeGreaterThan(0);
    for (const [id, , tenant] of queue.slice(0, 8)) expect((await inKept(["queue", "show", id as string, "--tenant", tenant as string])).code, id).toBe(0);

    const calls = rows((await inKept(["ledger", "ls", "--limit", "1000"])).stdout);
    expect(calls.length).toBeGreaterThan(0);
    for (const [key, tenant] of calls.slice(0, 8)) expect((await inKept(["ledger", "show", key as string, "--tenant", tenant as string])).code, key).toBe(0);

    const sagas = rows((await inKept(["saga", "ls"])).stdout);
    expect(sagas.length).toBeGreaterThan(0);
    for (const [id, tenant] of sagas.slice(0, 8)) expect((await inKept(["saga", "show", id as string, "--tenant", tenant as string])).code, id).toBe(0);

    const approvals = rows((await inKept(["approvals", "ls", "--all"])).stdout);
    expect(approvals.length).toBeGreaterThan(0);
    for (const [id] of approvals.slice(0, 8)) expect((await inKept(["approvals", "show", id as string])).code, id).toBe(0);

    const breakers = rows((await inKept(["breaker", "ls"])).stdout);
    expect(breakers.length).toBeGreaterThan(0);
    for (const [id] of breakers) expect((await inKept(["breaker", "close", id as string, "--by", "test"])).code, id).toBe(0);
  });

  it("never overwrites a kept ledger: a second run into the same directory is refused before it starts", async () => {
    const before = fingerprintOf(level6);
    const again = await runCli(["demo", "--levels", "6", "--tasks", "4", "--keep", "kept"], { cwd: dir, env: { TMPDIR: tmp } });
    expect(again.code).toBe(2);
    expect(again.stderr).toContain(`effectgate: --keep never overwrites a ledger, and ${level6} exists: give a new or empty directory`);
    expect(fingerprintOf(level6)).toBe(before);
    expect(existsSync(join(dir, ".effectgate"))).toBe(false);
  });
});

describe("effectgate demo --help", () => {
  it("shows the blast-radius demo's options, --keep among them, and no stale sentence", async () => {
    const run = await runCli(["demo", "--help"]);
    expect(run.code).toBe(0);
    for (const option of ["--tasks <n>", "--seed <s>", "--levels <keys>", "--store <store>", "--json", "--out <dir>", "--keep <dir>"]) {
      expect(run.stdout).toContain(`  ${option}`);
    }
    expect(run.stdout).toMatch(/^ {2}crash \[options\]/m);
    expect(run.stdout).not.toContain("not available yet");
    const blast = await runCli(["demo", "blast", "--help"]);
    expect(blast.stdout).toContain("  --keep <dir>");
    expect(blast.stdout).not.toContain("not available yet");
  });
});
