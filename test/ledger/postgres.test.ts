import { postgresLedger } from "../../src/stores/postgres/index.js";
import { usePostgres } from "../support/pg.js";
import { runLedgerContract } from "./contract.js";

const pg = usePostgres();

runLedgerContract("postgres", { make: () => postgresLedger({ connectionString: pg.url }, { schema: pg.freshSchema() }) });
runLedgerContract("postgres (process durability)", {
  make: () => postgresLedger({ connectionString: pg.url }, { schema: pg.freshSchema(), durability: "process" }),
});
runLedgerContract("postgres (statements not prepared, as behind PgBouncer in transaction mode)", {
  make: () => postgresLedger({ connectionString: pg.url }, { schema: pg.freshSchema(), preparedStatements: false }),
});
