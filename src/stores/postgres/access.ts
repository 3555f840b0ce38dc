/**
 * The one way every PostgreSQL store reaches the ledger's database: the pool (yours, borrowed,
 * or the ledger's own), the schema made ready (checked, created and migrated on first use, or
 * refused by name), statements prepared once per connection, and every driver error mapped to
 * the contract's codes: damage is EG_LEDGER_CORRUPT naming the row, an unreachable database
 * EG_LEDGER_UNAVAILABLE naming the database (never its password), each with what happens next.
 */
import pg, { type Pool, type PoolClient, type QueryConfig, type QueryResult } from "pg";
import { EffectgateError } from "../../core/errors.js";
import { RowDamage } from "../row-damage.js";
import { checkOut } from "./checkout.js";
import { describeTarget, isConnectionError, isDamageError, isPoolTimeout, isStalePlan, isTransient, isUnstorableText, reasonOf, targetOf, type Target } from "./errors.js";
import { pgGroupCommit, type RowRef } from "./group-commit.js";
import { applyMigrations, readSchemaVersion, SCHEMA_VERSION, SchemaTooNew } from "./migrations.js";
import { RAW_TYPES, type RawRow } from "./rows.js";
import { GIVEN_NOW_MS, GIVEN_NOW_SETTING, NOW_MS, type Statement } from "./statements.js";

/** How to reach the database: a connection string (the ledger owns the pool) or your own pool (borrowed, never closed). */
export type PostgresConnection =
  | {
      readonly connectionString: string;
      /** Connections in the ledger's own pool (default 10). */
      readonly poolSize?: number;
      /** Give up connecting after this long (default 10 000 ms); the call then fails EG_LEDGER_UNAVAILABLE. */
      readonly connectTimeoutMs?: number;
    }
  | { readonly pool: Pool };

export interface PostgresLedgerOptions {
  /** The schema holding the ledger's tables (default "effectgate"): lower-case letters, digits and _, at most 63. */
  readonly schema?: string;
  /** "fsync" (default): commits as the server is configured. "process": survives a killed worker, not a crashed database server; faster. */
  readonly durability?: "fsync" | "process";
  /** Create and migrate the schema when it is missing (default true). With false, a schema without a ledger is refused untouched. */
  readonly create?: boolean;
  /** Read only (operator tools): never creates or migrates anything, and refuses every write. */
  readonly readOnly?: boolean;
  /**
   * Prepare the per-call statements once per connection (default true: about twice the
   * throughput on a busy server). Set false behind a pooler that cannot keep prepared
   * statements (PgBouncer in transaction mode before 1.21).
   */
  readonly preparedStatements?: boolean;
  /**
   * Judge leases and timestamps by this clock, epoch ms, instead of the database's. For
   * deterministic tests only (the fault explorer's simulated time): it costs a round trip per
   * statement, and every process on the schema must share it.
   */
  readonly clock?: () => number;
}

export const DEFAULT_POSTGRES_SCHEMA = "effectgate";

/** Group-commit batches in flight at once (group-commit.ts): writes asked for meanwhile form the next batch. */
const MAX_BATCHES = 4;

const SCHEMA_NAME = /^[a-z_][a-z0-9_]{0,62}$/;

/** Validates a schema name and returns it quoted for SQL. */
export function quoteSchema(schema: string): string {
  if (typeof schema !== "string" || !SCHEMA_NAME.test(schema) || schema.startsWith("pg_")) {
    throw new EffectgateError(
      "EG_BAD_OPTION",
      `${JSON.stringify(schema)} is not a usable schema name for the ledger: use lower-case letters, digits and _, ` +
        `starting with a letter or _, at most 63 characters, not starting with pg_`,
    );
  }
  return `"${schema}"`;
}

/** What an operation was doing, and what its failure means for the call, for messages. */
export interface Op {
  readonly what: string;
  readonly next: string;
  readonly writes: boolean;
}

export const NOTHING_RAN = "The tool was not started by this request; replay this same call once the database is reachable to run it or get its outcome.";
export const MAY_BE_UNRECORDED = "The change may not have been recorded; a replay or gate.recover() settles the call from what the database holds.";
export const TRY_AGAIN = "Nothing was changed; try again once the database is reachable.";
export const SAGA_NEXT = "The saga log may not be up to date: run the saga again, or gate.recover(), once the database is reachable.";

