/** Helpers for the server middleware tests: real node:http servers on 127.0.0.1, deferred promises, ledgers per store. */
import { postgresLedger } from "../../src/stores/postgres/index.js";
import { usePostgres } from "../support/pg.js";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { memoryLedger } from "../../src/stores/memory/index.js";
import { sqliteLedger } from "../../src/stores/sqlite/index.js";
import type { Stores } from "../../src/contracts/stores.js";
import { tempDir } from "../support/tmp.js";

export interface Deferred<T = void> {
  readonly promise: Promise<T>;
  resolve(value: T): void;
}

export function deferred<T = void>(): Deferred<T> {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}

export interface Running {
  readonly url: string;
  close(): Promise<void>;
}

/** Serves `listener` on 127.0.0.1, on a port the OS picks. */
export async function serve(listener: (req: IncomingMessage, res: ServerResponse) => void): Promise<Running> {
  const server: Server = createServer(listener);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** A store under test, with a clock the test can move (for key expiry). */
export interface StoreCase {
  readonly name: string;
  /** A fresh ledger; `clock` is the time keys expire by (the middleware's `now`). */
  make(clock: () => number): Stores;
}

/** Call at the top level of a test file: the PostgreSQL case registers the file's database hooks. */
export function storeCases(): StoreCase[] {
  const dir = tempDir("effectgate-server-");
  const pg = usePostgres();
  let n = 0;
  return [
    { name: "memory", make: (clock) => memoryLedger({ clock }) },
    // SQLite and PostgreSQL stamp records with the real clock, so the test clock starts at the real time and only moves forward.
    { name: "sqlite", make: () => sqliteLedger(join(dir, `server-${n++}.db`)) },
    { name: "postgres", make: () => postgresLedger({ connectionString: pg.url }, { schema: pg.freshSchema() }) },
  ];
}

/** A clock starting now that a test moves forward by hand. */
export function manualClock(): { now: () => number; advance(ms: number): void } {
  let offset = 0;
  return { now: () => Date.now() + offset, advance: (ms) => void (offset += ms) };
}

export function json(body: unknown): string {
  return JSON.stringify(body);
}
