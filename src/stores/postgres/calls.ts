/**
 * The PostgreSQL ledger, for a fleet of agent workers on many machines sharing one ledger
 * (node-postgres, an optional peer dependency: `npm install pg`).
 *
 *   import { postgresLedger } from "effectgate/postgres";
 *   const ledger = postgresLedger({ connectionString: process.env.DATABASE_URL! });
 *
 * Guarantees, as for every store (see contract.ts):
 * - A claim is one `INSERT … ON CONFLICT DO NOTHING`: of any number of workers claiming one
 *   key at once, exactly one gets it; the others read the winner's record.
 * - Every write is one statement, compare-and-set on the record's version and on the states
 *   the move is allowed from (src/core/states.ts), so there are no read-modify-write races.
 * - Leases and every time stored are judged by the DATABASE's clock, never a worker's, so
 *   workers whose clocks disagree still agree on whose lease ran out.
 * - `durability: "fsync"` (default): each write commits as the server is configured
 *   (normally synchronous_commit=on: flushed to disk before the promise resolves).
 *   `"process"`: each of the ledger's writes commits with synchronous_commit=off, set for
 *   that one transaction only (your pool's sessions are not changed). A worker killed at any
 *   point loses nothing, but if the database server itself crashes, the last fraction of a
 *   second of commits can be lost.
 * - The database being unreachable is never read as "no record": the call fails with
 *   EG_LEDGER_UNAVAILABLE naming the database (never its password) and nothing runs.
 *   A damaged row fails with EG_LEDGER_CORRUPT naming the record.
 *
 * Given a connection string, the ledger owns its pool and `close()` ends it. Given your
 * `pool`, it is only borrowed: `close()` leaves it open, and the ledger never changes its
 * settings or listeners (give it an 'error' listener, as node-postgres asks, so a database
 * restart does not crash your process).
 *
 * The schema (default "effectgate") is created and migrated on first use, or ahead of time
 * with `migratePostgres` (`effectgate migrate --pg URL`).
 */
import pg, { type Pool, type QueryResult } from "pg";
import { EffectgateError } from "../../core/errors.js";
import { allowedFrom, assertTransition, isCallState } from "../../core/states.js";
import type { CallRecord, ClaimRequest, ClaimResult, Ledger, ListQuery, RecordUpdate, TakeOverRequest } from "../../contracts/calls.js";
import { describeTarget, isConnectionError, isDamageError, isPoolTimeout, isStalePlan, reasonOf, targetOf, type Target } from "./errors.js";
import { applyMigrations, readSchemaVersion, SCHEMA_VERSION, SchemaTooNew } from "./migrations.js";
import { decodeCall, decodeMillis, RAW_TYPES, RowDamage, type RawRow } from "./rows.js";
import { equalityFilters, NOW_MS, postgresStatements, type Statement } from "./statements.js";
import { postgresReconcileStore } from "./reconcile.js";
import { postgresSagaLog } from "./sagas.js";
import { postgresGovernance } from "./governance.js";

export { SCHEMA_VERSION as POSTGRES_SCHEMA_VERSION } from "./migrations.js";

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
}

export const DEFAULT_POSTGRES_SCHEMA = "effectgate";

const SCHEMA_NAME = /^[a-z_][a-z0-9_]{0,62}$/;

/** Validates a schema name and returns it quoted for SQL. */
function quoteSchema(schema: string): string {
  if (!SCHEMA_NAME.test(schema) || schema.startsWith("pg_")) {
    throw new TypeError(
      `effectgate: ${JSON.stringify(schema)} is not a usable schema name for the ledger: use lower-case letters, digits and _, ` +
        `starting with a letter or _, at most 63 characters, not starting with pg_`,
    );
  }
  return `"${schema}"`;
}

/** What an operation was doing, and what its failure means for the call, for messages. */
interface Op {
  readonly what: string;
  readonly next: string;
  readonly writes: boolean;
}

const NOTHING_RAN = "Nothing was executed for this call; replay it once the database is reachable.";
const MAY_BE_UNRECORDED = "The change may not have been recorded; a replay or gate.recover() settles the call from what the database holds.";
const TRY_AGAIN = "Nothing was changed; try again once the database is reachable.";
const SAGA_NEXT = "The saga log may not be up to date: run the saga again, or gate.recover(), once the database is reachable.";

