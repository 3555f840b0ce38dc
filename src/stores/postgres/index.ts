/**
 * The PostgreSQL ledger, for a fleet of agent workers on many machines sharing one ledger
 * (node-postgres, an optional peer dependency: `npm install pg`).
 *
 *   import { postgresLedger } from "effectgate/postgres";
 *   const ledger = postgresLedger({ connectionString: process.env.DATABASE_URL! });
 *
 * Guarantees, as for every store (see src/contracts):
 * - Claims are `INSERT … ON CONFLICT DO NOTHING`; every write is compare-and-set in one
 *   statement (or one transaction that locks the row it changes), so there are no
 *   read-modify-write races between workers.
 * - Leases and every time stored are judged by the DATABASE's clock, never a worker's.
 * - `durability: "fsync"` (default): each write commits as the server is configured
 *   (normally synchronous_commit=on: flushed to disk before the promise resolves).
 *   `"process"`: every store's writes commit with synchronous_commit=off, set for that one
 *   transaction only (your pool's sessions are not changed). A worker killed at any point
 *   loses nothing, but if the database server itself crashes, the last fraction of a second
 *   of commits can be lost.
 * - The database being unreachable is never read as "no record": the call fails with
 *   EG_LEDGER_UNAVAILABLE naming the database (never its password) and nothing runs.
 *   A damaged row fails with EG_LEDGER_CORRUPT naming the row.
 *
 * Given a connection string, the ledger owns its pool and `close()` ends it. Given your
 * `pool`, it is only borrowed: `close()` leaves it open, and the ledger never changes its
 * settings or listeners (give it an 'error' listener, as node-postgres asks, so a database
 * restart does not crash your process).
 *
 * The schema (default "effectgate") is created and migrated on first use, or ahead of time
 * with `migratePostgres` (`effectgate migrate --pg URL`).
 */
import type { Pool } from "pg";
import { EffectgateError } from "../../core/errors.js";
import type { Stores } from "../../contracts/stores.js";
import { DEFAULT_POSTGRES_SCHEMA, openPostgres, ownPool, quoteSchema, type PostgresConnection, type PostgresLedgerOptions } from "./access.js";
import { postgresCallStore, postgresCheckpoints } from "./calls.js";
import { describeTarget, isConnectionError, reasonOf, targetOf } from "./errors.js";
import { postgresGovernance } from "./governance.js";
import { applyMigrations, SCHEMA_VERSION, SchemaTooNew } from "./migrations.js";
import { postgresReconcileStore } from "./reconcile.js";
import { postgresSagaLog } from "./sagas.js";

export { DEFAULT_POSTGRES_SCHEMA, type PostgresConnection, type PostgresLedgerOptions } from "./access.js";
export { SCHEMA_VERSION as POSTGRES_SCHEMA_VERSION } from "./migrations.js";

export function postgresLedger(connection: PostgresConnection, options: PostgresLedgerOptions = {}): Stores {
  const access = openPostgres(connection, options);
  return {
    location: access.location,
    calls: postgresCallStore(access),
    checkpoints: postgresCheckpoints(access),
    sagas: postgresSagaLog(access),
    governance: postgresGovernance(access),
    reconcile: postgresReconcileStore(access),
    close: () => access.close(),
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

