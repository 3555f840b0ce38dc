/**
 * The kill switches covering a call's (tenant, agent), '' standing for "every" in either column:
 * four point lookups on the (tenant, agent) primary key, in key order, as one UNION ALL. Not
 * `tenant IN ('', …) AND agent IN ('', …)`: SQLite builds an ephemeral table for each IN list on
 * every execution (5 µs of the claim's 74 µs median in the gate, docs/BENCHMARKS.md).
 * `tenant` and `agent` are the statement's placeholders for them.
 */
export function killSwitchLookups(table: string, columns: string, tenant: string, agent: string): string {
  return ["''", tenant]
    .flatMap((t) => ["''", agent].map((a) => `SELECT ${columns} FROM ${table} WHERE tenant = ${t} AND agent = ${a}`))
    .join(" UNION ALL ");
}
