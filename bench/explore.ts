/**
 * The fault explorer at full count: simulated schedules on the memory and SQLite ledgers and a
 * share on PostgreSQL, then real SIGKILL crash points on SQLite and PostgreSQL. Prints, per part,
 * schedules run, faults injected, violations by invariant and time, and writes the raw JSON to
 * bench/results/explore-<date>.json.
 *
 *   npm run bench:explore [-- --memory N --sqlite N --postgres N --postgres-proxy N --sqlite-driver N --kills-sqlite N --kills-postgres N --seed N --lanes N --out FILE]
 *
 * --postgres-proxy runs PostgreSQL schedules through the explorer's TCP proxy, which also cuts
 * connections, drops and delays replies after COMMIT and stalls, inside group-commit batches too;
 * --sqlite-driver runs SQLite schedules whose writes meet real SQLITE_BUSY and SQLITE_IOERR.
 *
 * Parts can run in separate processes at once (say, the simulated parts in one and the kills in
 * another, each with the other's counts set to 0 and its own --out).
 *
 * PostgreSQL parts use EFFECTGATE_TEST_PG_URL (default postgres://postgres@127.0.0.1:5432/test);
 * pass --postgres 0 --kills-postgres 0 without a server.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { cpus, totalmem } from "node:os";
import { explore, type ExploreReport } from "../src/testing/explorer/explore.js";
import { exploreKills, type KillReport } from "../src/testing/explorer/kills.js";

const arg = (name: string, fallback: number) => {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? Number(process.argv[i + 1]) : fallback;
};
const SEED = arg("seed", 1);
const PG = process.env.EFFECTGATE_TEST_PG_URL ?? "postgres://postgres@127.0.0.1:5432/test";
const parts = {
  memory: arg("memory", 80_000),
  sqlite: arg("sqlite", 25_000),
  postgres: arg("postgres", 2_000),
  postgresProxy: arg("postgres-proxy", 2_000),
  sqliteDriver: arg("sqlite-driver", 5_000),
  killsSqlite: arg("kills-sqlite", 6_000),
  killsPostgres: arg("kills-postgres", 4_000),
};
// Children at once in the SIGKILL parts: most of a run is a child starting and waiting, so more lanes than cores pay.
const LANES = arg("lanes", 6);

const line = (name: string, r: ExploreReport | KillReport, extra: string) =>
  console.log(`${name.padEnd(22)} ${extra}  violations ${JSON.stringify(r.byInvariant)}  ${(r.ms / 1000).toFixed(1)} s`);

function progress(label: string, every: number) {
  let n = 0;
  return () => {
    if (++n % every === 0) process.stderr.write(`  ${label}: ${n}\n`);
  };
}

async function main(): Promise<void> {
  console.log(`fault explorer, seed ${SEED}, node ${process.version}, ${cpus().length} × ${cpus()[0]?.model ?? "?"}, ${Math.round(totalmem() / 2 ** 30)} GiB`);
  const results: Record<string, unknown> = { seed: SEED, node: process.version, parts };
  const simulated: [string, number, Parameters<typeof explore>[0]][] = [
    ["memory", parts.memory, { ledger: "memory", seed: SEED }],
    ["sqlite", parts.sqlite, { ledger: "sqlite", seed: SEED + 1_000_000 }],
    ["postgres", parts.postgres, { ledger: { postgres: PG }, seed: SEED + 2_000_000 }],
    ["sqlite-driver", parts.sqliteDriver, { ledger: { sqlite: true, driverFaults: true }, seed: SEED + 4_000_000 }],
    ["postgres-proxy", parts.postgresProxy, { ledger: { postgres: PG, proxy: true }, seed: SEED + 3_000_000 }],
  ];
  for (const [name, schedules, options] of simulated) {
    if (schedules <= 0) continue;
    const r = await explore({ ...options, schedules, onSchedule: progress(name, 5_000) });
    line(`simulated, ${name}`, r, `${r.schedules} schedules, ${r.calls} calls, ${r.faults.crashes} crashes, ${r.faults.freezes} stalls, ` +
      `${r.faults.ledgerFailures} ledger failures, ${r.faults.lostReplies} lost commit replies` +
      (r.proxy ? `, proxy ${JSON.stringify(r.proxy)}` : "") + (r.driver ? `, driver ${JSON.stringify(r.driver)}` : "") + `, process faults ${r.processFaults.length}`);
    results[name] = { ...r, traces: undefined };
  }
  const killed: [string, number, Parameters<typeof exploreKills>[0]][] = [
    ["sqlite", parts.killsSqlite, { ledger: "sqlite", seed: SEED }],
    ["postgres", parts.killsPostgres, { ledger: { postgres: PG }, seed: SEED + 1_000_000 }],
  ];
  for (const [name, runs, options] of killed) {
    if (runs <= 0) continue;
    const r = await exploreKills({ ...options, runs, parallel: LANES, onRun: progress(`kills ${name}`, 500) });
    line(`SIGKILL, ${name}`, r, `${r.runs} child processes, ${r.kills} killed by SIGKILL, ${r.calls} calls, ${r.horizonBroken.length} past their declared horizon`);
    for (const v of r.horizonBroken.slice(0, 10)) console.log(`  past the horizon, seed ${v.seed} (${v.invariant}): ${v.message}`);
    results[`kills_${name}`] = r;
  }
  mkdirSync("bench/results", { recursive: true });
  const out = process.argv.indexOf("--out");
  const file = out >= 0 && process.argv[out + 1] ? process.argv[out + 1]! : `bench/results/explore-${new Date().toISOString().slice(0, 10)}.json`;
  writeFileSync(file, `${JSON.stringify(results, null, 2)}\n`);
  console.log(`raw results: ${file}`);
}

await main();
