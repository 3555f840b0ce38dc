/**
 * Live updates for the console. Agents change the ledger from other processes, so the server
 * looks at it on a timer (only while a browser listens) and tells every listener when what an
 * operator watches moved: pending approvals, the human queue, kill switches, breakers, sagas in
 * flight, calls in flight and calls recently made (what a ledger search shows first: a call
 * made and settled between two looks is still seen). A change made through the API is announced
 * at once.
 */
import type { Stores } from "../../contracts/stores.js";
import { messageOf } from "../../core/errors.js";
import type { Logger } from "../../core/logger.js";
import { listQueue } from "../../reconcile/queue.js";

export type Listener = (event: { readonly what: readonly string[] }) => void;

export interface LiveFeed {
  /** Resolves, with the unsubscribe function, once the feed has a baseline: every later change is announced. */
  subscribe(listener: Listener): Promise<() => void>;
  /** Look now (after a change made through the API). */
  poke(): void;
  close(): void;
}

type Snapshot = Record<string, string>;

/**
 * How far back, before the newest call seen, calls still count as recent: a record is stamped
 * with its creation time before it commits, so one created a moment before the newest may become
 * visible after it. Far longer than a claim's commit takes.
 */
const RECENT_MS = 5_000;
const RECENT_LIMIT = 1000;

/**
 * The calls created since `from` (the store's clock): each new one, and each change to one, is
 * a change. `from` only moves forward, and only once a newer call is seen, so a call leaving the
 * window is never the only change announced.
 */
class RecentCalls {
  private from: number | undefined;

  async look(ledger: Stores): Promise<string> {
    this.from ??= (await ledger.calls.now()) - RECENT_MS;
    const recent = await ledger.calls.list({ createdFrom: this.from, limit: RECENT_LIMIT });
    const newest = recent[recent.length - 1];
    // A full window moves to its newest call at once: the calls after it are read on the next look.
    if (newest) this.from = Math.max(this.from, recent.length === RECENT_LIMIT ? newest.createdAt : newest.createdAt - RECENT_MS);
    return JSON.stringify(recent.map((c) => [c.tenant, c.key, c.version]));
  }
}

async function snapshot(ledger: Stores, recent: RecentCalls): Promise<Snapshot> {
  const ids = (rows: readonly unknown[]) => JSON.stringify(rows);
  const governance = ledger.governance;
  return {
    // The oldest 1000's ids and the exact count: a request made or decided past the first 1000 is still a change.
    approvals: governance
      ? ids([await governance.countApprovals({ state: "pending" }), ...(await governance.listApprovals({ state: "pending", limit: 1000 })).map((a) => a.id)])
      : "[]",
    queue: ids((await listQueue(ledger, { limit: 1000 })).map((q) => [q.id, q.since])),
    kill: governance ? ids(await governance.listKillSwitches()) : "[]",
    breakers: governance ? ids((await governance.listBreakers({ includeClosed: false, limit: 1000 })).map((b) => b.id)) : "[]",
    sagas: ledger.sagas ? ids((await ledger.sagas.listActive({ limit: 1000 })).map((s) => [s.tenant, s.id, s.version])) : "[]",
    calls: ids((await ledger.calls.list({ state: "in_progress", limit: 1000 })).map((c) => [c.tenant, c.key, c.version])) + await recent.look(ledger),
  };
}

export function liveFeed(ledger: Stores, options: { readonly pollMs: number; readonly logger: Logger }): LiveFeed {
  const listeners = new Set<Listener>();
  let recent = new RecentCalls();
  let last: Snapshot | undefined;
  let timer: NodeJS.Timeout | undefined;
  let looking: Promise<void> | undefined;
  let again = false;

  async function look(): Promise<void> {
    try {
      const now = await snapshot(ledger, recent);
      const before = last;
      last = now;
      if (!before) return;
      const what = Object.keys(now).filter((k) => now[k] !== before[k]);
      if (what.length > 0) for (const listener of listeners) listener({ what });
    } catch (err) {
      options.logger.warn({ event: "console_live_failed", error: messageOf(err) }, "the console could not read the ledger for live updates");
    }
  }

  function lookSoon(): void {
    if (looking) {
      again = true;
      return;
    }
    looking = look().finally(() => {
      looking = undefined;
      if (again) {
        again = false;
        lookSoon();
      }
    });
  }

  return {
    async subscribe(listener) {
      listeners.add(listener);
      if (!timer) {
        lookSoon();
        timer = setInterval(lookSoon, options.pollMs);
        timer.unref();
      }
      while (!last && looking) await looking;
      return () => {
        listeners.delete(listener);
        if (listeners.size === 0 && timer) {
          clearInterval(timer);
          timer = undefined;
          last = undefined;
          recent = new RecentCalls();
        }
      };
    },
    poke: () => {
      if (listeners.size > 0) lookSoon();
    },
    close() {
      if (timer) clearInterval(timer);
      timer = undefined;
      listeners.clear();
    },
  };
}
