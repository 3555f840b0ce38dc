/** `effectgate demo` / `effectgate demo blast`: runs the blast-radius demo and prints its table, JSON and chart. */
import { mkdirSync, writeFileSync } from "node:fs";
import { isAbsolute, join, relative, resolve, sep } from "node:path";
import { blastChart } from "../blast/chart.js";
import { blastTable, faultSummary, servicesSummary, toJson } from "../blast/report.js";
import { keptLedgersInTheWay, type KeptLedger } from "../blast/keep.js";
import { LEVELS } from "../blast/levels/index.js";
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
  /** Keep each level's ledger under this directory (--keep). */
  readonly keep?: string;
  readonly levels?: readonly string[];
  readonly workerCommand: readonly [string, ...string[]];
}

export async function demoBlast(options: DemoBlastOptions, host: DemoHost): Promise<void> {
  const { wrap } = host;
  const store = await storeChoice(options, host);
  const keep = options.keep === undefined ? undefined : resolve(options.keep);
  if (keep !== undefined && store.kind === "sqlite") {
    const inTheWay = keptLedgersInTheWay(keep, options.levels ?? LEVELS.map((l) => l.key));
    if (inTheWay.length > 0) {
      throw host.usageError(`--keep never overwrites a ledger, and ${inTheWay.join(", ")} ${inTheWay.length === 1 ? "exists" : "exist"}: give a new or empty directory, or remove ${inTheWay.length === 1 ? "it" : "them"}`);
    }
  }
  const started = Date.now();
  const bar = process.stderr.isTTY ? progressBar() : undefined;
  let run;
  try {
    run = await runBlast({
      seed: options.seed, tasks: options.tasks, store, workerCommand: options.workerCommand,
      ...(options.levels ? { levels: options.levels } : {}),
      ...(keep === undefined ? {} : { keep }),
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
  const inspect = keep === undefined ? "" : keptSummary(run.kept, keep, store, host);
  if (options.json) {
    process.stdout.write(`${JSON.stringify(json, null, 2)}\n`);
    // stdout holds only the JSON.
    if (inspect !== "") process.stderr.write(inspect);
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
      `Wrote ${written.join(" and ")}. Seed ${json.seed}, ${json.tasks} tasks, ledger ${store.kind}; ${((Date.now() - started) / 1000).toFixed(1)} s in all.\n` +
      (inspect === "" ? "" : `\n${inspect}`),
  );
}

/** What --keep kept, and the exact commands that look inside (run from this directory). */
function keptSummary(kept: readonly KeptLedger[], keep: string, store: StoreChoice, host: DemoHost): string {
  if (kept.length === 0) return `--keep: none of the levels that ran keeps a ledger (levels 3-6 do); nothing was kept in ${keep}.\n`;
  const cli = cliInvocation(host.cliPath);
  const last = kept[kept.length - 1] as KeptLedger;
  const where = (k: KeptLedger) => k.kind === "sqlite"
    ? `--db ${shellWord(displayPath(k.path))}`
    : `--pg ${shellWord(store.kind === "postgres" ? shownUrl(store.url) : "URL")} --pg-schema ${k.schema}`;
  const levels = kept.map((k) => k.level).join(", ");
  const lines = [
    last.kind === "sqlite"
      ? `Kept the ledger${kept.length === 1 ? "" : "s"} of level${kept.length === 1 ? "" : "s"} ${levels}: ${kept.map((k) => (k.kind === "sqlite" ? displayPath(k.path) : k.schema)).join(", ")}. Look inside:`
      : `Kept the PostgreSQL schemas of level${kept.length === 1 ? "" : "s"} ${levels}: ${kept.map((k) => (k.kind === "postgres" ? k.schema : "")).join(", ")} (drop them when done). Look inside:`,
    `  ${cli} queue ls ${where(last)}`,
    `  ${cli} ledger ls ${where(last)} --state needs_human`,
    `  ${cli} saga ls ${where(last)}`,
    ...(kept.some((k) => k.level === "6") ? [`  ${cli} breaker ls ${where(kept.find((k) => k.level === "6") as KeptLedger)} --all`] : []),
    `Every level's ledger answers the same commands; \`${cli} queue show ID ${where(last)}\` explains one item.`,
  ];
  if (store.kind === "postgres" && new URL(store.url).password !== "") lines.push("(The URL's password is shown as ***: put it back, or set EFFECTGATE_PG_URL and drop --pg.)");
  return `${lines.join("\n")}\n`;
}

/** How to run this same CLI from here: `effectgate` where it is installed as a package, else `node <path to its main.js>` (a clone). */
function cliInvocation(cliPath: string): string {
  return cliPath.split(sep).includes("node_modules") ? "effectgate" : `node ${shellWord(displayPath(cliPath))}`;
}

/** A path relative to the current directory when it is inside it, else absolute. */
function displayPath(path: string): string {
  const rel = relative(process.cwd(), path);
  return rel !== "" && !rel.startsWith("..") && !isAbsolute(rel) ? rel : path;
}

/** One word for a POSIX shell: quoted only when it needs to be. */
function shellWord(text: string): string {
  return /^[\w@%+=:,./-]+$/.test(text) ? text : `'${text.replace(/'/g, "'\\''")}'`;
}

function shownUrl(url: string): string {
  const parsed = new URL(url);
  if (parsed.password !== "") parsed.password = "***";
  return parsed.toString();
}

async function storeChoice(options: DemoBlastOptions, host: DemoHost): Promise<StoreChoice> {
  if (options.store === "sqlite") return { kind: "sqlite" };
  const url = options.pg ?? process.env.EFFECTGATE_PG_URL;
  if (url === undefined || url === "") {
    throw host.usageError("--store postgres needs a database: give --pg postgres://user:password@host/db or set EFFECTGATE_PG_URL");
  }
  const from = options.pg === undefined ? "EFFECTGATE_PG_URL" : "--pg";
  let scheme: string;
  try {
    scheme = new URL(url).protocol;
  } catch {
    throw host.usageError(`${from} ${JSON.stringify(url.replace(/^([^:/?#]*:\/\/[^:/?#@]*:)[^@/?#]*@/, "$1***@"))} is not a URL: give a PostgreSQL URL, e.g. postgres://user:password@localhost:5432/app`);
  }
  if (scheme !== "postgres:" && scheme !== "postgresql:") {
    throw host.usageError(`${from} ${JSON.stringify(shownUrl(url))} is not a PostgreSQL URL: it must start with postgres:// or postgresql://`);
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
