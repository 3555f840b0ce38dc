/**
 * One explorer sample, as a mutant's header names it ("Explorer: entry <e>, seed <s>, <n>
 * schedules[, ledger <memory|sqlite|postgres-proxy>]"), and how it is run and judged. Shared by
 * test/explorer/mutants.test.ts (the unpatched code, in its own process) and the driver it writes
 * into each scratch copy (the patched code): both import this file by the same relative path.
 */
import type { ExploreOptions, ExploreReport } from "../../src/testing/explorer/explore.js";
import type { EntryName } from "../../src/testing/explorer/entries/entry.js";

export interface Sample {
  readonly entry: EntryName;
  readonly seed: number;
  readonly schedules: number;
  readonly ledger: "memory" | "sqlite" | "postgres-proxy";
}

export interface SampleOutcome {
  readonly violations: number;
  readonly processFaults: number;
  /** The first few, to say what was found. */
  readonly found: readonly string[];
}

const LINE = /^Explorer: entry ([\w-]+), seed (\d+), (\d+) schedules?(?:, ledger (memory|sqlite|postgres-proxy))?\.?\s*$/m;

/** The sample a mutant's header names, or undefined if it names none. */
export function sampleOf(patch: string): Sample | undefined {
  const header = patch.slice(0, Math.max(0, patch.indexOf("\ndiff --git")));
  const m = LINE.exec(header);
  if (!m) return undefined;
  return { entry: m[1] as EntryName, seed: Number(m[2]), schedules: Number(m[3]), ledger: (m[4] ?? "memory") as Sample["ledger"] };
}

export function describeSample(s: Sample): string {
  return `entry ${s.entry}, seed ${s.seed}, ${s.schedules} schedules, ledger ${s.ledger}`;
}

export async function runSample(explore: (o: ExploreOptions) => Promise<ExploreReport>, s: Sample, pgUrl: string | undefined): Promise<SampleOutcome> {
  if (s.ledger === "postgres-proxy" && !pgUrl) throw new Error(`the sample ${describeSample(s)} needs PostgreSQL (EFFECTGATE_TEST_PG_URL)`);
  const ledger: ExploreOptions["ledger"] = s.ledger === "postgres-proxy" ? { postgres: pgUrl!, proxy: true } : s.ledger;
  const r = await explore({ entry: s.entry, seed: s.seed, schedules: s.schedules, ledger });
  const found = [
    ...r.violations.map((v) => `seed ${v.seed} ${v.invariant}: ${v.message}`),
    ...r.processFaults.map((f) => `seed ${f.seed} process fault: ${f.message}`),
  ];
  return { violations: r.violations.length, processFaults: r.processFaults.length, found: found.slice(0, 5).map((f) => f.slice(0, 300)) };
}
