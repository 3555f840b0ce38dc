/**
 * Proof of reach (issue 23): each mutant in test/explorer/mutants/ puts one fixed defect back, and
 * the explorer sample its header names ("Explorer: entry <e>, seed <s>, <n> schedules[, ledger
 * …]") must report a violation (or a process fault) with it applied, and none on the unpatched
 * code. A mutant the explorer misses is a gap in the explorer, to be closed, not skipped: a patch
 * without an Explorer line, or one that no longer applies, fails here by name.
 *
 * Each mutant is applied to a scratch copy of src/ (node_modules linked, not copied) and its sample
 * runs there from the TypeScript source, in a vitest of its own; the unpatched sample runs here.
 * Slow (minutes), so it runs only with EFFECTGATE_MUTANTS=1 (CI's Node 20 lane).
 */
import { spawn } from "node:child_process";
import { cpSync, existsSync, readFileSync, readdirSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { explore } from "../../src/testing/explorer/explore.js";
import { usePostgres } from "../support/pg.js";
import { tempDir } from "../support/tmp.js";
import { describeSample, runSample, sampleOf, type Sample, type SampleOutcome } from "./mutant-sample.js";

const ENABLED = process.env.EFFECTGATE_MUTANTS === "1";
const ROOT = fileURLToPath(new URL("../../", import.meta.url));
const MUTANTS = join(ROOT, "test/explorer/mutants");
const patches = readdirSync(MUTANTS).filter((f) => f.endsWith(".patch")).sort();

// Only when enabled and asked for: usePostgres() starts an embedded server when EFFECTGATE_TEST_PG_URL is unset.
const needsPg = patches.some((p) => sampleOf(readFileSync(join(MUTANTS, p), "utf8"))?.ledger === "postgres-proxy");
const db = ENABLED && needsPg ? usePostgres() : undefined;

/** The patched code's run of a sample, in a scratch copy: its own vitest, the driver writing the outcome as JSON. */
async function runPatched(patchFile: string, sample: Sample, url: string | undefined): Promise<SampleOutcome> {
  const dir = tempDir("effectgate-mutant-");
  cpSync(join(ROOT, "src"), join(dir, "src"), { recursive: true });
  cpSync(join(ROOT, "package.json"), join(dir, "package.json"));
  cpSync(join(ROOT, "test/explorer/mutant-sample.ts"), join(dir, "test/explorer/mutant-sample.ts"));
  symlinkSync(join(ROOT, "node_modules"), join(dir, "node_modules"), "dir");
  await run("git", ["init", "-q"], dir);
  const applied = await run("git", ["apply", join(MUTANTS, patchFile)], dir);
  if (applied.code !== 0) throw new Error(`the mutant ${patchFile} no longer applies to src/ (git apply: ${applied.stderr.trim()}); bring it up to date with the code`);
  writeFileSync(join(dir, "vitest.config.mjs"),
    `export default { cacheDir: ".vite-cache", test: { include: ["test/explorer/driver.test.ts"], testTimeout: 600000 } };\n`);
  writeFileSync(join(dir, "test/explorer/driver.test.ts"), [
    `import { writeFileSync } from "node:fs";`,
    `import { it } from "vitest";`,
    `import { explore } from "../../src/testing/explorer/explore.js";`,
    `import { runSample } from "./mutant-sample.js";`,
    `it("the sample", async () => {`,
    `  const outcome = await runSample(explore, JSON.parse(process.env.EFFECTGATE_MUTANT_SAMPLE!), process.env.EFFECTGATE_MUTANT_PG);`,
    `  writeFileSync(process.env.EFFECTGATE_MUTANT_OUT!, JSON.stringify(outcome));`,
    `});`,
  ].join("\n"));
  const out = join(dir, "outcome.json");
  const vitest = join(ROOT, "node_modules/vitest/vitest.mjs");
  const ran = await run(process.execPath, [vitest, "run", "--config", "vitest.config.mjs"], dir, {
    EFFECTGATE_MUTANT_SAMPLE: JSON.stringify(sample), EFFECTGATE_MUTANT_OUT: out, ...(url ? { EFFECTGATE_MUTANT_PG: url } : {}),
  });
  if (!existsSync(out)) throw new Error(`the sample did not run with ${patchFile} applied (exit ${ran.code}):\n${(ran.stdout + ran.stderr).slice(-3000)}`);
  return JSON.parse(readFileSync(out, "utf8")) as SampleOutcome;
}

function run(cmd: string, args: readonly string[], cwd: string, env: Record<string, string> = {}): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { cwd, env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    child.on("error", reject);
    child.on("close", (code) => resolve({ code: code ?? 1, stdout, stderr }));
  });
}

const unpatched = new Map<string, Promise<SampleOutcome>>();

describe.skipIf(!ENABLED)("mutants: the explorer reaches each fixed defect put back (EFFECTGATE_MUTANTS=1; minutes)", () => {
  it("there are mutants", () => expect(patches.length).toBeGreaterThan(0));

  for (const patch of patches) {
    it(patch, async () => {
      const text = readFileSync(join(MUTANTS, patch), "utf8");
      const sample = sampleOf(text);
      if (!sample) throw new Error(`${patch} names no explorer sample (a header line "Explorer: entry <e>, seed <s>, <n> schedules[, ledger <memory|sqlite|postgres-proxy>]"): a mutant the explorer misses is a gap in the explorer, to be closed`);
      const started = Date.now();
      const key = describeSample(sample);
      if (!unpatched.has(key)) unpatched.set(key, runSample(explore, sample, db?.url));
      const clean = await unpatched.get(key)!;
      const patched = await runPatched(patch, sample, db?.url);
      console.log(`${patch}: ${key}: ${patched.violations} violations, ${patched.processFaults} process faults with it applied ` +
        `(${clean.violations + clean.processFaults} without), ${((Date.now() - started) / 1000).toFixed(1)} s` +
        patched.found.slice(0, 2).map((f) => `\n  ${f}`).join(""));
      expect(clean.violations + clean.processFaults, `the unpatched code reports, on ${key}:\n${clean.found.join("\n")}`).toBe(0);
      expect(patched.violations + patched.processFaults, `${patch} applied: ${key} reports nothing (the explorer misses this mutant)`).toBeGreaterThan(0);
    }, 420_000);
  }
});
