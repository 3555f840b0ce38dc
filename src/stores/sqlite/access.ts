/**
 * The one way every SQLite store reaches the ledger file: opened on first use (the driver,
 * better-sqlite3, is imported only then, so a program that never opens a SQLite ledger never
 * loads a native addon), checked, migrated, and every driver error mapped to the contract's
 * codes: damage is EG_LEDGER_CORRUPT naming the file, anything else EG_LEDGER_UNAVAILABLE.
 * Damage is never read as absence, and a file that is not an effectgate ledger is refused untouched.
 */
import { existsSync, mkdirSync } from "node:fs";
import { dirname, resolve } from "node:path";
import type Database from "better-sqlite3";
import { EffectgateError, messageOf } from "../../core/errors.js";
import { backoffMs, sleep } from "../../core/policies.js";
import { RowDamage } from "../row-damage.js";
import { migrate, schemaVersion, SCHEMA_VERSION } from "./migrations.js";

export type Db = Database.Database;

export interface SqliteLedgerOptions {
  /** "fsync" (default): survives power loss. "process": survives a killed process only, faster. */
  readonly durability?: "fsync" | "process";
  /** How long to wait for another process's lock, when opening the file as on every call (default 5000 ms). */
  readonly busyTimeoutMs?: number;
  /**
   * Create the file when it does not exist (default true). With false, a missing file, an
   * empty one or a SQLite file that is not an effectgate ledger is refused untouched.
   */
  readonly create?: boolean;
  /** Open read-only (operator tools): implies create: false; never migrates or changes the file. */
  readonly readOnly?: boolean;
  /**
   * The clock leases and timestamps are judged by, epoch ms (default Date.now). For deterministic
   * tests only (the fault explorer's simulated time); every process on one file must agree on it.
   */
  readonly clock?: () => number;
}

export interface SqliteAccess {
  /** The absolute path of the file. */
  readonly file: string;
  /** "sqlite:/path/ledger.db", for messages. */
  readonly location: string;
  /** The store's clock, epoch ms (leases, timestamps). */
  readonly clock: () => number;
  /** Runs `fn` on the open connection, errors mapped. */
  run<T>(what: string, fn: (db: Db) => T): Promise<T>;
  /** Runs `fn` in one IMMEDIATE transaction: the write lock is taken first, so what it reads is current. */
  write<T>(what: string, fn: (db: Db) => T): Promise<T>;
  /** EG_LEDGER_CORRUPT naming the file and what was damaged. */
  damaged(err: unknown, what: string): EffectgateError;
  close(): Promise<void>;
}

/** Statements prepared once per connection (a closed and reopened ledger prepares them again). */
export function preparedOnce<S>(prepare: (db: Db) => S): (db: Db) => S {
  const cache = new WeakMap<Db, S>();
  return (db) => {
    let statements = cache.get(db);
    if (statements === undefined) cache.set(db, (statements = prepare(db)));
    return statements;
  };
}

const CORRUPT_CODES = new Set(["SQLITE_CORRUPT", "SQLITE_NOTADB", "SQLITE_CORRUPT_INDEX", "SQLITE_CORRUPT_VTAB", "SQLITE_CORRUPT_SEQUENCE"]);

/** SQLITE_BUSY and its extended codes (_RECOVERY, _SNAPSHOT, _TIMEOUT): another connection holds a lock. */
function isBusy(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === "string" && code.startsWith("SQLITE_BUSY");
}

/** The pause between two tries at opening a locked file: full jitter, so racing processes fall out of step. */
const OPEN_RETRY = { initialDelayMs: 2, maxDelayMs: 50 };

let driver: Promise<typeof Database> | undefined;

/** better-sqlite3, imported on first use; a missing or broken install is said in one sentence naming the fix. */
function loadDriver(location: string): Promise<typeof Database> {
  driver ??= import("better-sqlite3").then(
    (module) => module.default,
    (err: unknown) => {
      driver = undefined;
      throw new EffectgateError(
        "EG_LEDGER_UNAVAILABLE",
        `the SQLite ledger ${location} needs the better-sqlite3 package, which could not be loaded (${messageOf(err)}): ` +
          `install it with \`npm install better-sqlite3@12\`, or give createGate another ledger (postgresLedger from effectgate/postgres, or memoryLedger); nothing was executed.`,
        { cause: err },
      );
    },
  );
  return driver;
}

