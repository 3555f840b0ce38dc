/**
 * The product's own hostile-request fuzzer (issue 24): seeded malformed, oversized, deeply nested,
 * duplicated-key, invalid-UTF-8, odd-method, odd-path, odd-token and concurrent same-key requests,
 * over raw sockets, against each surface in its own child process on a real SQLite ledger.
 *
 *   npm run bench:fuzz-http -- --seed=1 --requests=100000 --surface=console
 *
 * Flags:
 *   --seed=N        the generator's seed (default 1): the same seed sends the same bytes
 *   --requests=N    requests per surface (default 10000)
 *   --surface=a,b   surfaces (default all): middleware-node, middleware-hono, console, mcp-http, receipts, mcp-stdio
 *   --concurrency=N connections in flight per surface (default 16)
 *
 * Prints a table per surface and writes the raw JSON to bench/results/fuzz-http-<date>.json.
 * Exit code 1 when there is any finding. bench/fuzz/FINDINGS.md lists what was found and how to reproduce it.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describeEnv, envInfo } from "./lib/env.js";
import { positiveIntFlag as flag } from "./lib/flags.js";
import { table } from "./lib/stats.js";
import { fuzzHttpSurface, type SurfaceReport } from "./fuzz/run-http.js";
import { fuzzStdio } from "./fuzz/run-stdio.js";
import { HTTP_SURFACES, ROOT, type HttpSurfaceName } from "./fuzz/surfaces.js";
import { removeHeapProbeDirs } from "./fuzz/heap.js";

const ALL = [...HTTP_SURFACES, "mcp-stdio"] as const;
const SEED = flag("seed", 1);
const REQUESTS = flag("requests", 10_000);
const CONCURRENCY = flag("concurrency", 16);
const chosen = (process.argv.find((a) => a.startsWith("--surface="))?.slice(10).split(",") ?? [...ALL]);
for (const s of chosen) {
  if (!(ALL as readonly string[]).includes(s)) {
    process.stderr.write(`--surface: unknown surface ${JSON.stringify(s)}; one of ${ALL.join(", ")}\n`);
    process.exit(2);
  }
}

// Stopped from outside: end through process.exit, so the surfaces' children are killed with it (surfaces.ts).
process.once("SIGTERM", () => process.exit(143));
process.once("SIGINT", () => process.exit(130));

const progress = (line: string) => process.stderr.write(`[fuzz-http] ${line}\n`);

const { default: Database } = await import("better-sqlite3");
const sqliteVersion = (new Database(":memory:").prepare("select sqlite_version() as v").get() as { v: string }).v;
const env = envInfo(process.cwd(), ROOT, { betterSqlite3: "?", sqlite: sqliteVersion });
process.stdout.write(`${describeEnv(env)}\nseed ${SEED}, ${REQUESTS} requests per surface, ${CONCURRENCY} connections\n\n`);

const reports: SurfaceReport[] = [];
for (const name of chosen) {
  const report = name === "mcp-stdio"
    ? await fuzzStdio({ seed: SEED, requests: REQUESTS, progress })
    : await fuzzHttpSurface(name as HttpSurfaceName, { seed: SEED, requests: REQUESTS, concurrency: CONCURRENCY, progress });
  reports.push(report);
  const top = Object.entries(report.statuses).sort((a, b) => b[1] - a[1]).slice(0, 8).map(([s, n]) => `${s}×${n}`).join(" ");
  process.stdout.write(`${name}\n${table(["requests", "seconds", "findings", "RSS start/peak/end MiB", "bound MiB", "retained after GC start/end (bound) MiB", "quick_check", "restarts"], [[
    String(report.requests), (report.ms / 1000).toFixed(1), String(report.findings.length),
    `${report.rssStartMiB} / ${report.rssPeakMiB} / ${report.rssEndMiB}`, String(report.rssBoundMiB),
    report.retained ? `${report.retained.startMiB} / ${report.retained.endMiB} (${report.retained.boundMiB})` : "-", report.quickCheck, String(report.restarts),
  ]])}\nanswers: ${top}\n${report.effects ? `effects: ${report.effects.handled} handler runs, ${report.effects.keys} keys, at most ${report.effects.max} per key\n` : ""}${
    report.sessions ? `sessions: ${report.sessions.opened} opened, ${report.sessions.held} held at the end, ${report.sessions.transports ?? "?"} session transports and ${report.sessions.servers ?? "?"} MCP servers live after a GC (${report.sessions.leaked ?? "?"} beyond those held)\n` : ""}`);
  for (const line of report.rssOverCapCollected ?? []) process.stdout.write(`  over the RSS cap until a forced GC (not a finding): ${line}\n`);
  for (const f of report.findings) {
    process.stdout.write(`  FINDING ${f.kind} ×${f.count}: ${f.detail}\n${f.request === undefined ? "" : `    request (${f.requestBytes} bytes): ${JSON.stringify(f.request)}\n`}`);
  }
  process.stdout.write("\n");
}

const dir = join(ROOT, "bench", "results");
mkdirSync(dir, { recursive: true });
const which = chosen.length === ALL.length ? "all" : chosen.join("+");
const file = join(dir, `fuzz-http-${env.date.slice(0, 10)}-seed${SEED}-${which}-${REQUESTS}.json`);
writeFileSync(file, `${JSON.stringify({ env, seed: SEED, requestsPerSurface: REQUESTS, concurrency: CONCURRENCY, reports }, null, 2)}\n`);
process.stdout.write(`raw results: ${file}\n`);
removeHeapProbeDirs();
process.exitCode = reports.some((r) => r.findings.length > 0) ? 1 : 0;
