/**
 * The orchestrator of `effectgate demo`: for each protection level, fresh downstream services,
 * fresh worker processes (a steady one, and a chain of crash workers that are SIGKILLed and
 * resumed), then the ground truth from what the services applied. Levels run one after
 * another, so their timings do not disturb each other.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { accessSync, constants, existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { randomBytes } from "node:crypto";
import { messageOf } from "../text.js";
import type { CallOutcome } from "./agent.js";
import { LEVELS } from "./levels/index.js";
import type { Level, LevelAudit, StoreSpec } from "./levels/types.js";
import { startServices, type FaultKind } from "./services.js";
import { groundTruth, type GroundTruth } from "./truth.js";
import { configPath, killLogPath, outcomeLogPath, tasksOf, workerRoles, type WorkerConfig, type WorkerRole } from "./worker.js";
import { buildWorkload, type Workload } from "./workload.js";
import { withScratchDir } from "../scratch.js";
import { keepSqliteLedger, keptLedgerPath, type KeptLedger } from "./keep.js";

/** The default size: measured to finish well under a minute on a 2-core machine (docs/demo.md). */
export const DEFAULT_TASKS = 120;
export const DEFAULT_SEED = 7;

export type StoreChoice = { readonly kind: "sqlite" } | { readonly kind: "postgres"; readonly url: string };

export interface BlastOptions {
  readonly seed: number;
  readonly tasks: number;
  readonly store: StoreChoice;
  /** argv that starts a worker: [node, cli, "demo", "blast-worker"]. */
  readonly workerCommand: readonly [string, ...string[]];
  /** Only these level keys (default: all). */
  readonly levels?: readonly string[];
  /** Tasks the steady worker runs at once (default 12). */
  readonly concurrency?: number;
  readonly onProgress?: (progress: Progress) => void;
  /** Longest one worker process may take (default 120 s). */
  readonly workerTimeoutMs?: number;
  /** Keep each level's ledger: SQLite files copied under this directory, PostgreSQL schemas not dropped (keep.ts). */
  readonly keep?: string;
}

export interface Progress {
  readonly level: Level;
  /** 0-based position among the levels that run, and how many run. */
  readonly index: number;
  readonly of: number;
  readonly tasksDone: number;
  readonly tasks: number;
}

export interface LevelRow {
  readonly level: Level;
  readonly result:
    | { readonly available: false; readonly waitingFor: string }
    | {
        readonly available: true;
        readonly truth: GroundTruth;
        readonly audit: LevelAudit | null;
        readonly wallMs: number;
        readonly kills: number;
        readonly injected: Readonly<Record<FaultKind | "refused" | "drifted", number>>;
      };
}

export interface BlastRun {
  readonly seed: number;
  readonly tasks: number;
  readonly store: StoreChoice["kind"];
  readonly workload: Workload;
  readonly rows: readonly LevelRow[];
  /** The ledgers kept with `keep`, in level order. */
  readonly kept: readonly KeptLedger[];
}

export async function runBlast(options: BlastOptions): Promise<BlastRun> {
  const workload = buildWorkload(options.seed, options.tasks);
  const chosen = options.levels ? LEVELS.filter((l) => options.levels?.includes(l.key)) : LEVELS;
  // EFFECTGATE_DEMO_KEEP=1 keeps every level's directory (config, checkpoints, ledger, outcome logs, effects.json) for a look.
  return withScratchDir(scratchRoot(), "effectgate-demo-", { keep: process.env.EFFECTGATE_DEMO_KEEP === "1" }, async (root) => {
    const runnable: Level[] = [];
    const availability = new Map<Level, LevelRow["result"]>();
    for (const level of chosen) {
      const a = await level.available();
      if (a.available) runnable.push(level);
      else availability.set(level, { available: false, waitingFor: a.waitingFor });
    }
    const rows: LevelRow[] = [];
    const kept: KeptLedger[] = [];
    for (const level of chosen) {
      const unavailable = availability.get(level);
      if (unavailable) {
        rows.push({ level, result: unavailable });
        continue;
      }
      const dir = join(root, `level-${level.key}`);
      rows.push({ level, result: await runLevel(level, dir, workload, options, runnable.indexOf(level), runnable.length, kept) });
    }
    return { seed: options.seed, tasks: options.tasks, store: options.store.kind, workload, rows, kept };
  });
}

