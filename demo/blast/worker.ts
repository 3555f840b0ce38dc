/**
 * One agent worker process of `effectgate demo` (the hidden `effectgate demo blast-worker`).
 *
 * The CLI starts, per level, a "steady" worker that runs every task without a planned crash
 * (several at a time) and CRASH_CHAINS chains of "crash" workers, each running its share of the
 * tasks with a planned crash one after another: each worker is SIGKILLed at its planned point,
 * and the next one of its chain resumes from the checkpoints (after the level's recovery step). Workers learn everything from the level's
 * directory (config.json) and report on stdout one JSON line per finished task.
 */
import { appendFileSync, existsSync, mkdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { runTask } from "./agent.js";
import { levelByKey } from "./levels/index.js";
import type { CallHooks, Executor, StoreSpec } from "./levels/types.js";
import { CallTimer } from "./timing.js";
import type { Urls } from "./tools.js";
import { buildWorkload, type KillPoint, type Task, type Workload } from "./workload.js";

/** "steady", or "crash-<n>": one of CRASH_CHAINS chains of crash workers, each running its share of the crash tasks in turn. */
export type WorkerRole = "steady" | `crash-${number}`;
export const CRASH_CHAINS = 2;
export const workerRoles = (): WorkerRole[] => ["steady", ...Array.from({ length: CRASH_CHAINS }, (_, i) => `crash-${i}` as const)];

export function isWorkerRole(value: string): value is WorkerRole {
  return (workerRoles() as string[]).includes(value);
}

/** The tasks a worker of this role runs. */
export function tasksOf(workload: Workload, role: WorkerRole): Task[] {
  if (role === "steady") return workload.tasks.filter((t) => t.crash === null);
  const chain = Number(role.slice("crash-".length));
  return workload.tasks.filter((t) => t.crash !== null).filter((_, i) => i % CRASH_CHAINS === chain);
}

/** What the CLI writes to <dir>/config.json for its workers. */
export interface WorkerConfig {
  readonly level: string;
  readonly seed: number;
  readonly tasks: number;
  readonly urls: Urls;
  readonly store: StoreSpec;
  /** Tasks the steady worker runs at the same time. */
  readonly concurrency: number;
}

export const configPath = (dir: string) => join(dir, "config.json");
export const outcomeLogPath = (dir: string, role: WorkerRole) => join(dir, `outcomes.${role}.jsonl`);
export const killLogPath = (dir: string) => join(dir, "kills.jsonl");

export async function runBlastWorker(options: { dir: string; role: WorkerRole }): Promise<void> {
  const { dir, role } = options;
  const config = JSON.parse(readFileSync(configPath(dir), "utf8")) as WorkerConfig;
  const level = levelByKey(config.level);
  if (!level) throw new Error(`no level ${JSON.stringify(config.level)}`);
  const workload = buildWorkload(config.seed, config.tasks);
  const mine = tasksOf(workload, role);
  mkdirSync(join(dir, "checkpoints"), { recursive: true });

  const killer = crashHook(dir, mine);
  const runtime = await level.open({ urls: config.urls, dir, role, store: config.store, seed: config.seed, workload });
  if (role !== "steady") await runtime.recover();

  // One tool layer per agent loop name: "a" serves every task, "b" the twin of a task run twice at once.
  const loops = new Map<string, Promise<{ executor: Executor; timer: CallTimer }>>();
  const loopFor = (name: string) => {
    let loop = loops.get(name);
    if (!loop) {
      const timer = new CallTimer();
      const hooks: CallHooks = { kill: killer.kill, downstream: (id, work) => timer.around(id, work) };
      loop = runtime.executor(hooks).then((executor) => ({ executor, timer }));
      loops.set(name, loop);
    }
    return loop;
  };
  await loopFor("a");

  const run = async (task: Task) => {
    const names = task.parallel ? ["a", "b"] : ["a"];
    await Promise.all(names.map(async (name) => {
      const { executor, timer } = await loopFor(name);
      await runTask(task, {
        seed: config.seed, loop: `${role}/${name}`, executor, timer,
        checkpointPath: join(dir, "checkpoints", `${task.id}.${name}.json`),
        outcomeLog: outcomeLogPath(dir, role),
        register: killer.register,
      });
    }));
    process.stdout.write(`${JSON.stringify({ done: task.id })}\n`);
  };

  const width = role === "steady" ? Math.max(1, config.concurrency) : 1;
  await warmUp(config.urls, width);
  let next = 0;
  await Promise.all(Array.from({ length: Math.min(width, mine.length) }, async (_, slot) => {
    await sleep(slot * 5); // a ramp, not a stampede: the first calls of a cold process are its slowest
    while (next < mine.length) await run(mine[next++] as Task);
  }));
  for (const loop of loops.values()) await (await loop).executor.close();
  await runtime.close();
}

/**
 * Opens `width` keep-alive connections to each service and warms the HTTP client before the first
 * task, so that a cold start does not turn the first real calls into timeouts the seed did not plan.
 */
async function warmUp(urls: Urls, width: number): Promise<void> {
  await Promise.all(Object.values(urls).flatMap((url) =>
    Array.from({ length: width }, () => fetch(`${url}/health`).then((res) => res.text()).catch(() => undefined))));
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** SIGKILLs this process at each task's planned point, once per plan (kills already done are in kills.jsonl). */
function crashHook(dir: string, tasks: readonly Task[]): { kill: CallHooks["kill"]; register: (block: { id: string; input: unknown }) => void } {
  const planned = new Map<string, KillPoint>();
  for (const task of tasks) if (task.crash) planned.set(task.crash.ref, task.crash.point);
  const file = killLogPath(dir);
  const fired = new Set<string>(existsSync(file) ? readFileSync(file, "utf8").split("\n").filter(Boolean).map((l) => (JSON.parse(l) as { ref: string }).ref) : []);
  const refOf = new Map<string, string>();
  return {
    register(block) {
      const ref = (block.input as { reference?: unknown }).reference;
      if (typeof ref === "string" && planned.has(ref)) refOf.set(block.id, ref);
    },
    kill(point, toolUseId) {
      const ref = refOf.get(toolUseId);
      if (ref === undefined || planned.get(ref) !== point || fired.has(ref)) return;
      fired.add(ref);
      appendFileSync(file, `${JSON.stringify({ ref, point, pid: process.pid })}\n`);
      process.kill(process.pid, "SIGKILL");
    },
  };
}
