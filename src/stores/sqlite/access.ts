/**
 * The one way every SQLite store reaches the ledger file: opened on first use (the driver,
 * better-sqlite3, is imported only then, so a program that never opens a SQLite ledger never
 * loads a native addon), checked, migrated, and every driver error mapped to the contract's
 * codes: damage is EG_LEDGER_CORRUPT naming the file, anything else EG_LEDGER_UNAVAILABLE.
 * Damage is never read as absence, and a file that is not an effectgate ledger is refused untouched.
 *
 * What an existing file must be before anything is written to it (looked at through a
 * read-only connection, so looking cannot change it):
 * - an effectgate ledger (its `calls` table, and a schema version this code knows), or an empty
 *   SQLite database (a header and no tables: nothing in it to lose), which becomes one;
 * - never a zero-byte file: a ledger truncated to nothing (a full disk, an interrupted copy,
 *   `> ledger.db`) looks exactly like one, and adopting it would forget which calls already ran.
 *   A new ledger is therefore made under a temporary name and linked into place complete, so
 *   no effectgate process ever leaves a zero-byte file at the ledger's path, even for a moment;
 * - never another program's database (tables of its own): refused, naming its tables;
 * - with `verify`, whole: `PRAGMA quick_check` reads every page first (docs/BENCHMARKS.md).
 */
import { randomBytes } from "node:crypto";
import { closeSync, copyFileSync, constants as fsConstants, existsSync, fsyncSync, linkSync, mkdirSync, openSync, rmSync, statSync } from "node:fs";
import { basename, dirname, join, resolve } from "node:path";
import type Database from "better-sqlite3";
import { EffectgateError, messageOf } from "../../core/errors.js";
import { backoffMs, sleep } from "../../core/policies.js";
import { RowDamage } from "../row-damage.js";
import { migrate, schemaVersion, SCHEMA_VERSION } from "./migrations.js";
import { groupCommit } from "./group-commit.js";

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
  /**
   * Read the whole file with `PRAGMA quick_check` before using it, and refuse a damaged one
   * with EG_LEDGER_CORRUPT before anything is read from it or written to it (default false).
   * It reads the whole file (7 ms at 10,000 calls, 74 ms at 100,000 on a warm cache: see
   * docs/BENCHMARKS.md), so the operator commands use it and an agent's gate does not.
   */
  readonly verify?: boolean;
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
  /**
   * Runs `fn` in the next group commit (group-commit.ts): every write asked for in this turn of
   * the event loop shares one transaction and one fsync, each in a savepoint of its own, so one
   * that throws fails alone. It resolves once the commit is durable; a lone write waits for no batch.
   */
  batched<T>(what: string, fn: (db: Db) => T): Promise<T>;
  /** EG_LEDGER_CORRUPT naming the file and what was damaged. */
  damaged(err: unknown, what: string): EffectgateError;
  /** What opening the file found and did (undefined until it is open): made it, or migrated it from one schema version to another. */
  opened(): OpenReport | undefined;
  close(): Promise<void>;
}

