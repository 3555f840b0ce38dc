/**
 * `effectgate demo` end to end, small: the built CLI runs the naive level and the highest level
 * that exists against the simulated services, with real worker processes and real SIGKILLs.
 * The counts asserted are the downstream services' own (the ground truth).
 *
 * EFFECTGATE_DEMO_TIME_SCALE stretches the demo's timeouts so that a test machine busy with other
 * suites does not turn ordinary requests into timeouts the seed did not plan.
 */
import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { LEVELS } from "../../demo/blast/levels/index.js";
import { CLI } from "../cli/run-cli.js";

interface Level {
  level: number | "ref";
  name: string;
  available: boolean;
  waitingFor?: string;
  duplicates: number | null;
  lost: number | null;
  halfDone: number | null;
  humanQueue: number | null;
  overQuota: number | null;
  wrongParams: number | null;
  discrepancies: { found: number | null; present: number | null };
  toldDoneNotApplied: number | null;
  unresolved: number | null;
  effects: number | null;
  kills: number | null;
  faults: Record<string, number> | null;
}

interface Output {
  seed: number;
  tasks: number;
  levels: Level[];
}

const SEED = 11;
const TASKS = 18;
const env = { EFFECTGATE_DEMO_TIME_SCALE: "2" };

/** The highest level that can run in this build (levels 4–6 need sagas, reconciliation, governance). */
async function highestAvailable(): Promise<string> {
  let top = "3";
  for (const level of LEVELS) if (level.key !== "ref" && (await level.available()).available) top = level.key;
  return top;
}

/** Runs the BUILT command, as a user would (npm test builds first). */
function run(args: readonly string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  if (!existsSync(CLI)) throw new Error(`${CLI} does not exist: build first (npm run build)`);
  return new Promise((resolve, reject) => {
    execFile(process.execPath, [CLI, ...args], { env: { ...process.env, ...env }, timeout: 110_000 }, (err, stdout, stderr) => {
      if (err && typeof err.code !== "number") return reject(new Error(`the demo did not finish (${String(err.signal ?? err.code)}): ${stderr}`));
      resolve({ code: err ? (err.code as number) : 0, stdout, stderr });
    });
  });
}

async function demo(levels: string): Promise<Output> {
  const { code, stdout, stderr } = await run(["demo", "--tasks", String(TASKS), "--seed", String(SEED), "--levels", levels, "--json"]);
  expect(stderr).toBe("");
  expect(code).toBe(0);
  return JSON.parse(stdout) as Output;
}

/** The ground-truth counts of a level: what the downstream services applied and what is left for people. */
const truth = (l: Level) => ({
  level: l.level, duplicates: l.duplicates, lost: l.lost, halfDone: l.halfDone, wrongParams: l.wrongParams, overQuota: l.overQuota,
  humanQueue: l.humanQueue, discrepancies: l.discrepancies, effects: l.effects, kills: l.kills,
});

describe("effectgate demo (blast radius)", () => {
  let first: Output | undefined;
  let top = "3";

  it("the full level leaves no duplicate, no lost effect, nothing unresolved; the naive level shows the faults are live", async () => {
    top = await highestAvailable();
    first = await demo(`0,${top}`);
    expect(Object.keys(first).sort()).toEqual(["levels", "seed", "tasks"]);
    expect(first).toMatchObject({ seed: SEED, tasks: TASKS });
    const [naive, full] = first.levels;
    expect(naive?.level).toBe(0);
    expect(full?.level).toBe(Number(top));
    expect(full?.available).toBe(true);

    // The faults were injected: workers were killed, and the naive loop really doubled effects.
    expect(naive?.kills).toBeGreaterThan(0);
    expect(naive?.duplicates).toBeGreaterThan(0);
    expect((naive?.lost ?? 0) + (naive?.wrongParams ?? 0)).toBeGreaterThan(0);

    // The full level, counted by the downstreams themselves.
    expect(full).toMatchObject({ duplicates: 0, lost: 0, toldDoneNotApplied: 0, wrongParams: 0 });
    // Every uncertain call was resolved or queued for a person: none is left in_progress or uncertain.
    expect(full?.unresolved).toBe(0);
    // Destructive effects stay within the quota once governance exists (level 6).
    if (Number(top) >= 6) expect(full?.overQuota).toBe(0);
    // With reconciliation (level 5), it finds every discrepancy that is really there.
    if (Number(top) >= 5) expect(full?.discrepancies.found).toBe(full?.discrepancies.present);
  }, 120_000);

  it("is deterministic: the same seed gives the same ground-truth counts", async () => {
    expect(first).toBeDefined();
    const again = await demo(`0,${top}`);
    expect(again.levels.map(truth)).toEqual(first!.levels.map(truth));
  }, 120_000);
});
