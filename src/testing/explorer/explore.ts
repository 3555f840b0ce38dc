/**
 * The fault explorer: runs many seeded schedules (schedule.ts) on one kind of ledger and sums
 * what they injected and what they found. A violation names its seed and invariant; run
 * `explore({ seed, schedules: 1, trace: true })` on the same ledger kind to replay it exactly.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { memoryLedger } from "../../stores/memory/index.js";
import { sqliteLedger } from "../../stores/sqlite/index.js";
import type { FaultCounts } from "./faults.js";
import { INVARIANTS, type Invariant, type Violation } from "./invariants.js";
import type { ProxyCounts, ProxyFaultRates } from "./pg-proxy.js";
import type { DriverCounts, DriverFaultRates } from "./sqlite-faults.js";
import { dropSchema } from "./pg-schema.js";
import { watchProcessFaults } from "./process-faults.js";
import type { EntryName } from "./entries/entry.js";
import { loadEntry } from "./entries/load.js";
import { runSchedule, type ScheduleLedger, type ScheduleOptions, type ScheduleResult } from "./schedule.js";

export type ExplorerLedger =
  | "memory"
  | "sqlite"
  /** SQLite with real driver faults inside its batches: SQLITE_BUSY and SQLITE_IOERR at seeded points (sqlite-faults.ts; `true`: the default rates). */
  | { readonly sqlite: true; readonly driverFaults: true | DriverFaultRates }
  /** With `proxy`: through a TCP proxy that cuts connections, drops COMMIT replies, delays and stalls (proxy-ledger.ts; `true`: the default rates). */
  | { readonly postgres: string; readonly proxy?: true | ProxyFaultRates }
  /** Your own: open (or reuse) a ledger for schedule `seed`, judging time by `clock`. */
  | ((seed: number, clock: () => number) => Promise<ScheduleLedger>);

export interface ExploreOptions {
  /** How many schedules (default 1000). */
  readonly schedules?: number;
  /** The first seed (default 1); schedule i runs seed + i. */
  readonly seed?: number;
  /** Where the records live (default "memory"): each memory schedule gets a fresh ledger; SQLite and PostgreSQL schedules share one, a tenant each. */
  readonly ledger?: ExplorerLedger;
  /** Your own downstream simulators instead of the built-in ones (docs/testing.md). */
  readonly systems?: ScheduleOptions["systems"];
  /** Override the drawn workload (to aim the explorer at one kind of schedule). */
  readonly workload?: ScheduleOptions["workload"];
  /** Keep each schedule's event trace (print it to read a failing schedule). */
  readonly trace?: boolean;
  /** Stop at the first schedule with a violation (default false). */
  readonly stopAtFirstViolation?: boolean;
  /** Called after each schedule. */
  readonly onSchedule?: (result: ScheduleResult) => void;
  /**
   * Which front door the schedules drive (default "gate": runToolUses): an SDK adapter's tool as
   * its SDK calls it, the MCP gateway, LangChain's human-in-the-loop, or the Idempotency-Key
   * middleware. Each loads its optional peer only when chosen (docs/testing.md, "Entry points").
   */
  readonly entry?: EntryName;
}

export interface ExploreReport {
  readonly ledger: string;
  readonly schedules: number;
  readonly calls: number;
  readonly faults: FaultCounts;
  readonly workersStarted: number;
  readonly violations: readonly Violation[];
  readonly byInvariant: Readonly<Record<Invariant, number>>;
  /** Uncaught exceptions and unhandled rejections while a schedule ran; each is also an I7 violation (no fault may end the process). */
  readonly processFaults: readonly { readonly seed: number; readonly message: string }[];
  /** With a proxied PostgreSQL ledger: what the proxy injected. */
  readonly proxy?: ProxyCounts;
  /** With SQLite driver faults: what was injected, and how many writes they failed. */
  readonly driver?: DriverCounts;
  /** With `trace: true`: the traces of the schedules that violated something (the first 20), or of the one schedule run. */
  readonly traces: ReadonlyMap<number, readonly string[]>;
  readonly ms: number;
}

