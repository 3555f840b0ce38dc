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

const skip = [{
  reason: "PostgreSQL text cannot hold U+0000 (error 22021): a tenant or key containing NUL is refused with EG_BAD_CONTENT (postgres-store.test.ts), " +
    "so it can never be mistaken for another record (and the gate refuses a NUL tenant before it reaches a store)",
  tests: ["tenant and key never run together: tenant a\\u0000b + key c and tenant a + key b\\u0000c are two records"],
}];

contractSuite({ vitest, name: "postgres", skip, open: () => postgresLedger({ connectionString: pg.url }, { schema: pg.freshSchema() }) });
contractSuite({
  vitest, name: "postgres (process durability)", skip,
  open: () => postgresLedger({ connectionString: pg.url }, { schema: pg.freshSchema(), durability: "process" }),
});
contractSuite({
  vitest, name: "postgres (statements not prepared, as behind PgBouncer in transaction mode)", skip,
  open: () => postgresLedger({ connectionString: pg.url }, { schema: pg.freshSchema(), preparedStatements: false }),
});
