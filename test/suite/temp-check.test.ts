/**
 * The suite's temp check (test/support/temp-check.ts, a vitest globalSetup) fails a run that
 * leaves temporary files behind, and names them; tempDir() called inside a test body cleans up.
 * Each case is a real vitest run of one fixture file in a child process.
 */
import { execFile } from "node:child_process";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const ROOT = fileURLToPath(new URL("../../", import.meta.url));
const VITEST = fileURLToPath(new URL("../../node_modules/vitest/vitest.mjs", import.meta.url));
const CONFIG = fileURLToPath(new URL("./fixtures/vitest.config.ts", import.meta.url));

function vitest(fixture: string): Promise<{ code: number; output: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [VITEST, "run", "--config", CONFIG], {
      cwd: ROOT, env: { ...process.env, TEMP_CHECK_FIXTURE: fixture, NO_COLOR: "1", FORCE_COLOR: "0" }, timeout: 60_000,
    }, (err, stdout, stderr) => {
      resolve({ code: err ? (typeof err.code === "number" ? err.code : -1) : 0, output: `${stdout}\n${stderr}` });
    });
  });
}

describe("the test suite's temp check", () => {
  it("fails a run whose tests pass but leave temporary files behind, naming each", async () => {
    const run = await vitest("leaks.fixture.ts");
    expect(run.output).toMatch(/1 passed/);
    expect(run.code).toBe(1);
    expect(run.output).toMatch(/The tests left 2 temporary files behind \(now removed\): .*effectgate-forgotten-\w+\//);
    expect(run.output).toContain("effectgate-stray.json");
  });

  it("passes a run whose tests make temp folders with tempDir() inside a test body", async () => {
    const run = await vitest("tidy.fixture.ts");
    expect(run.output).toMatch(/1 passed/);
    expect(run.output).not.toContain("temporary file");
    expect(run.code).toBe(0);
  });
});