export async function explore(options: ExploreOptions = {}): Promise<ExploreReport> {
  const count = options.schedules ?? 1000;
  const first = options.seed ?? 1;
  const started = performance.now();
  const entry = await loadEntry(options.entry ?? "gate");
  const schedule = entry.kind === "world" ? entry.run.bind(entry) : (seed: number, o: ScheduleOptions) => runSchedule(seed, { ...o, entry });
  const opener = await openerFor(options.ledger ?? "memory");
  const faults: FaultCounts = { crashes: 0, freezes: 0, ledgerFailures: 0, lostReplies: 0 };
  const byInvariant = Object.fromEntries(INVARIANTS.map((i) => [i, 0])) as Record<Invariant, number>;
  const violations: Violation[] = [];
  const traces = new Map<number, readonly string[]>();
  let calls = 0;
  let workersStarted = 0;
  let ran = 0;
  const processFaults: { seed: number; message: string }[] = [];
  const watch = watchProcessFaults();
  try {
    for (let i = 0; i < count; i++) {
      const seed = first + i;
      const result = await schedule(seed, {
        ledger: (s, clock) => opener.open(s, clock), trace: options.trace === true,
        ...(options.systems ? { systems: options.systems } : {}),
        ...(options.workload ? { workload: options.workload } : {}),
      });
      ran++;
      // I7: a fault that would have ended the process is a violation of the schedule that ran it.
      const ended = watch.take().map((message) => ({ seed, message }));
      processFaults.push(...ended);
      const found = [...result.violations, ...ended.map((f) => ({ seed, invariant: "I7" as const, message: `would have ended the process: ${f.message}` }))];
      calls += result.calls;
      workersStarted += result.workersStarted;
      for (const k of Object.keys(faults) as (keyof FaultCounts)[]) faults[k] += result.faults[k];
      for (const v of found) byInvariant[v.invariant]++;
      if (found.length > 0 && violations.length < 200) violations.push(...found);
      if (options.trace === true && (found.length > 0 || count === 1) && traces.size < 20) traces.set(seed, result.trace);
      options.onSchedule?.(ended.length > 0 ? { ...result, violations: found } : result);
      if (options.stopAtFirstViolation === true && found.length > 0) break;
    }
  } finally {
    watch.stop();
    await opener.close();
  }
  const proxy = opener.counts?.();
  const driver = opener.driverCounts?.();
  return {
    ledger: opener.name, schedules: ran, calls, faults, workersStarted, violations, byInvariant, processFaults, traces, ms: performance.now() - started,
    ...(proxy ? { proxy } : {}),
    ...(driver ? { driver } : {}),
  };
}

interface Opener {
  readonly name: string;
  open(seed: number, clock: () => number): Promise<ScheduleLedger>;
  counts?(): ProxyCounts;
  driverCounts?(): DriverCounts;
  close(): Promise<void>;
}

async function openerFor(ledger: ExplorerLedger): Promise<Opener> {
  if (typeof ledger === "function") return { name: "custom", open: ledger, close: async () => undefined };
  if (ledger === "memory") {
    return {
      name: "memory",
      open: async (seed, clock) => {
        const stores = memoryLedger({ clock });
        return { stores, tenant: "explorer", prefix: "", release: () => stores.close() };
      },
      close: async () => undefined,
    };
  }
  // One shared ledger whose clock follows the schedule running now; each schedule gets a tenant and tool names of its own.
  let clock: () => number = Date.now;
  const shared = (stores: { close(): Promise<void> } & ScheduleLedger["stores"], name: string, cleanup: () => Promise<void>): Opener => ({
    name,
    open: async (seed, scheduleClock) => {
      clock = scheduleClock;
      return { stores, tenant: `s${seed}`, prefix: `s${seed}_`, release: async () => undefined };
    },
    close: async () => {
      await stores.close();
      await cleanup();
    },
  });
  if (ledger === "sqlite") {
    const dir = mkdtempSync(join(tmpdir(), "effectgate-explore-"));
    const stores = sqliteLedger(join(dir, "ledger.db"), { durability: "process", clock: () => clock() });
    return shared(stores, "sqlite", async () => rmSync(dir, { recursive: true, force: true }));
  }
  if ("sqlite" in ledger) {
    const { faultySqlite } = await import("./sqlite-faults.js");
    const opener = faultySqlite(ledger.driverFaults === true ? undefined : ledger.driverFaults);
    return { name: opener.name, open: (seed, clock) => opener.open(seed, clock), driverCounts: () => opener.counts(), close: () => opener.close() };
  }
  if (ledger.proxy !== undefined) {
    const { proxiedPostgres } = await import("./proxy-ledger.js");
    return proxiedPostgres(ledger.postgres, ledger.proxy === true ? undefined : ledger.proxy);
  }
  const { postgresLedger } = await import("../../stores/postgres/index.js");
  const schema = `effectgate_explore_${process.pid}_${Date.now().toString(36)}`;
  const stores = postgresLedger({ connectionString: ledger.postgres }, { schema, durability: "process", clock: () => clock() });
  return shared(stores, "postgres", () => dropSchema(ledger.postgres, schema));
}
