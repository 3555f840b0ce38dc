/**
 * What a fuzzed child retains after a forced GC (heap-probe.cjs, preloaded through NODE_OPTIONS):
 * the fuzzer bounds this, and reports RSS beside it, so a leak (sessions never freed) is a finding
 * and V8 keeping heap it no longer needs is not.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import os from "node:os";
import { join } from "node:path";

const MIB = 1024 * 1024;
/** Growth of what a child retains after a forced GC, from the first batch to the end, past which it is a finding. */
export const RETAINED_GROWTH_MIB = 32;

export interface Retained {
  /** V8 heap in use after the GC, plus memory outside it that JS objects hold (Buffers): what a leak grows. */
  readonly retainedMiB: number;
  readonly heapUsedMiB: number;
  readonly externalMiB: number;
  readonly arrayBuffersMiB: number;
  readonly rssMiB: number;
  /** Live instances of the classes named with `countClasses` (heap-probe.cjs), after the GC. */
  readonly counts?: Readonly<Record<string, number>>;
}

const probeDirs = new Set<string>();

/** Removes the folders the probes wrote into (a run, or a test, calls it when it is done). */
export function removeHeapProbeDirs(): void {
  for (const dir of probeDirs) rmSync(dir, { recursive: true, force: true });
  probeDirs.clear();
}

/** The folder the children write into, and the environment that preloads the probe. */
export function heapProbeEnv(root: string): { dir: string; env: Record<string, string> } {
  const probe = join(root, "bench", "fuzz", "heap-probe.cjs");
  const dir = mkdtempSync(join(os.tmpdir(), "effectgate-fuzz-heap-"));
  probeDirs.add(dir);
  const options = [process.env.NODE_OPTIONS ?? "", `-r ${JSON.stringify(probe)}`].join(" ").trim();
  return { dir, env: { EFFECTGATE_FUZZ_HEAP_DIR: dir, NODE_OPTIONS: options } };
}

/**
 * The environment that makes a probed child count the live instances of classes after its GC:
 * `{ name: [module specifier, export] }`, each specifier resolved here to the file the child loads.
 */
export function countClasses(classes: Readonly<Record<string, readonly [string, string]>>): Record<string, string> {
  const resolved = Object.fromEntries(Object.entries(classes).map(([name, [specifier, exported]]) => [name, [import.meta.resolve(specifier), exported]]));
  return { EFFECTGATE_FUZZ_COUNT: JSON.stringify(resolved) };
}

const round = (bytes: number) => Math.round((bytes / MIB) * 10) / 10;

/** Asks `pid` for a forced GC and its memory; undefined when it did not answer within 15 s (or is gone). */
export async function retained(pid: number, dir: string): Promise<Retained | undefined> {
  const file = join(dir, `heap-${pid}.json`);
  const before = existsSync(file) ? (JSON.parse(readFileSync(file, "utf8")) as { n: number }).n : 0;
  try {
    process.kill(pid, "SIGUSR2");
  } catch {
    return undefined;
  }
  for (let waited = 0; waited < 15_000; waited += 50) {
    await new Promise((resolve) => setTimeout(resolve, 50));
    if (!existsSync(file)) continue;
    const m = JSON.parse(readFileSync(file, "utf8")) as { n: number; rss: number; heapUsed: number; external: number; arrayBuffers: number; counts?: Record<string, number> };
    if (m.n > before) {
      return {
        retainedMiB: round(m.heapUsed + m.external), heapUsedMiB: round(m.heapUsed), externalMiB: round(m.external), arrayBuffersMiB: round(m.arrayBuffers), rssMiB: round(m.rss),
        ...(m.counts && Object.keys(m.counts).length > 0 ? { counts: m.counts } : {}),
      };
    }
  }
  return undefined;
}

/**
 * What `pid` retains once the work it was sent has drained: the figure after a forced GC, taken
 * every 2 s until it stops falling (requests still in flight hold their bodies; over stdio a host
 * may send faster than the upstream answers), at most `ms`.
 */
export async function settledRetained(pid: number, dir: string, ms = 60_000): Promise<(Retained & { readonly afterMs: number }) | undefined> {
  const started = Date.now();
  let last = await retained(pid, dir);
  while (last && Date.now() - started < ms) {
    await new Promise((resolve) => setTimeout(resolve, 2000));
    const next = await retained(pid, dir);
    if (!next) break;
    const falling = next.retainedMiB < last.retainedMiB - 1;
    last = next;
    if (!falling) break;
  }
  return last && { ...last, afterMs: Date.now() - started };
}
