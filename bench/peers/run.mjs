/**
 * effectgate next to its durable peers, on one machine, in one run (`npm run bench:peers`).
 *
 * Scenario A: the cost of one durable step whose effect is appending one line to a file, at
 * concurrency 1 (p50 per step) and 16 (steps per second), with the bare disk floor measured
 * alongside (two appends + fdatasync: what two durable points cost at the least). Every peer is
 * configured as its documentation recommends for durability, fsync on:
 *
 *   naive             the effect alone, no record (what a plain agent loop does)
 *   json-file         the tutorial ledger: {key: result} read whole, rewritten whole + fsync per call
 *   powertools        @aws-lambda-powertools/idempotency makeIdempotent, with a file persistence
 *                     layer (one file per key, fsync on the in-progress record and on the result)
 *   restate           @restatedev/restate-server (the binary in the npm package, RocksDB WAL fsync on,
 *                     its default) + @restatedev/restate-sdk, one `ctx.run` per step
 *   dbos              @dbos-inc/dbos-sdk `DBOS.runStep` per step, on embedded PostgreSQL
 *   effectgate-sqlite gate.runToolUses, SQLite ledger, default durability (fsync)
 *   effectgate-pg     gate.runToolUses, PostgreSQL ledger on the same embedded server as DBOS
 *   bare-pg           the PostgreSQL floor: a prepared INSERT … ON CONFLICT DO NOTHING before the
 *                     effect and an UPDATE after, each in its own autocommit, pool of 16, on the
 *                     same server and the same table shape as the ledger (two durable writes)
 *
 * After the table it prints issue 25's targets as ratios from this run, each with whether it is met.
 *
 * The peers run interleaved, block by block, rotating which goes first, so a burst of load from
 * another process lands on all of them alike. Workflow engines (Restate, DBOS) time each step
 * inside the workflow; one block is one workflow per lane. Every server started here listens on
 * 127.0.0.1 and is stopped by its pid. Writes bench/results/peers.json and prints a table.
 *
 * Scenarios B–D (scenarios.mjs, in child processes): SIGKILL after the effect and before its
 * record, the same key with another payload, two processes with one key at once. Their rows go
 * to the same file under `scenarios`; a run of only some scenarios keeps the others' results.
 *
 *   npm run bench:peers -- [--scenarios=A,B,C,D] [--steps=N] [--blocks=N] [--only=a,b] [--out=FILE]
 *                          [--rounds-b=20] [--rounds-c=3] [--rounds-d=10]
 *
 * Needs `npm run build` first (it loads effectgate from dist/), which the npm script does.
 */
import { appendFileSync, chmodSync, closeSync, fdatasyncSync, fsyncSync, mkdirSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync, writeSync } from "node:fs";
import os from "node:os";
import { dirname, join } from "node:path";
import { runFaultScenarios } from "./scenarios.mjs";
import {
  effectgateVersion, filePersistenceLayer, loadPg, freePort, listenRestateEndpoint, loadEffectgate, progress, restateSdk, root, startEmbeddedPostgres,
  startRestateServer, versionOf,
} from "./setup.mjs";

const argv = process.argv.slice(2);
const arg = (name) => argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
const STEPS = Number(arg("steps") ?? 1000);
const BLOCKS = Number(arg("blocks") ?? 10);
const LANES = 16;
const OUT = arg("out") ?? join(root, "bench/results/peers.json");
const ONLY = arg("only")?.split(",");
const SCENARIOS = (arg("scenarios") ?? "A,B,C,D").split(",").map((s) => s.trim().toUpperCase());

const work = mkdtempSync(join(os.tmpdir(), "effectgate-bench-peers-"));
chmodSync(work, 0o755);
const stops = [];

/** The effect of every step: one line appended to the peer's own file (no fsync: the downstream's business). */
function effectFile(name) {
  const file = join(work, `${name}.effects`);
  return (line) => appendFileSync(file, `${line}\n`);
}

// ---------------------------------------------------------------------------------------------
// The peers. Each has `block(lanes, perLane, record)`: run lanes × perLane steps, lanes at once,
// calling record(ns) with each step's duration.

/** Lanes of plain async steps. */
const lanes = (step) => async (count, perLane, record, tag) => {
  await Promise.all(Array.from({ length: count }, async (_, lane) => {
    for (let i = 0; i < perLane; i++) {
      const t0 = process.hrtime.bigint();
      await step(`${tag}-${lane}-${i}`);
      record(Number(process.hrtime.bigint() - t0));
    }
  }));
};

