/**
 * Every store contract suite (calls and checkpoints, sagas, governance, reconcile) on PostgreSQL,
 * three ways: as configured by default, with `durability: "process"`, and with statements not
 * prepared. The server is up before collection: `contractSuite` opens a ledger then.
 */
import * as vitest from "vitest";
import { postgresLedger } from "../../src/stores/postgres/index.js";
import { contractSuite } from "../../src/testing/contract-suite.js";
import { usePostgresNow } from "../support/pg.js";

const pg = await usePostgresNow();

contractSuite({ vitest, name: "postgres", open: () => postgresLedger({ connectionString: pg.url }, { schema: pg.freshSchema() }) });
contractSuite({
  vitest, name: "postgres (process durability)",
  open: () => postgresLedger({ connectionString: pg.url }, { schema: pg.freshSchema(), durability: "process" }),
});
contractSuite({
  vitest, name: "postgres (statements not prepared, as behind PgBouncer in transaction mode)",
  open: () => postgresLedger({ connectionString: pg.url }, { schema: pg.freshSchema(), preparedStatements: false }),
});
