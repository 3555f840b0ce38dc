/**
 * Group commit for the SQLite ledger: the writes that concurrent calls of one process ask for in
 * the same turn of the event loop are committed in ONE transaction, so they share one fsync
 * instead of paying one each (SQLite has a single writer anyway; better-sqlite3 runs each
 * statement synchronously, so nothing is gained by waiting longer than that turn).
 *
 * - A lone write never waits for a batch to fill: the batch is flushed on the next `setImmediate`,
 *   after the microtasks already queued (the other calls' next steps) had their chance to join.
 *   A batch of one runs exactly as before: one statement, its own autocommit.
 * - Each write runs in a savepoint of its own: one that throws (a bug, a forbidden move) is rolled
 *   back and rejected alone; a compare-and-set that finds a stale version is not an error and
 *   changes nothing, whatever else is in the batch.
 * - Every promise settles only after the COMMIT returned, i.e. once the batch is durable at the
 *   ledger's level (synchronous=FULL: fsynced). If the commit fails, every write of the batch is
 *   rejected: none of them was acknowledged, exactly as a failed single commit.
 * - If SQLite rolls the whole transaction back on an error (a full disk, an I/O error), the rest of
 *   the batch is not run: the batch fails as one, rather than letting later writes autocommit.
 */
import type Database from "better-sqlite3";
import type { EffectgateError } from "../../core/errors.js";

type Db = Database.Database;

interface Pending {
  readonly what: string;
  readonly fn: (db: Db) => unknown;
  readonly resolve: (value: unknown) => void;
  readonly reject: (err: unknown) => void;
}

type Outcome = { readonly ok: true; readonly value: unknown } | { readonly ok: false; readonly error: unknown };

export interface GroupCommit {
  /** Queues `fn` for the next group commit. */
  add<T>(what: string, fn: (db: Db) => T): Promise<T>;
  /** Whether writes are waiting for their commit (a read asked for now must come after them). */
  pending(): boolean;
  /** Commits what is queued now instead of on the next turn (close). */
  flushNow(): Promise<void>;
}

export interface GroupCommitOptions {
  /** The open connection, or the promise of one while the file is being opened. */
  connection(): Db | Promise<Db>;
  /** A driver error as the contract's EG_LEDGER_* error. */
  mapped(err: unknown, what: string): EffectgateError;
}

/** Why a batch was abandoned when SQLite had already rolled its transaction back. */
class BatchAborted extends Error {}

export function groupCommit(options: GroupCommitOptions): GroupCommit {
  let queue: Pending[] = [];
  let timer: NodeJS.Immediate | undefined;
  let last: Promise<void> = Promise.resolve();
  const transactions = new WeakMap<Db, { batch: Database.Transaction<(items: readonly Pending[], out: Outcome[]) => void> }>();

  function transactionsOf(db: Db) {
    let t = transactions.get(db);
    if (!t) {
      // Nested in the batch's transaction, better-sqlite3 runs a transaction function as SAVEPOINT … RELEASE (ROLLBACK TO on a throw).
      const savepoint = db.transaction((fn: (db: Db) => unknown) => fn(db));
      const batch = db.transaction((items: readonly Pending[], out: Outcome[]) => {
        for (const item of items) {
          try {
            out.push({ ok: true, value: savepoint(item.fn) });
          } catch (err) {
            if (!db.inTransaction) throw new BatchAborted("SQLite rolled the batch's transaction back", { cause: err });
            out.push({ ok: false, error: options.mapped(err, item.what) });
          }
        }
      });
      transactions.set(db, (t = { batch }));
    }
    return t;
  }

  function commit(db: Db, items: readonly Pending[]): void {
    if (items.length === 1) {
      const [item] = items as [Pending];
      try {
        item.resolve(item.fn(db));
      } catch (err) {
        item.reject(options.mapped(err, item.what));
      }
      return;
    }
    const out: Outcome[] = [];
    try {
      transactionsOf(db).batch.immediate(items, out);
    } catch (err) {
      const cause = err instanceof BatchAborted ? err.cause : err;
      for (const item of items) item.reject(options.mapped(cause, item.what));
      return;
    }
    items.forEach((item, i) => {
      const outcome = out[i] as Outcome;
      if (outcome.ok) item.resolve(outcome.value);
      else item.reject(outcome.error);
    });
  }

  function flush(): Promise<void> {
    timer = undefined;
    const items = queue;
    queue = [];
    if (items.length === 0) return last;
    const conn = options.connection();
    if (!(conn instanceof Promise)) {
      commit(conn, items);
      return last;
    }
    // The file is still being opened: batches wait for it in the order they were made.
    last = last.then(() => conn).then(
      (db) => commit(db, items),
      (err: unknown) => {
        for (const item of items) item.reject(err);
      },
    );
    return last;
  }

  return {
    add<T>(what: string, fn: (db: Db) => T): Promise<T> {
      return new Promise<T>((resolve, reject) => {
        queue.push({ what, fn, resolve: resolve as (value: unknown) => void, reject });
        // flush() never rejects: every failure settles its writes instead.
        timer ??= setImmediate(() => void flush());
      });
    },
    pending: () => queue.length > 0,
    flushNow() {
      if (timer) clearImmediate(timer);
      return flush();
    },
  };
}