export interface PostgresAccess {
  /** The schema, validated and quoted for SQL. */
  readonly schema: string;
  readonly durability: "fsync" | "process";
  /** The SQL expression for the store's clock, epoch ms: the database's, or the `clock` option's. */
  readonly now: string;
  /** "postgres://user@host:5432/db schema effectgate", for messages. */
  readonly location: string;
  /** Runs one operation: the schema ready, writes refused when read-only, errors mapped. */
  run<T>(op: Op, fn: () => Promise<T>): Promise<T>;
  /** One statement on the pool, rows as raw text; a named statement is prepared once per connection. */
  query(statement: Statement | string, values?: readonly unknown[]): Promise<QueryResult<RawRow>>;
  /**
   * One write statement in the next group commit (group-commit.ts): the writes asked for together
   * (before the microtasks already queued have run) share one transaction and one commit. It resolves
   * once that commit returned; a lone write waits for no batch. `row` is the row it changes
   * (statements go out in row order).
   */
  write(statement: Statement, values: readonly unknown[], row: RowRef): Promise<QueryResult<RawRow>>;
  /** A client for a transaction of several statements, released afterwards (broken connections discarded). */
  withClient<T>(fn: (client: PoolClient) => Promise<T>): Promise<T>;
  close(): Promise<void>;
}

