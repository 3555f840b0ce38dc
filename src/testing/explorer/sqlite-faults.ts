/**
 * The explorer's SQLite ledger with real driver faults below the store: at seeded points a write
 * meets SQLITE_BUSY (a second connection holds the file's write lock past the store's busy
 * timeout) or SQLITE_IOERR (this process may not grow any file, so the WAL cannot take the batch's
 * frames: EFBIG). Each fault is held for the whole store call, so it lands inside the group-commit
 * batch that call joins, and lifted when the call settles. Both leave nothing written, as SQLite
 * rolls the transaction back; what the gate must do is answer truthfully and lose nothing.
 *
 * Reads and the schedule's own bookkeeping (what is held, the person deciding approvals) meet no
 * fault: they are not under test. The draws come from their own stream of the schedule's seed, so a
 * seed replays its faults exactly. IOERR needs util-linux `prlimit` (Linux); without it only BUSY
 * is injected, and `counts()` says so.
 */
import { execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import type { Stores } from "../../contracts/stores.js";
import { sqliteLedger } from "../../stores/sqlite/index.js";
import { seededRng, type Rng } from "./rng.js";
import { isReadMethod, withMethods } from "./store-methods.js";
import type { ScheduleLedger } from "./schedule.js";

export interface DriverFaultRates {
  /** Chance that a write meets SQLITE_BUSY. */
  readonly busy: number;
  /** Chance that a write meets SQLITE_IOERR (the WAL cannot grow). */
  readonly ioError: number;
}

export const DEFAULT_DRIVER_RATES: DriverFaultRates = { busy: 0.05, ioError: 0.03 };

export interface DriverCounts {
  /** Writes put under a fault, by kind. */
  readonly injected: { readonly busy: number; readonly ioError: number };
  /** Of those, writes the fault failed (an IOERR needs the WAL to grow: a write that fits meets none). */
  readonly failed: number;
  /** Why IOERR is not injected here, if it is not. */
  readonly ioErrorUnavailable?: string;
}

export interface DriverFaultOpener {
  readonly name: string;
  open(seed: number, clock: () => number): Promise<ScheduleLedger>;
  counts(): DriverCounts;
  close(): Promise<void>;
}

/** Mixed into the seed, so these draws are not the schedule's own. */
const DRIVER_STREAM = 0x5bd1e995;
/** Short, so a BUSY write gives up quickly (the store's own default is 5 s). */
const BUSY_TIMEOUT_MS = 5;
/** What the schedule itself calls on its ledger, without faults. */
const BOOKKEEPING = new Set(["list", "listApprovals", "getApproval", "moveApproval"]);
type Fault = "busy" | "ioError";

/** Why RLIMIT_FSIZE cannot be lowered here with util-linux prlimit, or undefined when it can. */
export function prlimitMissing(): string | undefined {
  if (process.platform !== "linux") return "RLIMIT_FSIZE through prlimit is Linux-only";
  try {
    execFileSync("prlimit", ["--version"], { stdio: "ignore" });
    return undefined;
  } catch {
    return "util-linux prlimit is not installed";
  }
}

export function faultySqlite(rates: DriverFaultRates = DEFAULT_DRIVER_RATES): DriverFaultOpener {
  const dir = mkdtempSync(join(tmpdir(), "effectgate-explore-driver-"));
  const file = join(dir, "ledger.db");
  let now: () => number = Date.now;
  const stores = sqliteLedger(file, { durability: "process", busyTimeoutMs: BUSY_TIMEOUT_MS, clock: () => now() });
  const ioErrorUnavailable = rates.ioError > 0 ? prlimitMissing() : undefined;
  const injected = { busy: 0, ioError: 0 };
  let failed = 0;
  let rng: Rng = seededRng(DRIVER_STREAM);
  let locker: Database.Database | undefined;
  const fsize = (value: string) => execFileSync("prlimit", ["--pid", String(process.pid), `--fsize=${value}:`]);

  const on = (fault: Fault): void => {
    if (fault === "busy") {
      // The ledger file exists by now (open() reads it first): a locker must never create an empty one.
      locker ??= new Database(file, { timeout: 0, fileMustExist: true });
      locker.exec("BEGIN IMMEDIATE");
    } else {
      // No file of this process may grow past the WAL's size now (the soft limit: raising it back needs no privilege).
      fsize(String(existsSync(`${file}-wal`) ? statSync(`${file}-wal`).size : 0));
    }
  };
  const off = (fault: Fault): void => {
    if (fault === "busy") locker?.exec("ROLLBACK");
    else fsize("unlimited");
  };
  const draw = (): Fault | undefined => {
    if (rng.chance(rates.busy)) return "busy";
    if (rng.chance(rates.ioError) && ioErrorUnavailable === undefined) return "ioError";
    return undefined;
  };

  const faulted = <T extends object>(store: T): T => withMethods(store, (name, plain) => (BOOKKEEPING.has(name) || isReadMethod(name) ? plain : async (...args) => {
    const fault = draw();
    if (!fault) return plain(...args);
    injected[fault]++;
    on(fault);
    try {
      return await plain(...args);
    } catch (err) {
      failed++;
      throw err;
    } finally {
      off(fault);
    }
  }));

  const faulty: Stores = {
    location: stores.location,
    calls: faulted(stores.calls),
    checkpoints: faulted(stores.checkpoints),
    ...(stores.governance ? { governance: faulted(stores.governance) } : {}),
    ...(stores.sagas ? { sagas: faulted(stores.sagas) } : {}),
    ...(stores.reconcile ? { reconcile: faulted(stores.reconcile) } : {}),
    close: () => stores.close(),
  };
  return {
    name: "sqlite+driver faults",
    open: async (seed, clock) => {
      now = clock;
      await stores.calls.get(`s${seed}`, "open"); // the store opens (and creates) its file before any fault is drawn
      rng = seededRng((seed ^ DRIVER_STREAM) >>> 0);
      return { stores: faulty, tenant: `s${seed}`, prefix: `s${seed}_`, release: async () => undefined };
    },
    counts: () => ({ injected: { ...injected }, failed, ...(ioErrorUnavailable ? { ioErrorUnavailable } : {}) }),
    async close() {
      locker?.close();
      await stores.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
