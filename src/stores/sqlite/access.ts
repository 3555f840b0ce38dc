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
import { RowDamage } from "../row-damage.js";
import { migrate, schemaVersion, SCHEMA_VERSION } from "./migrations.js";

export type Db = Database.Database;

export interface SqliteLedgerOptions {
  /** "fsync" (default): survives power loss. "process": survives a killed process only, faster. */
  readonly durability?: "fsync" | "process";
  /** How long to wait for another process's write lock (default 5000 ms). */
  readonly busyTimeoutMs?: number;
  /**
   * Create the file when it does not exist (default true). With false, a missing file, an
   * empty one or a SQLite file that is not an effectgate ledger is refused untouched.
   */
  readonly create?: boolean;
  /** Open read-only (operator tools): implies create: false; never migrates or changes the file. */
  readonly readOnly?: boolean;
}

export interface SqliteAccess {
  /** The absolute path of the file. */
  readonly file: string;
  /** "sqlite:/path/ledger.db", for messages. */
  readonly location: string;
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

  /** Map driver errors to the contract's: damage is never read as absence. */
  function guard<T>(what: string, fn: () => T): T {
    try {
      return fn();
    } catch (err) {
      if (err instanceof EffectgateError) throw err;
      if (err instanceof RowDamage) throw damaged(err, what);
      const code = (err as { code?: unknown }).code;
      if (typeof code === "string" && CORRUPT_CODES.has(code)) throw damaged(err, what);
      throw new EffectgateError(
        "EG_LEDGER_UNAVAILABLE",
        `the ledger ${file} is unavailable (could not ${what}: ${messageOf(err)}). Nothing was executed for this call; replay it once the ledger is reachable.`,
        { cause: err },
      );
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
    const peek = new Driver(file, { readonly: true, fileMustExist: true });
    try {
      if (schemaVersion(peek) === 0) {
        throw new EffectgateError("EG_LEDGER_UNAVAILABLE", `${file} is not an effectgate ledger (empty, or another program's SQLite database). It was left as it is; check the path.`);
      }
    } finally {
      peek.close();
    }
  }

  function openWith(Driver: typeof Database): Db {
    return guard("open it", () => {
      const mustExist = options.create === false || options.readOnly === true;
      if (mustExist) refuseNonLedger(Driver);
      else mkdirSync(dirname(file), { recursive: true });
      const conn = new Driver(file, options.readOnly ? { readonly: true, fileMustExist: true } : {});
      try {
        conn.pragma(`busy_timeout = ${options.busyTimeoutMs ?? 5000}`);
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
    });
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
      db?.close();
      db = undefined;
    },
  };
}
