/** `effectgate demo` / `effectgate demo blast`: runs the blast-radius demo and prints its table, JSON and chart. */
import { mkdirSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { blastChart } from "../blast/chart.js";
import { blastTable, faultSummary, servicesSummary, toJson } from "../blast/report.js";
import { runBlast, type Progress, type StoreChoice } from "../blast/runner.js";
import type { DemoHost } from "./host.js";

export const DEFAULT_DEMO_OUT = ".effectgate/demo";

export interface DemoBlastOptions {
  readonly tasks: number;
  readonly seed: number;
  readonly store: "sqlite" | "postgres";
  readonly pg?: string;
  readonly json: boolean;
  readonly out?: string;
  readonly levels?: readonly string[];
  readonly workerCommand: readonly [string, ...string[]];
}

export async function demoBlast(options: DemoBlastOptions, host: DemoHost): Promise<void> {
  const { wrap } = host;
  const store = await storeChoice(options, host);
  const started = Date.now();
  const bar = process.stderr.isTTY ? progressBar() : undefined;
  let run;
  try {
    run = await runBlast({
      seed: options.seed, tasks: options.tasks, store, workerCommand: options.workerCommand,
      ...(options.levels ? { levels: options.levels } : {}),
      ...(bar ? { onProgress: bar.update } : {}),
    });
  } finally {
    bar?.clear();
  }
  const json = toJson(run);
  const out = options.out ?? (options.json ? undefined : DEFAULT_DEMO_OUT);
  let written: string[] = [];
  if (out !== undefined) {
    const dir = resolve(out);
    mkdirSync(dir, { recursive: true });
    const jsonFile = join(dir, "blast-radius.json");
    const svgFile = join(dir, "blast-radius.svg");
    writeFileSync(jsonFile, `${JSON.stringify(json, null, 2)}\n`);
    writeFileSync(svgFile, blastChart(json, { store: store.kind === "sqlite" ? "SQLite" : "PostgreSQL" }));
    written = [jsonFile, svgFile];
  }
  if (options.json) {
    process.stdout.write(`${JSON.stringify(json, null, 2)}\n`);
    return;
  }
  const rows = json.levels.map((l) => `- ${l.level === "ref" ? "ref" : `L${l.level}`} ${l.name}: ${l.adds}.`);
  process.stdout.write(
    `effectgate demo: the blast radius of an agent's tool calls under injected faults, per protection level\n\n` +
      `${wrap(faultSummary(run.workload), 100)}\n\n` +
      `Downstream services (real HTTP servers on 127.0.0.1; their own counts are the ground truth):\n${servicesSummary()}\n\n` +
      `${blastTable(json)}\n\n` +
      `${rows.map((r) => wrap(r, 100).replace(/\n/g, "\n  ")).join("\n")}\n\n` +
      `${wrap("Columns: duplicates = effects beyond the first for one business reference; lost = needed effects never applied (or applied with the wrong parameters) that nobody is waiting on; half-done = orders left with some of reserve/charge/ship; found/present = discrepancies between the agent's record and the downstreams that reconciliation found / that are really there; to a human = calls queued for a person; over quota = draft deletions beyond 2 per task; overhead = time per call on top of the downstream's own. Exact definitions: docs/demo.md.", 100)}\n\n` +
      `Wrote ${written.join(" and ")}. Seed ${json.seed}, ${json.tasks} tasks, ledger ${store.kind}; ${((Date.now() - started) / 1000).toFixed(1)} s in all.\n`,
  );
}

async function storeChoice(options: DemoBlastOptions, host: DemoHost): Promise<StoreChoice> {
  if (options.store === "sqlite") return { kind: "sqlite" };
  const url = options.pg ?? process.env.EFFECTGATE_PG_URL;
  if (url === undefined || url === "") {
    throw host.usageError("--store postgres needs a database: give --pg postgres://user:password@host/db or set EFFECTGATE_PG_URL");
  }
  try {
    await import("pg");
  } catch {
    throw host.usageError("--store postgres needs the `pg` package: npm install pg");
  }
  return { kind: "postgres", url };
}

function progressBar(): { update: (p: Progress) => void; clear: () => void } {
  let last = "";
  return {
    update(p) {
      const width = 24;
      const filled = Math.round((p.tasksDone / Math.max(1, p.tasks)) * width);
      const label = `${p.level.key === "ref" ? "ref" : `L${p.level.key}`} ${p.level.name}`;
      const line = `[${"#".repeat(filled)}${"-".repeat(width - filled)}] level ${p.index + 1}/${p.of} ${label}: ${p.tasksDone}/${p.tasks} tasks`;
      if (line === last) return;
      last = line;
      process.stderr.write(`\r\x1b[K${line.slice(0, (process.stderr.columns || 100) - 1)}`);
    },
    clear() {
      if (last !== "") process.stderr.write("\r\x1b[K");
    },
  };
}