const OPS = {
  claim: { what: "claim a call", next: NOTHING_RAN, writes: true },
  get: { what: "read a call", next: NOTHING_RAN, writes: false },
  update: { what: "record a call's new state", next: MAY_BE_UNRECORDED, writes: true },
  takeOver: { what: "take over a call", next: NOTHING_RAN, writes: true },
  renew: { what: "renew a lease", next: MAY_BE_UNRECORDED, writes: true },
  remove: { what: "remove a record", next: TRY_AGAIN, writes: true },
  list: { what: "list calls", next: TRY_AGAIN, writes: false },
  unsettled: { what: "list unsettled calls", next: TRY_AGAIN, writes: false },
  now: { what: "read the database clock", next: NOTHING_RAN, writes: false },
  putCheckpoint: { what: "save a checkpoint", next: TRY_AGAIN, writes: true },
  getCheckpoint: { what: "read a checkpoint", next: TRY_AGAIN, writes: false },
  changes: { what: "list changed calls", next: TRY_AGAIN, writes: false },
} as const satisfies Record<string, Op>;

export function postgresLedger(connection: PostgresConnection, options: PostgresLedgerOptions = {}): Ledger {
  const schema = options.schema ?? DEFAULT_POSTGRES_SCHEMA;
  const s = quoteSchema(schema);
  const owned = !("pool" in connection);
  const target: Target = "pool" in connection ? targetOf(connection.pool.options) : targetOf(connection);
  const where = describeTarget(target);
  const location = `${where} schema ${schema}`;
  const pool: Pool = "pool" in connection ? connection.pool : ownPool(connection);
  const sql = postgresStatements(s, options.durability ?? "fsync");
  let ready: Promise<void> | undefined;
  let closed = false;

  function fail(op: Op, err: unknown): EffectgateError {
    if (err instanceof EffectgateError) return err;
    if (err instanceof RowDamage) {
      return new EffectgateError(
        "EG_LEDGER_CORRUPT",
        `the ledger ${location} holds a damaged record: ${err.message}. It was left as it is and no call was executed for it; ` +
          `other records are unaffected. Inspect it with: SELECT * FROM ${s}.calls WHERE tenant = ${literal(err.tenant)} AND key = ${literal(err.key)}`,
        { cause: err },
      );
    }
    if (isDamageError(err)) {
      return new EffectgateError(
        "EG_LEDGER_CORRUPT",
        `the database ${where} reports damaged ledger data in schema ${schema} (could not ${op.what}: ${reasonOf(err)}). ` +
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

  function prepare(): Promise<void> {
    ready ??= (async () => {
      const client = await pool.connect();
      let broken: unknown;
      try {
        if (options.readOnly === true || options.create === false) {
          const version = await readSchemaVersion(client, s);
          if (version === 0) {
            throw new EffectgateError(
              "EG_LEDGER_UNAVAILABLE",
              `there is no effectgate ledger in schema ${schema} of ${where} (nothing was created). Check the URL and schema, ` +
                `or create it with \`effectgate migrate --pg URL\` (or by opening it once without readOnly / create: false).`,
            );
          }
          if (version > SCHEMA_VERSION) throw new SchemaTooNew(version);
          if (options.readOnly === true && version < SCHEMA_VERSION) {
            throw new EffectgateError(
              "EG_LEDGER_UNAVAILABLE",
              `the ledger ${location} has schema version ${version}; migrate it to ${SCHEMA_VERSION} with \`effectgate migrate --pg URL\` (read-only opening changes nothing)`,
            );
          }
        }
        if (options.readOnly !== true) await applyMigrations(client, schema, s);
      } catch (err) {
        broken = isConnectionError(err) ? err : undefined;
        if (err instanceof SchemaTooNew) throw tooNew(err.found);
        throw err;
      } finally {
        client.release(broken instanceof Error ? broken : undefined);
      }
    })().catch((err: unknown) => {
      // Not cached: a database that was down at start is used once it is back.
      ready = undefined;
      throw err;
    });
    return ready;
  }

  const tooNew = (found: number) =>
    new EffectgateError(
      "EG_LEDGER_TOO_NEW",
      `the ledger ${location} has schema version ${found}, newer than this effectgate knows (${SCHEMA_VERSION}). Upgrade effectgate; the database was not touched.`,
    );

  /** Runs one operation: ledger ready, errors mapped to the contract's codes. */
  async function run<T>(op: Op, fn: () => Promise<T>): Promise<T> {
    if (closed) throw new EffectgateError("EG_LEDGER_UNAVAILABLE", `the ledger ${location} was closed (could not ${op.what}). ${op.next}`);
    try {
      await prepare();
      if (op.writes && options.readOnly === true) {
        throw new EffectgateError("EG_LEDGER_UNAVAILABLE", `the ledger ${location} was opened read-only (could not ${op.what}). Nothing was changed.`);
      }
      return await fn();
    } catch (err) {
      throw fail(op, err);
    }
  }

  let prepared = options.preparedStatements !== false;
  const query = async (statement: Statement | string, values: readonly unknown[] = []): Promise<QueryResult<RawRow>> => {
    const named = prepared && typeof statement !== "string";
    const text = typeof statement === "string" ? statement : statement.text;
    try {
      return await pool.query<RawRow>({ text, values: values as unknown[], types: RAW_TYPES, ...(named ? { name: statement.name } : {}) });
    } catch (err) {
      // A column's type changed under a statement prepared on this connection (someone altered the table, or a
      // newer effectgate migrated it): the server refused it before running it, so it is safe to send again
      // unprepared, and this ledger stops preparing statements.
      if (!named || !isStalePlan(err)) throw err;
      prepared = false;
      return pool.query<RawRow>({ text, values: values as unknown[], types: RAW_TYPES });
    }
  };

  const one = async (statement: Statement, values: readonly unknown[]): Promise<CallRecord | undefined> => {
    const row = (await query(statement, values)).rows[0];
    return row && decodeCall(row);
  };

  return {
    location,
    claim: (request: ClaimRequest) =>
      run(OPS.claim, async (): Promise<ClaimResult> => {
        const values = [
          request.tenant, request.key, request.tool, request.effect, request.task, request.toolUseId, request.fingerprint,
          JSON.stringify(request.input), request.inputRedacted, request.owner, request.leaseMs,
        ];
        // A key removed between our INSERT and SELECT (an expired idempotency key) is claimable again: try once more.
        for (let tries = 0; tries < 3; tries++) {
          const inserted = await one(sql.claim, values);
          if (inserted) return { claimed: true, record: inserted };
          const existing = await one(sql.get, [request.tenant, request.key]);
          if (existing) return { claimed: false, record: existing };
        }
        throw new Error(`the claim of ${request.tenant}/${request.key} conflicted three times but its record kept vanishing`);
      }),
    get: (tenant, key) => run(OPS.get, () => one(sql.get, [tenant, key])),
    update: (tenant: string, key: string, version: number, update: RecordUpdate) =>
      run(OPS.update, async () => {
        const written = await one(sql.update, [
          tenant, key, version, update.state,
          update.result !== undefined, update.result === undefined || update.result === null ? null : JSON.stringify(update.result),
          update.error !== undefined, update.error ?? null,
          update.owner !== undefined, update.owner ?? null,
          update.leaseMs ?? null, update.countAttempt === true ? 1 : 0,
          allowedFrom(update.state),
        ]);
        if (written) return written;
        // Not written: a stale version (normal under races), or a move the state table forbids (a bug: say so).
        const current = await one(sql.get, [tenant, key]);
        if (current && current.version === version && isCallState(current.state)) assertTransition(key, current.state, update.state);
        return undefined;
      }),
    takeOver: (request: TakeOverRequest) =>
      run(OPS.takeOver, () =>
        one(sql.takeOver, [request.tenant, request.key, request.version, request.owner, request.leaseMs, request.holderIsDead === true])),
    renewLease: (tenant, key, version, owner, leaseMs) =>
      run(OPS.renew, async () => (await query(sql.renew, [tenant, key, version, owner, leaseMs])).rowCount === 1),
    remove: (tenant, key, version) => run(OPS.remove, async () => (await query(sql.remove, [tenant, key, version])).rowCount === 1),
    list: (q: ListQuery = {}) =>
      run(OPS.list, async () => {
        const { filters, values } = equalityFilters([["tenant", q.tenant], ["state", q.state], ["tool", q.tool], ["key", q.key]]);
        values.push(q.limit ?? 100);
        return (await query(sql.list(filters, values.length), values)).rows.map(decodeCall);
      }),
    listUnsettled: (opts = {}) =>
      run(OPS.unsettled, async () => (await query(sql.unsettled, [opts.includeLive === true, opts.limit ?? 100])).rows.map(decodeCall)),
    listChangedSince: (q) =>
      run(OPS.changes, async () => (await query(sql.changes, [
        q.tool, q.after?.at ?? Number.MIN_SAFE_INTEGER, q.after?.tenant ?? "", q.after?.key ?? "", q.until ?? Number.MAX_SAFE_INTEGER, q.limit ?? 100,
      ])).rows.map(decodeCall)),
    governance: postgresGovernance(s, {
      location,
      run: (what, writes, fn) => run({ what, next: NOTHING_RAN, writes }, fn),
      query: (statement, values) => query(statement, values),
    }),
    sagas: postgresSagaLog({
      schema: s,
      durability: options.durability ?? "fsync",
      location,
      run: (what, writes, fn) => run({ what, next: SAGA_NEXT, writes }, fn),
      connect: () => pool.connect(),
    }),
    reconcile: postgresReconcileStore(s, {
      nowSql: NOW_MS,
      location,
      run: (what, writes, fn) => run({ what, next: TRY_AGAIN, writes }, fn),
      query: (statement, values) => query(statement, values),
    }),
    now: () => run(OPS.now, async () => decodeMillis((await query(sql.now)).rows[0]?.now)),
    putCheckpoint: (tenant, id, data) =>
      run(OPS.putCheckpoint, async () => {
        await query(sql.putCheckpoint, [tenant, id, data]);
      }),
    getCheckpoint: (tenant, id) =>
      run(OPS.getCheckpoint, async () => (await query(sql.getCheckpoint, [tenant, id])).rows[0]?.data ?? undefined),
    async close() {
      if (closed) return;
      closed = true;
      if (owned) await pool.end();
    },
  };
}

/**
 * Creates or migrates the ledger's schema ahead of time (what `effectgate migrate --pg URL`
 * runs), so workers start without DDL rights. Safe to run while workers run, and from many
 * places at once. Given a pool, it is borrowed and left open.
 */
export async function migratePostgres(
  connection: string | Pool,
  schema: string = DEFAULT_POSTGRES_SCHEMA,
): Promise<{ readonly schema: string; readonly from: number; readonly to: number }> {
  const s = quoteSchema(schema);
  const owned = typeof connection === "string";
  const pool = owned ? ownPool({ connectionString: connection, poolSize: 1 }) : connection;
  const where = describeTarget(owned ? targetOf({ connectionString: connection }) : targetOf(connection.options));
  try {
    const client = await pool.connect();
    try {
      return { schema, ...(await applyMigrations(client, schema, s)) };
    } finally {
      client.release();
    }
  } catch (err) {
    if (err instanceof SchemaTooNew) {
      throw new EffectgateError(
        "EG_LEDGER_TOO_NEW",
        `the ledger ${where} schema ${schema} has schema version ${err.found}, newer than this effectgate knows (${SCHEMA_VERSION}). Upgrade effectgate; the database was not touched.`,
      );
    }
    const reason = reasonOf(err);
    const problem = isConnectionError(err) ? `cannot reach the ledger database ${where}` : `could not migrate the ledger ${where} schema ${schema}`;
    throw new EffectgateError("EG_LEDGER_UNAVAILABLE", `${problem} (${reason}). Nothing was changed.`, { cause: err });
  } finally {
    if (owned) await pool.end();
  }
}

function ownPool(connection: { connectionString: string; poolSize?: number; connectTimeoutMs?: number }): Pool {
  const pool = new pg.Pool({
    connectionString: connection.connectionString,
    max: connection.poolSize ?? 10,
    connectionTimeoutMillis: connection.connectTimeoutMs ?? 10_000,
    application_name: "effectgate",
    // An idle pool does not keep a finished worker alive.
    allowExitOnIdle: true,
  });
  // Idle connections the server drops (a restart, a failover) are reported here; without a
  // listener node-postgres would crash the process. The pool replaces them; the next query
  // that cannot reach the database fails with EG_LEDGER_UNAVAILABLE.
  pool.on("error", () => undefined);
  return pool;
}

function literal(value: string): string {
  return `'${value.replaceAll("'", "''")}'`;
}
