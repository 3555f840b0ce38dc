/**
 * Group commit for the PostgreSQL ledger: the writes that concurrent calls of one process ask for
 * together go to the server as ONE transaction on one connection (BEGIN, each statement, COMMIT),
 * so they share one commit and one WAL flush instead of paying one each. On a connection that
 * pipelines (node-postgres `pipeline: true`, which the ledger's own pool uses) the whole
 * transaction leaves in one socket write and is answered in one round trip.
 *
 * - A lone write never waits for a batch to fill: the queue is flushed in a microtask, after the
 *   microtasks already queued (the other calls' next steps, which reach their writes at the same
 *   depth when the calls move in step) had their chance to join. A microtask and not a
 *   `setImmediate`: a lone write then costs no extra turn of the event loop (a system call, and on a
 *   busy machine a chance to lose the CPU). A batch of one is sent exactly as before: one statement
 *   in its own autocommit.
 * - Every promise settles only after the COMMIT returned, i.e. once the batch is durable at the
 *   ledger's level: a call's claim before its tool starts, its outcome before its result returns.
 * - A compare-and-set that matches no row is not an error: it changes nothing, whatever else is in
 *   the batch. A statement the server refuses (a value text cannot hold, a bug) aborts the
 *   transaction, so nothing of it was written: that write is rejected alone and the others are
 *   sent again as a new transaction. A stale prepared plan or a deadlock is not the write's fault:
 *   it is sent again too (at most ATTEMPTS times).
 * - If the COMMIT itself fails, or the connection breaks, every write of the batch is rejected, as
 *   one failed commit is: none of them was acknowledged.
 * - Statements go out in (table, tenant, key) order, so two batches (of this process or another)
 *   that change the same rows lock them in the same order and cannot deadlock each other.
 * - At most `maxBatches` batches (or lone writes) are in flight at once; writes asked for meanwhile
 *   wait for the next flush, which starts as soon as one of them is answered.
 * - A connection that does not pipeline (a pool you passed in without `pipeline: true`) gets the
 *   same transaction one statement after the other: still one commit, but a round trip each.
 */
import type { Client, PoolClient, QueryConfig, QueryResult } from "pg";
import type { Checkout } from "./checkout.js";
import { isConnectionError } from "./errors.js";
import type { RawRow } from "./rows.js";

/** The row a write changes, to order the statements of a batch. */
export interface RowRef {
  readonly table: string;
  readonly tenant: string;
  readonly key: string;
}

/** One write: what to send in a batch (built when it is sent: a stale plan turns preparing off meanwhile), how to send it alone, and which row it changes. */
export interface Write {
  readonly query: () => QueryConfig;
  /** The statement alone, in its own autocommit, on any pooled connection (a batch of one). */
  readonly alone: () => Promise<QueryResult<RawRow>>;
  readonly row: RowRef;
}

interface Pending extends Write {
  readonly resolve: (result: QueryResult<RawRow>) => void;
  readonly reject: (err: unknown) => void;
  attempts: number;
}

export interface PgGroupCommit {
  /** Sends `write` in the next group commit; resolves with its result once the commit returned. */
  add(write: Write): Promise<QueryResult<RawRow>>;
  /** Sends what is queued now and waits for every batch in flight (close). */
  drain(): Promise<void>;
}

export interface PgGroupCommitOptions {
  /** A connection for a batch, guarded while it is held (checkout.ts; told the time first when the ledger has a `clock`). */
  connect(): Promise<Checkout>;
  /** Whether a statement's failure is worth sending again: a stale prepared plan, a deadlock (nothing was written). */
  again(err: unknown): boolean;
  /** How many batches may be in flight at once. */
  readonly maxBatches: number;
}

/** How often one write is sent before its failure is its own. */
const ATTEMPTS = 3;
/** in_failed_sql_transaction: an earlier statement of the batch aborted it; this one did nothing wrong. */
const ABORTED_BY_ANOTHER = "25P02";

type Settled = PromiseSettledResult<QueryResult<RawRow>>;

const byRow = (a: Pending, b: Pending) =>
  compare(a.row.table, b.row.table) || compare(a.row.tenant, b.row.tenant) || compare(a.row.key, b.row.key);
const compare = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);
const codeOf = (err: unknown) => (err as { code?: unknown } | null)?.code;

