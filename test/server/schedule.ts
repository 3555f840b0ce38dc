/**
 * A deterministic scheduler for ledger writes: several actors (one request each, through its own
 * middleware instance, "one server per actor") share one ledger, and every write an actor makes
 * (claim, remove, update, takeOver) waits until the scheduler lets it through. The scheduler runs
 * one write at a time and picks the next only once every actor that is still busy is waiting at
 * a write (or done), so the interleaving depends on the choices alone, never on timing. A choice is
 * a script (the race being reproduced) or a seeded PRNG.
 *
 * Reads (get, now, list) and lease renewals pass through ungated.
 */
import type { CallStore } from "../../src/contracts/calls.js";
import type { Stores } from "../../src/contracts/stores.js";

export const GATED_WRITES = ["claim", "remove", "update", "takeOver"] as const;
export type GatedWrite = (typeof GATED_WRITES)[number];

export interface Waiting {
  readonly actor: string;
  readonly op: GatedWrite;
}

/** Picks which waiting write runs next; `step` counts writes let through so far. */
export type Chooser = (waiting: readonly Waiting[], step: number) => Waiting;

interface Parked extends Waiting {
  readonly go: () => void;
}

export class WriteSchedule {
  /** Every write let through, in order: "A:claim", "B:remove", … */
  readonly trace: string[] = [];
  private active = false;
  private readonly parked = new Map<string, Parked>();
  private readonly busy = new Set<string>();
  private wake: (() => void) | undefined;

  /** The ledger as one actor sees it: the same stores, its writes gated while a schedule runs. */
  ledgerFor(actor: string, base: Stores): Stores {
    const calls = Object.create(base.calls) as CallStore;
    const writable = calls as unknown as Record<string, unknown>;
    for (const op of GATED_WRITES) {
      const original = (base.calls[op] as (...args: unknown[]) => Promise<unknown>).bind(base.calls);
      writable[op] = async (...args: unknown[]) => {
        if (!this.active) return original(...args);
        await new Promise<void>((go) => {
          this.parked.set(actor, { actor, op, go });
          this.poke();
        });
        return original(...args);
      };
    }
    return { ...base, calls, close: () => base.close() };
  }

  /**
   * Runs `actors` (each an async function: one request and reading its answer) under the
   * schedule, and returns what each returned.
   */
  async run<T>(actors: Readonly<Record<string, () => Promise<T>>>, choose: Chooser): Promise<Record<string, T>> {
    this.active = true;
    const results: Record<string, T> = {};
    const failures: unknown[] = [];
    const names = Object.keys(actors);
    for (const name of names) this.busy.add(name);
    const running = names.map(async (name) => {
      try {
        results[name] = await actors[name]!();
      } catch (err) {
        failures.push(err);
      } finally {
        this.busy.delete(name);
        this.poke();
      }
    });
    try {
      for (let step = 0; ; step++) {
        // Wait until every busy actor is parked at a write: only then is the choice free of timing.
        while ([...this.busy].some((name) => !this.parked.has(name))) await new Promise<void>((r) => (this.wake = r));
        if (this.busy.size === 0) break;
        const waiting = [...this.parked.values()].map(({ actor, op }) => ({ actor, op }));
        const chosen = choose(waiting, step);
        const parked = this.parked.get(chosen.actor);
        if (!parked) throw new Error(`the chooser picked ${chosen.actor}, which is not waiting`);
        this.parked.delete(chosen.actor);
        this.trace.push(`${parked.actor}:${parked.op}`);
        parked.go();
      }
      await Promise.all(running);
    } finally {
      this.active = false;
    }
    if (failures.length > 0) throw failures[0];
    return results;
  }

  private poke(): void {
    const wake = this.wake;
    this.wake = undefined;
    wake?.();
  }
}

/** Follows `script` (actor names, one per write) while the named actor is waiting, then the first waiting actor. */
export function scripted(script: readonly string[]): Chooser {
  return (waiting, step) => waiting.find((w) => w.actor === script[step]) ?? waiting[0]!;
}

/** A seeded choice among the waiting writes (mulberry32). */
export function seeded(seed: number): Chooser {
  let state = seed >>> 0;
  const next = () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  return (waiting) => {
    const sorted = [...waiting].sort((a, b) => a.actor.localeCompare(b.actor));
    return sorted[Math.floor(next() * sorted.length)]!;
  };
}
