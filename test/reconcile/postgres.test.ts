import { describe, expect, it } from "vitest";
import { migratePostgres, postgresLedger } from "../../src/stores/postgres/index.js";
import { postgresDialect } from "../../src/stores/postgres/statements.js";
import { callStatements } from "../../src/stores/sql/call-statements.js";
import { positional } from "../../src/stores/sql/dialect.js";
import { postgresReconcileStatements } from "../../src/stores/postgres/reconcile.js";
import { usePostgres } from "../support/pg.js";
import { runDriftScenario } from "./drift.js";
import { runReceiptSuite } from "./receipts.js";

const pg = usePostgres();
const make = () => postgresLedger({ connectionString: pg.url }, { schema: pg.freshSchema() });

// The reconcile contract suite runs on PostgreSQL in test/ledger/postgres.test.ts.
runDriftScenario("postgres", make);
runReceiptSuite("postgres", make);

interface PlanNode {
  readonly "Node Type": string;
  readonly "Relation Name"?: string;
  readonly "Index Name"?: string;
  readonly Plans?: readonly PlanNode[];
}
const nodes = (node: PlanNode): PlanNode[] => [node, ...(node.Plans ?? []).flatMap(nodes)];

describe("postgres reconciliation: a scan's reads walk indexes, whatever the ledger's size", () => {
  it("listing changes, open findings, and confirmations by key or ref use an index on 50 000 records", async () => {
    const schema = pg.freshSchema();
    await migratePostgres(pg.url, schema);
    const s = `"${schema}"`;
    await pg.sql(
      `INSERT INTO ${s}.calls (tenant, key, tool, effect, task, tool_use_id, fingerprint, intent, input, input_redacted, state,
         result, error, owner, lease_expires_at, attempts, version, created_at, updated_at)
       SELECT 't' || (i % 50), 'k' || i, CASE WHEN i % 2 = 0 THEN 'charge_card' ELSE 'send_email' END, 'write', 'task', 'k' || i, 'fp', 'fp', '{}', false,
         CASE WHEN i % 1000 = 0 THEN 'in_progress' ELSE 'completed' END, '{}', NULL, NULL, NULL, 1, 2, i, i
       FROM generate_series(1, 50000) AS i`,
    );
    await pg.sql(
      `INSERT INTO ${s}.reconcile_findings (id, kind, tool, tenant, key, status, source, summary, evidence, first_seen_at, last_seen_at, times_seen)
       SELECT 'f_' || i, 'mismatch', 'charge_card', 't1', 'k' || i, CASE WHEN i % 500 = 0 THEN 'open' ELSE 'resolved' END, 'scan', 's', '{}', i, i, 1
       FROM generate_series(1, 20000) AS i`,
    );
    await pg.sql(
      `INSERT INTO ${s}.reconcile_confirmations (tool, tenant, key, ref, source, fields, at)
       SELECT 'charge_card', 't' || (i % 50), 'k' || i, 'ch_' || i, 'scan', NULL, i FROM generate_series(1, 50000) AS i`,
    );
    for (const table of ["calls", "reconcile_findings", "reconcile_confirmations"]) await pg.sql(`ANALYZE ${s}.${table}`);
    const ledgerSql = callStatements(postgresDialect(s, "fsync"));
    const sql = postgresReconcileStatements(s, "fsync");
    const plans: Record<string, [string, unknown[], string]> = {
      changes: [ledgerSql.changes.text, positional(ledgerSql.changes, {
        tool: "charge_card", at: 49_900, after_tenant: "t1", after_key: "k1", until: 50_000, limit: 100,
      }), "calls"],
      openFindings: [sql.listFindings(["status = 'open'"], 1), [100], "reconcile_findings"],
      findingsByKey: [sql.listFindings(["status = 'open'", "tool = $1", "key = $2"], 3), ["charge_card", "k500", 100], "reconcile_findings"],
      confirmationsByKey: [sql.confirmationsByKey.text, ["charge_card", "t1", "k1"], "reconcile_confirmations"],
      confirmationsByRef: [sql.confirmationsByRef.text, ["charge_card", "ch_1"], "reconcile_confirmations"],
    };
    for (const [name, [text, values, relation]] of Object.entries(plans)) {
      const plan = (await pg.sql(`EXPLAIN (FORMAT JSON) ${text}`, values)).rows[0]["QUERY PLAN"][0].Plan as PlanNode;
      // A bitmap heap scan reads the rows its Bitmap Index Scan child found: an index too.
      const indexOf = (n: PlanNode) => n["Index Name"] ?? nodes(n).find((c) => c["Node Type"] === "Bitmap Index Scan")?.["Index Name"];
      const scans = nodes(plan).filter((n) => n["Relation Name"] === relation && n["Node Type"].endsWith("Scan"))
        .map((n) => `${n["Node Type"]}${indexOf(n) ? ` Index ${indexOf(n)}` : ""}`);
      expect(scans.length, `${name} reads ${relation}`).toBeGreaterThan(0);
      expect(scans.filter((scan) => !scan.includes("Index")), `${name}: ${scans.join(", ")}`).toEqual([]);
      if (name === "changes") expect(scans.join(", ")).toContain("calls_changes");
      if (name === "confirmationsByRef") expect(scans.join(", ")).toContain("reconcile_confirmations_by_ref");
    }
  });
});