function barePeer() {
  const file = join(work, "bare.dat");
  const fd = openSync(file, "a");
  const line = Buffer.alloc(128, 0x61);
  stops.push(() => closeSync(fd));
  return {
    name: "2 × (append 128 B + fdatasync), bare", version: `node ${process.version}`,
    block: lanes(async () => {
      writeSync(fd, line);
      fdatasyncSync(fd);
      writeSync(fd, line);
      fdatasyncSync(fd);
    }),
  };
}

/** Two durable writes on PostgreSQL and nothing else, on the ledger's own table shape (a copy of it). */
async function barePgPeer(pg) {
  const { migratePostgres } = await loadEffectgate();
  const schema = "eg_bench_bare";
  await migratePostgres(pg.url, schema);
  const { Pool } = await loadPg();
  const pool = new Pool({ connectionString: pg.url, max: 16 });
  stops.unshift(() => pool.end());
  await pool.query(`CREATE TABLE "${schema}".bare_calls (LIKE "${schema}".calls INCLUDING ALL)`);
  const effect = effectFile("bare-pg");
  const insert = {
    name: "bare_claim",
    text: `INSERT INTO "${schema}".bare_calls (tenant, key, tool, effect, task, tool_use_id, fingerprint, intent, input, input_redacted, state, owner, lease_expires_at, attempts, version, created_at, updated_at, fence, started_at, claim_token)
           VALUES ('bench', $1, 'append_line', 'write', 'peers', $1, 'f', 'f', '{"n":1}', false, 'in_progress', 'w', 0, 1, 1, 0, 0, 1, 0, $1) ON CONFLICT DO NOTHING`,
  };
  const update = { name: "bare_record", text: `UPDATE "${schema}".bare_calls SET state = 'completed', result = '{"ok":true}', owner = NULL, version = 2, updated_at = 1 WHERE tenant = 'bench' AND key = $1 AND version = 1` };
  return {
    name: "bare PostgreSQL pair (prepared INSERT … ON CONFLICT DO NOTHING, UPDATE; autocommit; pool 16)", version: `pg ${versionOf("pg")}`,
    block: lanes(async (key) => {
      await pool.query({ ...insert, values: [key] });
      effect(key);
      await pool.query({ ...update, values: [key] });
    }),
  };
}

function naivePeer() {
  const effect = effectFile("naive");
  return { name: "naive call (no record)", version: "-", block: lanes(async (key) => effect(key)) };
}

function jsonFilePeer() {
  const file = join(work, "ledger.json");
  writeFileSync(file, "{}");
  const effect = effectFile("json");
  return {
    name: "JSON-file ledger (read whole, rewrite + fsync)", version: "-",
    block: lanes(async (key) => {
      const ledger = JSON.parse(readFileSync(file, "utf8"));
      if (ledger[key] !== undefined) return;
      effect(key);
      ledger[key] = { done: true };
      const fd = openSync(file, "w");
      writeSync(fd, JSON.stringify(ledger));
      fsyncSync(fd);
      closeSync(fd);
    }),
  };
}

async function powertoolsPeer() {
  const { makeIdempotent, IdempotencyConfig } = await import("@aws-lambda-powertools/idempotency");
  const dir = join(work, "powertools");
  mkdirSync(dir);
  const effect = effectFile("powertools");
  const config = new IdempotencyConfig({ eventKeyJmesPath: "key" });
  // Outside Lambda there is no invocation deadline: the in-progress record gets a minute.
  config.registerLambdaContext({ getRemainingTimeInMillis: () => 60_000 });
  const handler = makeIdempotent(async (event) => {
    effect(event.key);
    return { ok: true };
  }, { persistenceStore: await filePersistenceLayer(dir), config });
  return {
    name: "AWS Powertools idempotency (file store, 2 fsyncs)", version: versionOf("@aws-lambda-powertools/idempotency"),
    block: lanes((key) => handler({ key })),
  };
}