export function pgGroupCommit(options: PgGroupCommitOptions): PgGroupCommit {
  let queue: Pending[] = [];
  let scheduled = false;
  let inFlight = 0;
  const running = new Set<Promise<void>>();

  function schedule(): void {
    if (!scheduled && queue.length > 0 && inFlight < options.maxBatches) {
      scheduled = true;
      queueMicrotask(flush);
    }
  }

  function flush(): void {
    scheduled = false;
    if (queue.length === 0 || inFlight >= options.maxBatches) return;
    const items = queue;
    queue = [];
    inFlight++;
    const done = (items.length === 1 ? single(items[0] as Pending) : batch(items)).finally(() => {
      inFlight--;
      running.delete(done);
      schedule();
    });
    running.add(done);
  }

  async function single(item: Pending): Promise<void> {
    try {
      item.resolve(await item.alone());
    } catch (err) {
      item.reject(err);
    }
  }

  async function batch(items: Pending[]): Promise<void> {
    let held: Checkout;
    try {
      held = await options.connect();
    } catch (err) {
      for (const item of items) item.reject(err);
      return;
    }
    const client = held.client;
    let broken: Error | undefined;
    try {
      let todo = [...items].sort(byRow);
      while (todo.length > 0) {
        const outcome = await transaction(client, todo);
        if (outcome.kind === "failed") {
          if (isConnectionError(outcome.error) && outcome.error instanceof Error) broken = outcome.error;
          for (const item of todo) item.reject(outcome.error);
          return;
        }
        if (outcome.kind === "committed") {
          todo.forEach((item, i) => item.resolve(outcome.results[i] as QueryResult<RawRow>));
          return;
        }
        // Rolled back by a statement the server refused: that write fails alone, the others go again.
        const next: Pending[] = [];
        todo.forEach((item, i) => {
          const settled = outcome.settled[i] as Settled;
          if (settled.status === "fulfilled" || codeOf(settled.reason) === ABORTED_BY_ANOTHER || settled.reason === NOT_SENT) next.push(item);
          else if (options.again(settled.reason) && ++item.attempts < ATTEMPTS) next.push(item);
          else item.reject(settled.reason);
        });
        // Nobody to blame (it cannot happen: PostgreSQL names the statement that failed): fail them all rather than loop.
        if (next.length === todo.length && outcome.settled.every((s) => s.status === "fulfilled" || codeOf(s.reason) === ABORTED_BY_ANOTHER || s.reason === NOT_SENT)) {
          for (const item of next) item.reject(new Error("PostgreSQL rolled a batch of ledger writes back without naming a failed statement"));
          return;
        }
        todo = next;
      }
    } catch (err) {
      // Not a refusal by the server (those settle above) but a fault here: nothing may be left unanswered.
      for (const item of items) item.reject(err);
    } finally {
      held.release(broken);
    }
  }

  return {
    add(write) {
      return new Promise((resolve, reject) => {
        queue.push({ ...write, resolve, reject, attempts: 0 });
        schedule();
      });
    },
    async drain() {
      while (queue.length > 0 || running.size > 0) {
        flush();
        await Promise.all(running);
      }
    },
  };
}

/** A statement of a non-pipelined batch that was never sent (an earlier one failed): it goes again. */
const NOT_SENT = Symbol("not sent");

type Outcome =
  | { readonly kind: "committed"; readonly results: readonly QueryResult<RawRow>[] }
  /** A statement aborted the transaction; nothing was written. Each write's result or error, in order. */
  | { readonly kind: "rolled_back"; readonly settled: readonly Settled[] }
  /** BEGIN or COMMIT failed, or the connection broke: whether anything was written is not known. */
  | { readonly kind: "failed"; readonly error: unknown };

async function transaction(client: PoolClient, items: readonly Pending[]): Promise<Outcome> {
  return client.pipeline ? pipelined(client, items) : stepByStep(client, items);
}

/** BEGIN, every statement and COMMIT written at once; the server answers them in order. */
async function pipelined(client: PoolClient, items: readonly Pending[]): Promise<Outcome> {
  // A pipelining client writes each query as it is asked for (one system call each); corked, the
  // whole batch leaves in one write. (node-postgres corks each query too: corks nest.)
  const socket = (client as Partial<Pick<Client, "connection">>).connection?.stream;
  socket?.cork();
  let begin: Promise<QueryResult>, sent: Promise<QueryResult<RawRow>>[], commit: Promise<QueryResult>;
  try {
    begin = client.query("BEGIN");
    sent = items.map((item) => client.query<RawRow>(item.query()));
    commit = client.query("COMMIT");
  } finally {
    socket?.uncork();
  }
  const [began, ...rest] = await Promise.allSettled([begin, ...sent, commit]);
  const committed = rest.pop() as PromiseSettledResult<QueryResult>;
  const settled = rest as Settled[];
  if (began?.status === "rejected") return { kind: "failed", error: began.reason };
  if (committed.status === "rejected") return { kind: "failed", error: committed.reason };
  // COMMIT of a transaction a statement aborted answers ROLLBACK.
  if (committed.value.command === "COMMIT" && settled.every((s) => s.status === "fulfilled")) {
    return { kind: "committed", results: settled.map((s) => (s as PromiseFulfilledResult<QueryResult<RawRow>>).value) };
  }
  return { kind: "rolled_back", settled };
}

/** The same transaction on a connection that does not pipeline: one statement after the other. */
async function stepByStep(client: PoolClient, items: readonly Pending[]): Promise<Outcome> {
  try {
    await client.query("BEGIN");
  } catch (err) {
    return { kind: "failed", error: err };
  }
  const settled: Settled[] = [];
  for (const item of items) {
    if (settled.some((s) => s.status === "rejected")) {
      settled.push({ status: "rejected", reason: NOT_SENT });
      continue;
    }
    try {
      settled.push({ status: "fulfilled", value: await client.query<RawRow>(item.query()) });
    } catch (err) {
      if (isConnectionError(err)) return { kind: "failed", error: err };
      settled.push({ status: "rejected", reason: err });
    }
  }
  try {
    const committed = await client.query(settled.some((s) => s.status === "rejected") ? "ROLLBACK" : "COMMIT");
    if (committed.command === "COMMIT") return { kind: "committed", results: settled.map((s) => (s as PromiseFulfilledResult<QueryResult<RawRow>>).value) };
  } catch (err) {
    return { kind: "failed", error: err };
  }
  return { kind: "rolled_back", settled };
}