export function openSqlite(path: string, options: SqliteLedgerOptions = {}): SqliteAccess {
  const file = resolve(path);
  const location = `sqlite:${file}`;
  const busyTimeoutMs = options.busyTimeoutMs ?? 5000;
  let db: Db | undefined;
  let opening: Promise<Db> | undefined;

  const damaged = (err: unknown, what: string): EffectgateError =>
    new EffectgateError(
      "EG_LEDGER_CORRUPT",
      `the ledger file ${file} is damaged (${what}: ${messageOf(err)}). It was left exactly as it is and no call ` +
        `was executed. Restore it from a backup, or inspect it with \`sqlite3 ${file} "PRAGMA integrity_check"\`. ` +
        `Moving it aside starts an empty ledger, which forgets which calls already ran: check the downstream systems first.`,
      { cause: err },
    );

  /** Maps a driver error to the contract's: damage is never read as absence. */
  function mapped(err: unknown, what: string): EffectgateError {
    if (err instanceof EffectgateError) return err;
    if (err instanceof RowDamage) return damaged(err, what);
    const code = (err as { code?: unknown } | null)?.code;
    if (typeof code === "string" && CORRUPT_CODES.has(code)) return damaged(err, what);
    return new EffectgateError(
      "EG_LEDGER_UNAVAILABLE",
      `the ledger ${file} is unavailable (could not ${what}: ${messageOf(err)}). The tool was not started by this request; replay this same call once the ledger is reachable to run it or get its outcome.`,
      { cause: err },
    );
  }

  function guard<T>(what: string, fn: () => T): T {
    try {
      return fn();
    } catch (err) {
      throw mapped(err, what);
    }
  }

  const tooNew = (version: number) =>
    new EffectgateError(
      "EG_LEDGER_TOO_NEW",
      `the ledger ${file} has schema version ${version}, newer than this effectgate knows (${SCHEMA_VERSION}). Upgrade effectgate; the file was not touched.`,
    );

  /** Looks before touching: a missing file, or one that is not an effectgate ledger, is refused as it is. */
  function refuseNonLedger(Driver: typeof Database) {
    if (!existsSync(file)) {
      throw new EffectgateError("EG_LEDGER_UNAVAILABLE", `there is no ledger at ${file} (nothing was created). Check the path, or run the agent once to create it.`);
    }
    const peek = new Driver(file, { readonly: true, fileMustExist: true, timeout: busyTimeoutMs });
    try {
      if (schemaVersion(peek) === 0) {
        throw new EffectgateError("EG_LEDGER_UNAVAILABLE", `${file} is not an effectgate ledger (empty, or another program's SQLite database). It was left as it is; check the path.`);
      }
    } finally {
      peek.close();
    }
  }

  /** One try at opening the file: checked, switched to WAL, migrated. Throws SQLITE_BUSY when another process is in the way. */
  function openOnce(Driver: typeof Database): Db {
    const mustExist = options.create === false || options.readOnly === true;
    if (mustExist) refuseNonLedger(Driver);
    else mkdirSync(dirname(file), { recursive: true });
    // `timeout` is the connection's busy_timeout: how long a step that waits through SQLite's busy handler waits.
    const conn = new Driver(file, options.readOnly ? { readonly: true, fileMustExist: true, timeout: busyTimeoutMs } : { timeout: busyTimeoutMs });
    try {
      if (options.readOnly) {
        const version = schemaVersion(conn);
        if (version > SCHEMA_VERSION) throw tooNew(version);
        if (version < SCHEMA_VERSION) {
          throw new EffectgateError("EG_LEDGER_UNAVAILABLE", `the ledger ${file} has schema version ${version}; open it once with a writable effectgate to migrate it to ${SCHEMA_VERSION}`);
        }
      } else {
        conn.pragma("journal_mode = WAL");
        conn.pragma(`synchronous = ${options.durability === "process" ? "NORMAL" : "FULL"}`);
        // After a checkpoint the WAL is truncated back to this size instead of staying at its peak.
        conn.pragma("journal_size_limit = 8388608");
        migrate(conn, tooNew);
      }
      return conn;
    } catch (err) {
      conn.close();
      throw err;
    }
  }

  /**
   * Opens the file, trying again while another process holds a lock, for up to busyTimeoutMs.
   * The busy_timeout alone is not enough: where waiting could deadlock, SQLite returns
   * SQLITE_BUSY at once without calling the busy handler, and opening hits that case. On a new
   * file (or one still in rollback-journal mode) `PRAGMA journal_mode = WAL` reads page 1 under a
   * SHARED lock and then upgrades to a write lock to mark the header WAL; when several processes
   * do it at once, every one but the first to take the RESERVED lock failed at once with
   * "database is locked". Every step of an open can be repeated (the migration is one
   * transaction that reads the version again), so a busy try is closed and the whole open tried
   * again after a jittered pause.
   */
  async function openWith(Driver: typeof Database): Promise<Db> {
    const deadline = Date.now() + busyTimeoutMs;
    for (let attempt = 0; ; attempt++) {
      try {
        return openOnce(Driver);
      } catch (err) {
        const left = deadline - Date.now();
        if (!isBusy(err) || left <= 0) throw mapped(err, "open it");
        await sleep(Math.min(left, 1 + backoffMs(OPEN_RETRY, attempt, Math.random)));
      }
    }
  }

  function connection(): Promise<Db> {
    if (db) return Promise.resolve(db);
    opening ??= loadDriver(location).then(openWith).then(
      (conn) => {
        db = conn;
        opening = undefined;
        return conn;
      },
      (err: unknown) => {
        // Not cached: a file that could not be opened is tried again on the next call.
        opening = undefined;
        throw err;
      },
    );
    return opening;
  }

  return {
    clock: options.clock ?? Date.now,
    file,
    location,
    async run(what, fn) {
      const conn = db ?? (await connection());
      return guard(what, () => fn(conn));
    },
    async write(what, fn) {
      const conn = db ?? (await connection());
      return guard(what, () => conn.transaction(() => fn(conn)).immediate());
    },
    damaged,
    async close() {
      // An open still under way (it may be waiting for another process's lock) is closed once it ends.
      if (opening) await opening.catch(() => undefined);
      db?.close();
      db = undefined;
    },
  };
}