async function dbosPeer(pg) {
  const { DBOS } = await import("@dbos-inc/dbos-sdk");
  const effect = effectFile("dbos");
  let record = () => {};
  const lane = DBOS.registerWorkflow(async (tag, perLane) => {
    for (let i = 0; i < perLane; i++) {
      const t0 = process.hrtime.bigint();
      await DBOS.runStep(async () => effect(`${tag}-${i}`), { name: "append" });
      record(Number(process.hrtime.bigint() - t0));
    }
  }, { name: "lane" });
  DBOS.setConfig({ name: "effectgate-bench", systemDatabaseUrl: pg.database("dbos_bench"), logLevel: "error" });
  await DBOS.launch();
  stops.unshift(() => DBOS.shutdown());
  return {
    name: "DBOS runStep (embedded PostgreSQL)", version: versionOf("@dbos-inc/dbos-sdk"),
    async block(count, perLane, rec, tag) {
      record = rec;
      await Promise.all(Array.from({ length: count }, (_, l) => lane(`${tag}-${l}`, perLane)));
    },
  };
}

async function restatePeer() {
  const restate = await restateSdk();
  const effect = effectFile("restate");
  let record = () => {};
  const service = restate.service({
    name: "bench",
    handlers: {
      lane: async (ctx, { tag, perLane }) => {
        for (let i = 0; i < perLane; i++) {
          const t0 = process.hrtime.bigint();
          await ctx.run("append", () => effect(`${tag}-${i}`));
          record(Number(process.hrtime.bigint() - t0));
        }
        return perLane;
      },
    },
  });
  // The server first, so its stop (which closes its connections to the endpoint) runs before the endpoint's.
  const server = await startRestateServer(work, stops);
  const endpointPort = await freePort();
  const endpoint = await listenRestateEndpoint(restate, [service], endpointPort);
  stops.push(() => new Promise((ok) => endpoint.close(ok)));
  await server.register(`http://127.0.0.1:${endpointPort}`);
  const invoke = async (tag, perLane) => {
    for (let tries = 0; ; tries++) {
      const res = await fetch(`${server.ingress}/bench/lane`, {
        method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ tag, perLane }), signal: AbortSignal.timeout(120_000),
      });
      if (res.ok) return res.json();
      // Right after registration the ingress may not know the service yet.
      if (tries > 50) throw new Error(`restate invocation failed: ${res.status} ${await res.text()}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  };
  await invoke("probe", 1);
  return {
    name: "Restate ctx.run", version: `server ${versionOf("@restatedev/restate-server")}, sdk ${versionOf("@restatedev/restate-sdk")}`,
    async block(count, perLane, rec, tag) {
      record = rec;
      await Promise.all(Array.from({ length: count }, (_, l) => invoke(`${tag}-${l}`, perLane)));
    },
  };
}

async function effectgatePeers(pg) {
  const { createGate, defineTool, sqliteLedger, migratePostgres, postgresLedger, z } = await loadEffectgate();
  const make = (name, ledger) => {
    const effect = effectFile(name);
    const tool = defineTool({ name: "append_line", effect: "write", input: z.object({ n: z.number() }), execute: (_input, ctx) => (effect(ctx.idempotencyKey), { ok: true }) });
    const gate = createGate({ tools: [tool], ledger, onAlert: (a) => { throw new Error(a.message); } });
    stops.unshift(async () => {
      await gate.close();
      await ledger.close();
    });
    return lanes(async (key) => {
      const [result] = await gate.runToolUses([{ type: "tool_use", id: key, name: "append_line", input: { n: 1 } }], { tenant: "bench", task: "peers" });
      if (result.is_error) throw new Error(result.content);
    });
  };
  const version = effectgateVersion();
  const peers = [{ name: "effectgate, SQLite (fsync)", version, block: make("eg-sqlite", sqliteLedger(join(work, "ledger.db"))) }];
  if (pg) {
    const schema = "eg_bench_peers";
    await migratePostgres(pg.url, schema);
    peers.push({ name: "effectgate, PostgreSQL (same server as DBOS)", version, block: make("eg-pg", postgresLedger({ connectionString: pg.url, poolSize: 16 }, { schema })) });
  }
  return peers;
}

// ---------------------------------------------------------------------------------------------

const percentile = (sorted, p) => sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))];

/** Scenario A: every peer in this process, interleaved block by block; returns its JSON part and its printed text. */
async function scenarioA(pg, want) {
  const notes = [];
  const peers = [];
  const add = async (id, make) => {
    if (!want(id)) return;
    try {
      progress(`starting ${id}`);
      const made = await make();
      for (const p of [made].flat()) peers.push({ id: p.id ?? id, ...p });
    } catch (err) {
      notes.push(`${id}: could not run here: ${err instanceof Error ? err.message : String(err)}`);
      progress(`${id} cannot run: ${err instanceof Error ? err.stack : String(err)}`);
    }
  };
  await add("bare", async () => barePeer());
  await add("naive", async () => naivePeer());
  await add("json-file", async () => jsonFilePeer());
  await add("powertools", powertoolsPeer);
  await add("restate", restatePeer);
  if (pg) await add("dbos", () => dbosPeer(pg));
  await add("effectgate", () => effectgatePeers(pg));
  if (pg) await add("bare-pg", () => barePgPeer(pg));

  const results = new Map(peers.map((p) => [p.name, { c1: [], c16Seconds: 0, c16Steps: 0 }]));
  const perBlock = Math.ceil(STEPS / BLOCKS);
  const warm = Math.min(50, perBlock);
  for (const p of peers) await p.block(1, warm, () => {}, `warm1-${p.id}`);
  for (const p of peers) await p.block(LANES, Math.ceil(warm / 4), () => {}, `warm16-${p.id}`);
  for (let b = 0; b < BLOCKS; b++) {
    progress(`block ${b + 1}/${BLOCKS}`);
    const order = peers.map((_, i) => peers[(i + b) % peers.length]);
    for (const p of order) {
      const r = results.get(p.name);
      await p.block(1, perBlock, (ns) => r.c1.push(ns), `c1-${b}-${p.id}`);
      const perLane = Math.ceil(perBlock / LANES) * 2;
      const t0 = process.hrtime.bigint();
      await p.block(LANES, perLane, () => {}, `c16-${b}-${p.id}`);
      r.c16Seconds += Number(process.hrtime.bigint() - t0) / 1e9;
      r.c16Steps += LANES * perLane;
    }
  }
  const rows = peers.map((p) => {
    const r = results.get(p.name);
    const sorted = r.c1.sort((a, b) => a - b);
    return { peer: p.name, version: p.version, c1P50Us: percentile(sorted, 50) / 1000, c1P99Us: percentile(sorted, 99) / 1000, c1Steps: sorted.length, c16StepsPerSecond: r.c16Steps / r.c16Seconds };
  });
  const env = { ...machine(pg), steps: STEPS, blocks: BLOCKS, lanes: LANES, dir: work };
  const floor = rows.find((r) => r.peer.startsWith("2 ×"));
  const fmt = (n) => (n >= 100 ? n.toFixed(0) : n.toFixed(1));
  const lines = [
    `| per durable step | version | c=1 p50 µs | c=1 p99 µs | ÷ bare floor | c=16 steps/s |`,
    `|---|---|---:|---:|---:|---:|`,
    ...rows.map((r) => `| ${r.peer} | ${r.version} | ${fmt(r.c1P50Us)} | ${fmt(r.c1P99Us)} | ${floor ? `${(r.c1P50Us / floor.c1P50Us).toFixed(2)}×` : ""} | ${Math.round(r.c16StepsPerSecond).toLocaleString("en-US")} |`),
  ];
  const eg = rows.find((r) => r.peer.startsWith("effectgate, SQLite"));
  const egPg = rows.find((r) => r.peer.startsWith("effectgate, PostgreSQL"));
  const ratio = [];
  for (const r of rows.filter((x) => x !== eg && x !== egPg && !x.peer.startsWith("2 ×"))) {
    if (eg) ratio.push(`effectgate SQLite vs ${r.peer}: c=1 ${(r.c1P50Us / eg.c1P50Us).toFixed(2)}× faster per step, c=16 ${(eg.c16StepsPerSecond / r.c16StepsPerSecond).toFixed(2)}× the steps/s`);
    if (egPg && r.peer.startsWith("DBOS")) ratio.push(`effectgate PostgreSQL vs ${r.peer}: c=1 ${(r.c1P50Us / egPg.c1P50Us).toFixed(2)}× faster per step, c=16 ${(egPg.c16StepsPerSecond / r.c16StepsPerSecond).toFixed(2)}× the steps/s`);
  }
  const restate = rows.find((r) => r.peer.startsWith("Restate"));
  const dbos = rows.find((r) => r.peer.startsWith("DBOS"));
  const barePg = rows.find((r) => r.peer.startsWith("bare PostgreSQL"));
  // Issue 25's targets, each as a ratio of this run: [what, value, target, met when value is at most (≤) or at least (≥)].
  const targets = [
    eg && floor && ["SQLite c=1 p50 ÷ two bare fdatasyncs", eg.c1P50Us / floor.c1P50Us, 1.25, "≤"],
    eg && restate && ["SQLite c=16 steps/s ÷ Restate's", eg.c16StepsPerSecond / restate.c16StepsPerSecond, 5, "≥"],
    egPg && barePg && ["PostgreSQL c=1 p50 ÷ the bare pair", egPg.c1P50Us / barePg.c1P50Us, 1.2, "≤"],
    egPg && barePg && ["PostgreSQL c=16 steps/s ÷ the bare pairs'", egPg.c16StepsPerSecond / barePg.c16StepsPerSecond, 1.5, "≥"],
    egPg && dbos && ["PostgreSQL c=16 steps/s ÷ DBOS's", egPg.c16StepsPerSecond / dbos.c16StepsPerSecond, 3, "≥"],
  ].filter(Boolean).map(([what, value, target, how]) => ({ what, value, target, how, met: how === "≤" ? value <= target : value >= target }));
  ratio.push("", "targets (issue 25):", ...targets.map((t) => `  ${t.what}: ${t.value.toFixed(2)}× (target ${t.how} ${t.target}×): ${t.met ? "met" : "NOT met"}`));
  const text = `${Object.entries(env).map(([k, v]) => `${k.padEnd(9)} ${v}`).join("\n")}\n\n${lines.join("\n")}\n` +
    `\n${ratio.join("\n")}\n${notes.length ? `\nnotes:\n${notes.join("\n")}\n` : ""}`;
  return { json: { env, rows, targets, notes }, text };
}

function machine(pg) {
  const cpus = os.cpus();
  return {
    date: new Date().toISOString(), node: process.version, machine: `${cpus[0]?.model.trim() ?? "?"} × ${cpus.length}, ${(os.totalmem() / 2 ** 30).toFixed(1)} GiB, ${os.type()} ${os.release()}`,
    load: os.loadavg().map((l) => l.toFixed(2)).join(" / "), postgres: pg?.settings ?? "not started",
  };
}

async function main() {
  const want = (id) => ONLY === undefined || ONLY.includes(id);
  const faults = SCENARIOS.filter((s) => ["B", "C", "D"].includes(s));
  const unknown = SCENARIOS.filter((s) => !["A", "B", "C", "D"].includes(s));
  if (unknown.length) throw new Error(`--scenarios takes A, B, C, D; got ${unknown.join(", ")}`);
  // A run of only some scenarios keeps the others' results already in the file.
  let out = {};
  try {
    out = JSON.parse(readFileSync(OUT, "utf8"));
  } catch {
    // no earlier results
  }
  const save = () => {
    mkdirSync(dirname(OUT), { recursive: true });
    writeFileSync(OUT, `${JSON.stringify(out, null, 2)}\n`);
  };
  let pg;
  const pgNotes = [];
  if (want("dbos") || want("effectgate")) {
    try {
      progress("starting embedded PostgreSQL");
      pg = await startEmbeddedPostgres(work, stops, ["dbos_bench", "dbos_faults_b", "dbos_faults_c", "dbos_faults_d"]);
    } catch (err) {
      pgNotes.push(`embedded PostgreSQL could not start: ${err instanceof Error ? err.message : String(err)}`);
    }
  }
  if (SCENARIOS.includes("A")) {
    const a = await scenarioA(pg, want);
    a.json.notes.unshift(...pgNotes);
    out = { ...out, ...a.json };
    save();
    process.stdout.write(a.text);
  }
  if (faults.length) {
    const rounds = Object.fromEntries(["B", "C", "D"].filter((id) => arg(`rounds-${id.toLowerCase()}`)).map((id) => [id, Number(arg(`rounds-${id.toLowerCase()}`))]));
    const f = await runFaultScenarios({ ids: faults, work, pg, want, stops, environment: () => machine(pg), rounds });
    for (const id of faults) f.json[id].notes.unshift(...pgNotes);
    out = { ...out, scenarios: { ...out.scenarios, ...f.json } };
    save();
    process.stdout.write(`${SCENARIOS.includes("A") ? "" : `${Object.entries(machine(pg)).map(([k, v]) => `${k.padEnd(9)} ${v}`).join("\n")}\n`}\n${f.text}`);
  }
  process.stdout.write(`results written to ${OUT}\n`);
}

try {
  await main();
} finally {
  for (const stop of stops) {
    try {
      await stop();
    } catch (err) {
      progress(`stopping: ${err instanceof Error ? err.message : String(err)}`);
    }
  }
  rmSync(work, { recursive: true, force: true });
}
