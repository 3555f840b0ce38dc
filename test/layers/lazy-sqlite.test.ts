/**
 * `import "effectgate"` loads no native addon: a PostgreSQL (or memory) user never loads
 * better-sqlite3. A child process records every native addon Node loads (process.dlopen),
 * imports the BUILT package root and runs a gated call on the memory ledger; then, as the
 * control, opens a SQLite ledger through effectgate/sqlite, which must load it.
 */
import { spawnSync } from "node:child_process";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { DIST_INDEX, requireBuild } from "../support/processes.js";
import { tempDir } from "../support/tmp.js";

const PROBE = `
const loaded = [];
const dlopen = process.dlopen;
process.dlopen = (module, file, ...rest) => { loaded.push(file); return dlopen.call(process, module, file, ...rest); };
const root = await import(process.env.DIST_INDEX);
const anything = { "~standard": { version: 1, vendor: "probe", validate: (value) => ({ value }) } };
const tool = root.defineTool({ name: "note", effect: "write", input: anything, async execute({ text }) { return { noted: text }; } });
const gate = root.createGate({ tools: [tool], ledger: root.memoryLedger() });
const [r] = await gate.runToolUses([{ type: "tool_use", id: "t1", name: "note", input: { text: "hi" } }], { tenant: "a", task: "t" });
const afterRoot = [...loaded];
const { sqliteLedger } = await import(process.env.DIST_INDEX.replace(/index\\.js$/, "sqlite.js"));
const ledger = sqliteLedger(process.env.LEDGER);
await ledger.calls.list({ limit: 1 });
await ledger.close();
console.log(JSON.stringify({ result: r.content, afterRoot, afterSqlite: loaded }));
`;

describe("the package root loads no native addon", () => {
  it("a gated call through `import \"effectgate\"` loads nothing native; opening a SQLite ledger loads better-sqlite3", () => {
    requireBuild();
    const dir = tempDir("effectgate-lazy-");
    const run = spawnSync(process.execPath, ["--input-type=module", "-e", PROBE], {
      cwd: dir, encoding: "utf8", env: { ...process.env, DIST_INDEX, LEDGER: join(dir, "ledger.db") },
    });
    expect(run.stderr).toBe("");
    const seen = JSON.parse(run.stdout) as { result: string; afterRoot: string[]; afterSqlite: string[] };
    expect(seen.result).toBe(JSON.stringify({ noted: "hi" }));
    expect(seen.afterRoot).toEqual([]);
    expect(seen.afterSqlite.some((file) => /better_sqlite3\.node$/.test(file))).toBe(true);
  });
});

/** A resolve hook that makes better-sqlite3 fail to load, as on a machine where it never built. */
const BREAK_SQLITE = `
import { register } from "node:module";
register("data:text/javascript," + encodeURIComponent(
  'export async function resolve(specifier, context, next) {' +
  '  if (specifier === "better-sqlite3") throw new Error("Could not locate the bindings file (a broken install)");' +
  '  return next(specifier, context);' +
  '}'));
`;

const DEFAULT_LEDGER = `
const root = await import(process.env.DIST_INDEX);
const anything = { "~standard": { version: 1, vendor: "probe", validate: (value) => ({ value }) } };
const tool = root.defineTool({ name: "note", effect: "write", input: anything, async execute() { return "ran"; } });
const gate = root.createGate({ tools: [tool] });
const [r] = await gate.runToolUses([{ type: "tool_use", id: "t1", name: "note", input: {} }], { tenant: "a", task: "t" });
console.log(JSON.stringify(r));
`;

describe("the default SQLite ledger without a working better-sqlite3", () => {
  it("answers the call in one sentence naming the fix, and runs nothing", () => {
    requireBuild();
    const dir = tempDir("effectgate-nosqlite-");
    const run = spawnSync(process.execPath, ["--import", `data:text/javascript,${encodeURIComponent(BREAK_SQLITE)}`, "--input-type=module", "-e", DEFAULT_LEDGER], {
      cwd: dir, encoding: "utf8", env: { ...process.env, DIST_INDEX },
    });
    expect(run.stderr).toBe("");
    const result = JSON.parse(run.stdout) as { content: string; is_error: boolean };
    expect(result.is_error).toBe(true);
    expect(result.content).toMatch(/^EG_LEDGER_UNAVAILABLE: the SQLite ledger sqlite:.*ledger\.db needs the better-sqlite3 package, which could not be loaded \(.*broken install.*\): install it with `npm install better-sqlite3@12`, or give createGate another ledger/);
    expect(result.content).not.toContain("ran");
  });
});