export function openPostgres(connection: PostgresConnection, options: PostgresLedgerOptions = {}): PostgresAccess {
  const schemaName = options.schema ?? DEFAULT_POSTGRES_SCHEMA;
  const s = quoteSchema(schemaName);
  const owned = !("pool" in connection);
  const target: Target = "pool" in connection ? targetOf(connection.pool.options) : targetOf(connection);
  const where = describeTarget(target);
  const location = `${where} schema ${schemaName}`;
  const pool: Pool = "pool" in connection ? connection.pool : ownPool(connection);
  // A borrowed pool reports a broken idle client (or one released broken) as an 'error' of its own: without a
  // listener that ends the process. Ours is there while the ledger is open (the ledger's own pool has one for good).
  if (!owned) pool.on("error", ignorePoolError);
  let ready: Promise<void> | undefined;
  let closed = false;
  /** The writes asked for and not yet answered: close waits for them. */
  const writing = new Set<Promise<unknown>>();

  function fail(op: Op, err: unknown): EffectgateError {
    if (err instanceof EffectgateError) return err;
    if (err instanceof RowDamage) {
      return new EffectgateError(
        "EG_LEDGER_CORRUPT",
        `the ledger ${location} holds a damaged row: ${err.message}. It was left as it is and no call was executed for it; ` +
          `other records are unaffected.${err.inspect === undefined ? "" : ` Inspect it with: SELECT * FROM ${err.inspect}`}`,
        { cause: err },
      );
    }
    if (isUnstorableText(err)) {
      return new EffectgateError(
        "EG_BAD_CONTENT",
        `the ledger ${location} cannot store this value: PostgreSQL text cannot hold the NUL character U+0000 ` +
          `(could not ${op.what}: ${reasonOf(err)}). Nothing was written and no call was executed; ` +
          `remove the NUL from the tenant, key (tool_use id or key function) or saga name.`,
        { cause: err },
      );
    }
    if (isDamageError(err)) {
      return new EffectgateError(
        "EG_LEDGER_CORRUPT",
        `the database ${where} reports damaged ledger data in schema ${schemaName} (could not ${op.what}: ${reasonOf(err)}). ` +
          `Nothing was changed and no call was executed; repair the database (REINDEX, or restore from a backup) before running calls.`,
        { cause: err },
      );
    }
    const reason = reasonOf(err);
    const problem = isPoolTimeout(err)
      ? `no connection to the ledger database ${where} could be opened or came free in time (the database does not answer, or all the pool's connections stayed busy)`
      : isConnectionError(err) ? `cannot reach the ledger database ${where}` : `the ledger ${location} is unavailable`;
    return new EffectgateError("EG_LEDGER_UNAVAILABLE", `${problem} (could not ${op.what}: ${reason}). ${op.next}`, { cause: err });
  }

  const tooNew = (found: number) =>
    new EffectgateError(
      "EG_LEDGER_TOO_NEW",
      `the ledger ${location} has schema version ${found}, newer than this effectgate knows (${SCHEMA_VERSION}). Upgrade effectgate; the database was not touched.`,
    );

  function prepare(): Promise<void> {
    ready ??= (async () => {
      const { client, release } = await checkOut(pool);
      let broken: unknown;
      try {
        if (options.readOnly === true || options.create === false) {
          const version = await readSchemaVersion(client, s);
          if (version === 0) {
            throw new EffectgateError(
              "EG_LEDGER_UNAVAILABLE",
              `there is no effectgate ledger in schema ${schemaName} of ${where} (nothing was created). Check the URL and the schema; ` +
                `to start a new ledger there, run \`effectgate migrate --pg URL --pg-schema ${schemaName}\` (an agent's gate also creates it on its first call).`,
            );
          }
          if (version > SCHEMA_VERSION) throw new SchemaTooNew(version);
          if (options.readOnly === true && version < SCHEMA_VERSION) {
            throw new EffectgateError(
              "EG_LEDGER_UNAVAILABLE",
              `the ledger ${location} has schema version ${version}; migrate it to ${SCHEMA_VERSION} with \`effectgate migrate --pg URL --pg-schema ${schemaName}\` (reading it changed nothing)`,
            );
          }
        }
        if (options.readOnly !== true) await applyMigrations(client, schemaName, s);
      } catch (err) {
        broken = err;
        if (err instanceof SchemaTooNew) throw tooNew(err.found);
        throw err;
      } finally {
        release(broken);
      }
    })().catch((err: unknown) => {
      // Not cached: a database that was down at start is used once it is back.
      ready = undefined;
      throw err;
    });
    return ready;
  }

  let prepared = options.preparedStatements !== false;

  const given = options.clock;
  /** With a `clock` option, each session is told the time before each statement. */
  const tell = (client: { query(text: string, values: unknown[]): Promise<unknown> }) =>
    given ? client.query(`SELECT set_config('${GIVEN_NOW_SETTING}', $1, false)`, [String(Math.floor(given()))]) : Promise.resolve();

  async function withClient<T>(fn: (client: PoolClient) => Promise<T>): Promise<T> {
    const { client, release } = await checkOut(pool);
    let broken: unknown;
    try {
      await tell(client);
      return await fn(client);
    } catch (err) {
      broken = err;
      throw err;
    } finally {
      release(broken);
    }
  }

  /** One statement: on any pooled connection, or, with a `clock`, on one told the time first. */
  const send = (query: QueryConfig): Promise<QueryResult<RawRow>> =>
    given ? withClient((client) => client.query<RawRow>(query)) : pool.query<RawRow>(query);

  /** What is sent for `statement`: under its name (prepared once per connection) unless preparing is off. */
  const config = (statement: Statement | string, values: readonly unknown[]): QueryConfig => {
    const isNamed = prepared && typeof statement !== "string";
    const text = typeof statement === "string" ? statement : statement.text;
    return { text, values: values as unknown[], types: RAW_TYPES, ...(isNamed ? { name: statement.name } : {}) };
  };

  async function query(statement: Statement | string, values: readonly unknown[] = []): Promise<QueryResult<RawRow>> {
    const sent = config(statement, values);
    try {
      return await send(sent);
    } catch (err) {
      // A column's type changed under a statement prepared on this connection (someone altered the table, or a
      // newer effectgate migrated it): the server refused it before running it, so it is safe to send again
      // unprepared, and this ledger stops preparing statements.
      if (sent.name === undefined || !isStalePlan(err)) throw err;
      prepared = false;
      return send(config(statement, values));
    }
  }

  const commits = pgGroupCommit({
    maxBatches: MAX_BATCHES,
    async connect() {
      const held = await checkOut(pool);
      try {
        await tell(held.client);
      } catch (err) {
        held.release(err);
        throw err;
      }
      return held;
    },
    again(err) {
      if (isStalePlan(err)) {
        prepared = false;
        return true;
      }
      return isTransient(err);
    },
  });

  return {
    schema: s,
    durability: options.durability ?? "fsync",
    now: given ? GIVEN_NOW_MS : NOW_MS,
    location,
    run(op, fn) {
      if (closed) return Promise.reject(new EffectgateError("EG_LEDGER_UNAVAILABLE", `the ledger ${location} was closed (could not ${op.what}). ${op.next}`));
      const running = (async () => {
        try {
          await prepare();
          if (op.writes && options.readOnly === true) {
            throw new EffectgateError("EG_LEDGER_UNAVAILABLE", `the ledger ${location} was opened read-only (could not ${op.what}). Nothing was changed.`);
          }
          return await fn();
        } catch (err) {
          throw fail(op, err);
        }
      })();
      if (op.writes) {
        writing.add(running);
        const done = () => void writing.delete(running);
        running.then(done, done);
      }
      return running;
    },
    query,
    write: (statement, values, row) => commits.add({ query: () => config(statement, values), alone: () => query(statement, values), row }),
    withClient,
    async close() {
      if (closed) return;
      closed = true;
      // Writes asked for before close are sent and committed first (they may still be waiting for the schema).
      await Promise.allSettled([...writing]);
      await commits.drain();
      if (owned) await pool.end();
      else pool.off("error", ignorePoolError);
    },
  };
}

/** A broken idle connection: the pool has already dropped it, and the next statement opens another (or fails EG_LEDGER_UNAVAILABLE). */
const ignorePoolError = (): void => undefined;

export function ownPool(connection: { connectionString: string; poolSize?: number; connectTimeoutMs?: number }): Pool {
  const pool = new pg.Pool({
    connectionString: connection.connectionString,
    max: connection.poolSize ?? 10,
    connectionTimeoutMillis: connection.connectTimeoutMs ?? 10_000,
    application_name: "effectgate",
    // A group-commit batch (BEGIN, its statements, COMMIT) is written at once and answered in one round trip.
    pipeline: true,
    // An idle pool does not keep a finished worker alive.
    allowExitOnIdle: true,
  });
  // Idle connections the server drops (a restart, a failover) are reported here; without a
  // listener node-postgres would crash the process. The pool replaces them; the next query
  // that cannot reach the database fails with EG_LEDGER_UNAVAILABLE.
  pool.on("error", ignorePoolError);
  return pool;
}
