/**
 * A process's view of the shared ledger in a schedule: every operation is one step the world's
 * scheduler lets through (so twins interleave as the seed says), and at each one the schedule may
 * inject a fault: the process killed before the operation or after it committed, frozen past its
 * lease, the operation failing (nothing written), or its commit reply lost (written, but the
 * process is told it failed). It also watches for I6: a write that replaces a record another
 * live holder holds.
 */
import { EffectgateError } from "../../core/errors.js";
import type { Stores } from "../../contracts/stores.js";
import type { CallRecord } from "../../contracts/calls.js";
import type { Faults } from "./faults.js";
import type { Process, World } from "./world.js";

const READS = /^(get|list|now|load|active|quotaUsage|steps|history)/;

/** What a wrapped ledger reports to the schedule. */
export interface LedgerObserver {
  /** A write by `process` (gate owner `owner`) succeeded on a record held by someone else. */
  overwrote(process: Process, owner: string, before: CallRecord, op: string): void;
  /** A write by `process` on the call record `key` succeeded (whatever its reply said): I9. */
  wrote?(process: Process, key: string): void;
  /** A write by `process` on the call record `key` failed (injected; nothing written): I9. */
  failedWrite?(process: Process, key: string): void;
  /** `process` created the record `key` by a claim whose reply was then lost: its tool certainly never started (I9). */
  claimReplyLost?(process: Process, key: string): void;
}

/** The call key a calls-store operation names: a request's `key`, or the (tenant, key) pair's second. */
function keyOf(args: readonly unknown[]): string | undefined {
  const first = args[0] as { key?: unknown } | null | undefined;
  if (typeof first === "object" && first !== null && typeof first.key === "string") return first.key;
  return typeof args[1] === "string" ? args[1] : undefined;
}

/** Whether a claim's result says it created the record (a claim that found one wrote nothing). */
function created(result: unknown): boolean {
  return typeof result === "object" && result !== null && (result as { claimed?: unknown }).claimed === true;
}

/**
 * Each simulated worker in a PID namespace of its own (issue 12 #2: containers sharing a hostname):
 * all of them are one real process, so the ledger sees each gate's owner id with a pid and a
 * PID-namespace id of its own (a pid no process here has), and each gate sees its own id back.
 * A holder judged by its lease is unaffected; one judged by "same host, pid not alive" is taken
 * for dead while it runs, as a worker in another container would be.
 */
function ownIdentity(process: Process, owner: () => string): { toStore: (v: unknown) => unknown; fromStore: (v: unknown) => unknown; stored: () => string } {
  let hash = 2166136261;
  for (const c of process.name) hash = Math.imul(hash ^ c.charCodeAt(0), 16777619) >>> 0;
  // Above Linux's largest pid (2^22), so no real process has it.
  const pid = String(4_194_304 + 1 + (hash % 1_000_000));
  const pidns = String(4_026_600_000 + (hash % 100_000));
  const stored = (): string => owner().split("/").map((part, i) => (i === 1 ? pid : i === 4 ? pidns : part)).join("/");
  const swap = (from: string, to: string) => function walk(v: unknown): unknown {
    if (v === from) return to;
    if (Array.isArray(v)) return v.map(walk);
    if (typeof v === "object" && v !== null && (Object.getPrototypeOf(v) === Object.prototype || Object.getPrototypeOf(v) === null)) {
      return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, walk(x)]));
    }
    return v;
  };
  return {
    stored,
    toStore: (v) => (owner() === "" ? v : swap(owner(), stored())(v)),
    fromStore: (v) => (owner() === "" ? v : swap(stored(), owner())(v)),
  };
}

export function faultyLedger(world: World, base: Stores, process: Process, owner: () => string, faults: Faults, observer: LedgerObserver): Stores {
  const identity = ownIdentity(process, owner);
  function wrap<T extends object>(store: T, storeName: string): T {
    const wrapped = new Map<string, unknown>();
    // A Proxy, so a store written as a class (methods on its prototype) is wrapped too.
    return new Proxy(store, {
      get(target, name, receiver) {
        const member: unknown = Reflect.get(target, name, receiver);
        if (typeof member !== "function" || typeof name !== "string") return member;
        let fn = wrapped.get(name);
        if (!fn) wrapped.set(name, (fn = step(storeName, name, (member as (...args: unknown[]) => Promise<unknown>).bind(target))));
        return fn;
      },
    });
  }

  function step(storeName: string, name: string, real: (...args: unknown[]) => Promise<unknown>) {
    const label = `${storeName}.${name}`;
    const writes = !READS.test(name);
    // I6: a call record's writer must be its holder, or nobody must hold it.
    const watched = storeName === "calls" && (name === "update" || name === "renewLease");
    return async (...args: unknown[]): Promise<unknown> => {
      await world.permit(process, label);
      if (process.state === "dead") return never();
      const before = faults.beforeLedgerOp(process, label, writes);
      if (before === "crash") return world.kill(process, `before ${label}`), never();
      if (before === "freeze") {
        await world.running(process);
        if (process.state !== "running") return never();
      }
      const key = storeName === "calls" && writes ? keyOf(args) : undefined;
      if (before === "fail") {
        world.log(`${process.name}: ${label} fails (injected; nothing written)`);
        if (key !== undefined) observer.failedWrite?.(process, key);
        throw new EffectgateError("EG_LEDGER_UNAVAILABLE", `the ledger is unavailable (could not ${label}: injected fault). The tool was not started by this request; replay this same call once the ledger is reachable to run it or get its outcome.`);
      }
      const held = watched ? await world.track(base.calls.get(args[0] as string, args[1] as string)) : undefined;
      const result = identity.fromStore(await world.track(real(...(identity.toStore(args) as unknown[]))));
      if (watched && held && result !== undefined && result !== false && held.owner !== null && held.owner !== identity.stored()) {
        observer.overwrote(process, owner(), held, label);
      }
      if (key !== undefined && result !== undefined && result !== false && result !== null) observer.wrote?.(process, key);
      const after = faults.afterLedgerOp(process, label, writes);
      if (after === "crash") return world.kill(process, `after ${label} committed`), never();
      if (after === "lost_reply") {
        world.log(`${process.name}: ${label} committed, its reply lost (injected)`);
        if (key !== undefined && name.startsWith("claim") && created(result)) observer.claimReplyLost?.(process, key);
        throw new EffectgateError("EG_LEDGER_UNAVAILABLE", `the connection to the ledger was lost while waiting for ${label} (injected: it committed)`);
      }
      return result;
    };
  }

  return {
    location: `${base.location} (as seen by ${process.name})`,
    calls: wrap(base.calls, "calls"),
    checkpoints: wrap(base.checkpoints, "checkpoints"),
    ...(base.sagas ? { sagas: wrap(base.sagas, "sagas") } : {}),
    ...(base.governance ? { governance: wrap(base.governance, "governance") } : {}),
    ...(base.reconcile ? { reconcile: wrap(base.reconcile, "reconcile") } : {}),
    // One ledger outlives every process of the schedule: a process "closing" it changes nothing.
    close: () => Promise.resolve(),
  };
}

function never(): Promise<never> {
  return new Promise<never>(() => undefined);
}
