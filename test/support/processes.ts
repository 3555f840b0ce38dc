/** Child processes for multi-process tests: start, wait for a line, collect output, await exit. */
import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import { existsSync, readdirSync, statSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

export const DIST_INDEX = fileURLToPath(new URL("../../dist/index.js", import.meta.url));

/** What the build compiles: the package (src/) and the demo (demo/, built to dist/demo). */
const SOURCES = [fileURLToPath(new URL("../../src", import.meta.url)), fileURLToPath(new URL("../../demo", import.meta.url))];

function sourceFiles(at: string): string[] {
  return readdirSync(at, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? sourceFiles(join(at, e.name)) : e.name.endsWith(".ts") ? [join(at, e.name)] : []);
}

/** Multi-process tests run the BUILT package: refuse a missing or stale dist/ by name (a stale one would test yesterday's code and pass). */
export function requireBuild(): void {
  if (!existsSync(DIST_INDEX)) throw new Error(`${DIST_INDEX} is missing: run \`npm run build\` first (npm test does it)`);
  const built = statSync(DIST_INDEX).mtimeMs;
  const newer = SOURCES.flatMap(sourceFiles).find((f) => statSync(f).mtimeMs > built);
  if (newer) throw new Error(`dist/ is older than ${newer}: run \`npm run build\` before these tests (\`npm test\` does it)`);
}

export interface Worker {
  readonly child: ChildProcessWithoutNullStreams;
  /** Resolves with the first stdout line that satisfies `match`. */
  line(match: (line: string) => boolean): Promise<string>;
  /** Resolves when the process has exited and its output is fully read, with code, signal, stdout and stderr. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null; stdout: string; stderr: string }>;
}

export function startWorker(script: string, args: readonly string[]): Worker {
  const child = spawn(process.execPath, [script, ...args], { stdio: ["pipe", "pipe", "pipe"] });
  let stdout = "";
  let stderr = "";
  const waiters: { match: (line: string) => boolean; resolve: (line: string) => void }[] = [];
  let pending = "";
  child.stdout.setEncoding("utf8").on("data", (chunk: string) => {
    stdout += chunk;
    pending += chunk;
    let nl: number;
    while ((nl = pending.indexOf("\n")) >= 0) {
      const line = pending.slice(0, nl);
      pending = pending.slice(nl + 1);
      for (const w of [...waiters]) {
        if (w.match(line)) {
          waiters.splice(waiters.indexOf(w), 1);
          w.resolve(line);
        }
      }
    }
  });
  child.stderr.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null; stdout: string; stderr: string }>((resolve) =>
    // "close", not "exit": at "exit" the last lines of stdout may still be unread.
    child.on("close", (code, signal) => resolve({ code, signal, stdout, stderr })));
  return {
    child,
    exited,
    line: (match) => new Promise<string>((resolve, reject) => {
      waiters.push({ match, resolve });
      void exited.then(({ code, signal }) => reject(new Error(`worker exited (code ${code}, signal ${signal}) before the expected line; stderr:\n${stderr}`)));
    }),
  };
}

/** How a one-shot fixture process ended, with the JSON lines it printed. */
export interface FixtureExit {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly lines: unknown[];
  readonly stderr: string;
}

/**
 * Runs a fixture script with one JSON job argument to its end (exit or death) and parses each
 * stdout line as JSON. Waits for "close", not "exit": at "exit" the last lines may still be unread.
 */
export function runFixture(script: string, job: unknown, options: { cwd: string; label: string }): Promise<FixtureExit> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [script, JSON.stringify(job)], { cwd: options.cwd, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.setEncoding("utf8").on("data", (s: string) => (stdout += s));
    child.stderr.setEncoding("utf8").on("data", (s: string) => (stderr += s));
    // A watchdog, not a synchronisation: a hung child fails the test instead of hanging it.
    const watchdog = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`${options.label} hung for 20 s; stderr:\n${stderr}`));
    }, 20_000);
    child.on("error", (err) => {
      clearTimeout(watchdog);
      reject(err);
    });
    child.on("close", (code, signal) => {
      clearTimeout(watchdog);
      resolve({ code, signal, stderr, lines: stdout.split("\n").filter((l) => l.trim() !== "").map((l) => JSON.parse(l) as unknown) });
    });
  });
}