async function runLevel(
  level: Level, dir: string, workload: Workload, options: BlastOptions, index: number, of: number, kept: KeptLedger[],
): Promise<LevelRow["result"]> {
  mkdirSync(dir, { recursive: true });
  const services = await startServices({ workload });
  const store: StoreSpec = options.store.kind === "sqlite"
    ? { kind: "sqlite", path: join(dir, "ledger.db") }
    : { kind: "postgres", url: options.store.url, schema: `effectgate_demo_${level.key}_${randomBytes(5).toString("hex")}` };
  const config: WorkerConfig = {
    level: level.key, seed: workload.seed, tasks: workload.tasks.length, urls: services.urls, store,
    concurrency: options.concurrency ?? 12,
  };
  writeFileSync(configPath(dir), JSON.stringify(config), { mode: 0o600 });
  let done = 0;
  const report = () => options.onProgress?.({ level, index, of, tasksDone: done, tasks: workload.tasks.length });
  report();
  const onTask = () => {
    done++;
    report();
  };
  try {
    const started = Date.now();
    await Promise.all([
      runWorker(options, dir, "steady", onTask).then((exit) => {
        if (exit.code !== 0) throw new Error(`the steady worker of level ${level.key} failed (${describe(exit)})${tail(exit.stderr)}`);
      }),
      ...workerRoles().filter((role) => role !== "steady").map(async (role) => {
        // Each crash worker is killed at its task's planned point; the next one of its chain resumes. One more start than planned kills.
        const planned = tasksOf(workload, role).length;
        if (planned === 0) return;
        for (let starts = 0; ; starts++) {
          if (starts > planned + 1) throw new Error(`level ${level.key}: the ${role} workers were started ${starts} times without finishing`);
          const exit = await runWorker(options, dir, role, onTask);
          if (exit.code === 0) return;
          if (exit.signal !== "SIGKILL") throw new Error(`a ${role} worker of level ${level.key} failed (${describe(exit)})${tail(exit.stderr)}`);
        }
      }),
    ]);
    await services.quiesce();
    const wallMs = Date.now() - started;
    const drifted = services.drift();
    const audit = level.audit ? await level.audit({ dir, urls: services.urls, store, workload }) : null;
    if (process.env.EFFECTGATE_DEMO_KEEP === "1") writeFileSync(join(dir, "effects.json"), JSON.stringify(services.effects, null, 1));
    const outcomes = workerRoles().flatMap((role) => readLines<CallOutcome>(outcomeLogPath(dir, role)));
    const kills = readLines<unknown>(killLogPath(dir)).length;
    const truth = groundTruth(workload, services.effects, outcomes);
    if (process.env.EFFECTGATE_DEMO_KEEP === "1") writeFileSync(join(dir, "truth.json"), JSON.stringify(truth, null, 1));
    if (options.keep !== undefined) {
      // Levels without a ledger (0-2, ref) have nothing to keep.
      if (store.kind === "sqlite" && existsSync(store.path)) {
        const to = keptLedgerPath(options.keep, level.key);
        await keepSqliteLedger(store.path, to);
        kept.push({ level: level.key, kind: "sqlite", path: to });
      } else if (store.kind === "postgres" && level.audit) {
        kept.push({ level: level.key, kind: "postgres", schema: store.schema });
      }
    }
    return { available: true, truth, audit, wallMs, kills, injected: { ...services.injected, drifted } };
  } finally {
    // A worker still running here means another one failed: stop it before its services go.
    for (const child of running) child.kill("SIGKILL");
    await services.close();
    if (store.kind === "postgres" && !kept.some((k) => k.kind === "postgres" && k.schema === store.schema)) await dropSchema(store.url, store.schema);
  }
}

/** Worker processes started and not yet exited. */
const running = new Set<ChildProcess>();

interface Exit {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly stderr: string;
}

function runWorker(options: BlastOptions, dir: string, role: WorkerRole, onTask: () => void): Promise<Exit> {
  const [command, ...base] = options.workerCommand;
  const timeoutMs = options.workerTimeoutMs ?? 120_000;
  return new Promise((resolve, reject) => {
    const child = spawn(command, [...base, "--dir", dir, "--role", role], { stdio: ["ignore", "pipe", "pipe"] });
    running.add(child);
    let stderr = "";
    let pending = "";
    child.stdout.setEncoding("utf8").on("data", (chunk: string) => {
      pending += chunk;
      let nl: number;
      while ((nl = pending.indexOf("\n")) >= 0) {
        const line = pending.slice(0, nl);
        pending = pending.slice(nl + 1);
        if (line.startsWith('{"done"')) onTask();
      }
    });
    child.stderr.setEncoding("utf8").on("data", (chunk: string) => (stderr = (stderr + chunk).slice(-20_000)));
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`a demo worker (${role}) took longer than ${timeoutMs} ms and was stopped${tail(stderr)}`));
    }, timeoutMs);
    child.on("error", (err) => {
      running.delete(child);
      clearTimeout(timer);
      reject(new Error(`could not start a demo worker (${command}): ${messageOf(err)}`));
    });
    child.on("close", (code, signal) => {
      running.delete(child);
      clearTimeout(timer);
      resolve({ code, signal, stderr });
    });
  });
}

/**
 * Where the levels' files go: $TMPDIR when set, else /dev/shm where it exists (memory: the demo measures
 * faults, and a busy disk would only add noise to every level alike), else the system temp directory.
 */
function scratchRoot(): string {
  if (process.env.TMPDIR) return tmpdir();
  try {
    accessSync("/dev/shm", constants.W_OK);
    return "/dev/shm";
  } catch {
    return tmpdir();
  }
}

function readLines<T>(file: string): T[] {
  if (!existsSync(file)) return [];
  return readFileSync(file, "utf8").split("\n").filter((l) => l.trim() !== "").map((l) => JSON.parse(l) as T);
}

function describe(exit: Exit): string {
  return exit.signal ? `signal ${exit.signal}` : `exit code ${exit.code ?? "?"}`;
}

function tail(stderr: string): string {
  const text = stderr.trim();
  return text ? `; its stderr:\n${text.split("\n").slice(-20).join("\n")}` : "";
}

async function dropSchema(url: string, schema: string): Promise<void> {
  const { default: pg } = await import("pg");
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  } finally {
    await client.end();
  }
}