export interface OpenReport {
  /** This process made the file (it did not exist). */
  readonly created: boolean;
  /** The schema version the file had (0 when it was made now), and the one it has now. */
  readonly from: number;
  readonly to: number;
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

/** The ledger's own tables: an effectgate ledger has a `calls` table with these columns (migration 1). */
function isLedger(db: Db, version: number, tables: readonly string[]): boolean {
  if (version < 1 || !tables.includes("calls") || !tables.includes("checkpoints")) return false;
  const columns = new Set(db.prepare("SELECT name FROM pragma_table_info('calls')").pluck().all() as string[]);
  return ["tenant", "key", "tool", "fingerprint", "state", "version"].every((c) => columns.has(c));
}

function describeTables(tables: readonly string[]): string {
  if (tables.length === 0) return "no tables";
  const shown = tables.slice(0, 8).join(", ");
  return `table${tables.length === 1 ? "" : "s"} ${shown}${tables.length > 8 ? ` and ${tables.length - 8} more` : ""}`;
}

/** Makes a new directory entry durable (POSIX); where a directory cannot be opened (Windows) there is nothing to do. */
function syncDirectory(dir: string): void {
  let fd: number | undefined;
  try {
    fd = openSync(dir, "r");
    fsyncSync(fd);
  } catch {
    // not supported here
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}

export function openSqlite(path: string, options: SqliteLedgerOptions = {}): SqliteAccess {
  const file = resolve(path);
  const location = `sqlite:${file}`;
  const busyTimeoutMs = options.busyTimeoutMs ?? 5000;
  let db: Db | undefined;
  let opening: Promise<Db> | undefined;
  let report: OpenReport | undefined;

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

  const notALedger = (what: string) =>
    new EffectgateError("EG_LEDGER_UNAVAILABLE", `${file} is not an effectgate ledger: ${what} It was left exactly as it is; nothing was written to it.`);

  /**
   * Looks before touching, through a read-only connection: a missing file (when it must exist),
   * a zero-byte file, another program's database, a newer schema or (with `verify`) a damaged
   * file is refused as it is. An empty SQLite database passes unless the file must already be a ledger.
   */
  function inspect(Driver: typeof Database, mustExist: boolean): number {
    if (!existsSync(file)) {
      throw new EffectgateError("EG_LEDGER_UNAVAILABLE", `there is no ledger at ${file} (nothing was created). Check the path, or run the agent once to create it.`);
    }
    if (statSync(file).size === 0) {
      throw notALedger(
        "it is an empty file (0 bytes). A ledger cut to nothing (a full disk, an interrupted copy) looks the same, so effectgate does not adopt one: " +
          "if the file is a mistake, delete it and effectgate creates the ledger itself (`effectgate migrate --db PATH`, or the agent's first call); " +
          "if it was a ledger, restore it from a backup, since the calls it recorded are not in it any more.",
      );
    }
    const peek = new Driver(file, { readonly: true, fileMustExist: true, timeout: busyTimeoutMs });
    try {
      const version = schemaVersion(peek);
      const tables = (peek.prepare("SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY name").pluck().all() as string[]);
      // A newer effectgate may have other tables: judged by its version alone, and refused by name.
      if (version > SCHEMA_VERSION) {
        throw tables.length === 0 || tables.includes("calls")
          ? tooNew(version)
          : notALedger(`it has user_version ${version}, newer than any effectgate ledger this version knows (${SCHEMA_VERSION}), and tables (${describeTables(tables)}) that are not a ledger's: another program's database, or a ledger of a newer effectgate. Check the path, or upgrade effectgate.`);
      }
      if (!isLedger(peek, version, tables)) {
        if (tables.length > 0 || version !== 0) throw notALedger(`it is another program's SQLite database (${describeTables(tables)}${version === 0 ? "" : `, user_version ${version}`}). Check the path: effectgate keeps its ledger in a file of its own.`);
        if (mustExist) throw notALedger("it is an empty SQLite database (no tables), not a ledger. Create the ledger with `effectgate migrate --db PATH`, or let the agent's first call do it.");
      }
      if (options.verify === true) {
        const problems = peek.pragma("quick_check(5)", { simple: false }) as { quick_check: string }[];
        const found = problems.flatMap((p) => p.quick_check.split("\n")).filter((p) => p !== "ok" && !p.startsWith("*** in database"));
        if (found.length > 0) throw damaged(new Error(found.join("; ")), "PRAGMA quick_check found");
      }
      return version;
    } finally {
      peek.close();
    }
  }

  /**
   * Makes a new ledger: built and migrated under a temporary name beside the file, then linked
   * into place whole (a link fails if the name exists: a process that loses the race uses the
   * winner's file). The ledger's path therefore never holds a zero-byte or half-made file.
   * True when this process's file is the one in place.
   */
  function create(Driver: typeof Database): boolean {
    const dir = dirname(file);
    mkdirSync(dir, { recursive: true });
    const temp = join(dir, `.${basename(file)}.${process.pid}-${randomBytes(4).toString("hex")}.creating`);
    try {
      const conn = new Driver(temp, { timeout: busyTimeoutMs });
      try {
        conn.pragma("journal_mode = WAL");
        conn.pragma(`synchronous = ${options.durability === "process" ? "NORMAL" : "FULL"}`);
        migrate(conn, tooNew);
      } finally {
        conn.close(); // the last connection's close checkpoints the WAL into the file and removes it
      }
      try {
        linkSync(temp, file);
      } catch (err) {
        const code = (err as NodeJS.ErrnoException).code;
        if (code === "EEXIST") return false; // another process created it first
        if (code !== "EPERM" && code !== "ENOTSUP" && code !== "EOPNOTSUPP" && code !== "ENOSYS") throw err;
        // A filesystem without hard links: an exclusive copy still never replaces a file, though
        // a process racing this one may see it half-copied (and then refuses it as damaged, loudly).
        try {
          copyFileSync(temp, file, fsConstants.COPYFILE_EXCL);
        } catch (copyErr) {
          if ((copyErr as NodeJS.ErrnoException).code !== "EEXIST") throw copyErr;
          return false;
        }
      }
      if (options.durability !== "process") syncDirectory(dir);
      return true;
    } finally {
      for (const leftover of [temp, `${temp}-wal`, `${temp}-shm`]) rmSync(leftover, { force: true });
    }
  }

  /** One try at opening the file: checked, switched to WAL, migrated. Throws SQLITE_BUSY when another process is in the way. */
  function openOnce(Driver: typeof Database): Db {
    const mustExist = options.create === false || options.readOnly === true;
    const created = !mustExist && !existsSync(file) && create(Driver);
    const found = inspect(Driver, mustExist);
    // `timeout` is the connection's busy_timeout: how long a step that waits through SQLite's busy handler waits.
    const conn = new Driver(file, { readonly: options.readOnly === true, fileMustExist: true, timeout: busyTimeoutMs });
    try {
      if (options.readOnly) {
        const version = schemaVersion(conn);
        if (version > SCHEMA_VERSION) throw tooNew(version);
        if (version < SCHEMA_VERSION) {
          throw new EffectgateError(
            "EG_LEDGER_UNAVAILABLE",
            `the ledger ${file} has schema version ${version}, older than this effectgate reads (${SCHEMA_VERSION}); nothing was changed. ` +
              `Migrate it with \`effectgate migrate --db ${file}\` (an agent's gate also migrates it when it opens it).`,
          );
        }
      } else {
        conn.pragma("journal_mode = WAL");
        conn.pragma(`synchronous = ${options.durability === "process" ? "NORMAL" : "FULL"}`);
        // After a checkpoint the WAL is truncated back to this size instead of staying at its peak.
        conn.pragma("journal_size_limit = 8388608");
        migrate(conn, tooNew);
      }
      report = { created, from: created ? 0 : found, to: schemaVersion(conn) };
      return conn;
    } catch (err) {
      conn.close();
      throw err;
    }
  }

  /**
   * Opens the file, trying again while another process holds a lock, for up to busyTimeoutMs.
   * The busy_timeout alone is not enough: where waiting could deadlock, SQLite returns
   * SQLITE_BUSY at once without calling the busy handler, and opening hits that case. On a file
   * still in rollback-journal mode (an empty SQLite database; new ledgers are made in WAL mode
   * under a name of their own, see create) `PRAGMA journal_mode = WAL` reads page 1 under a
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

  const group = groupCommit({ connection: () => db ?? connection(), mapped });

  return {
    clock: options.clock ?? Date.now,
    file,
    location,
    async run(what, fn) {
      // Behind writes still waiting for their group commit: read after them, in the order asked.
      if (group.pending()) return group.add(what, fn);
      const conn = db ?? (await connection());
      return guard(what, () => fn(conn));
    },
    async write(what, fn) {
      // Queued behind pending writes: a savepoint inside their batch's transaction (or, alone, its own IMMEDIATE one).
      if (group.pending()) return group.add(what, (conn) => (conn.inTransaction ? conn.transaction(() => fn(conn))() : conn.transaction(() => fn(conn)).immediate()));
      const conn = db ?? (await connection());
      return guard(what, () => conn.transaction(() => fn(conn)).immediate());
    },
    batched: (what, fn) => group.add(what, fn),
    damaged,
    opened: () => report,
    async close() {
      // Writes asked for before close are committed first (or fail, each with its own error).
      await group.flushNow();
      // An open still under way (it may be waiting for another process's lock) is closed once it ends.
      if (opening) await opening.catch(() => undefined);
      db?.close();
      db = undefined;
    },
  };
}
