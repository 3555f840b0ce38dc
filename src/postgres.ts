/**
 * effectgate/postgres: the PostgreSQL ledger, for a fleet of agent workers sharing one ledger.
 * Needs the `pg` package (an optional peer dependency): `npm install pg`.
 *
 *   import { createGate } from "effectgate";
 *   import { postgresLedger } from "effectgate/postgres";
 *   const gate = createGate({ tools, ledger: postgresLedger({ connectionString: process.env.DATABASE_URL! }) });
 */
export {
  postgresLedger,
  migratePostgres,
  DEFAULT_POSTGRES_SCHEMA,
  POSTGRES_SCHEMA_VERSION,
  type PostgresConnection,
  type PostgresLedgerOptions,
} from "./stores/postgres/index.js";
