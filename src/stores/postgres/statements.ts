/**
 * The PostgreSQL ledger's SQL, one statement per operation, for a schema name already
 * validated and quoted. Every statement names the tenant and key (the primary key) or walks
 * an index (see migrations.ts), and every write is compare-and-set in the statement itself.
 */

import { createHash } from "node:crypto";

/** Epoch milliseconds on the database clock. */
export const NOW_MS = `floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint`;

/**
 * The columns every statement returns, named rather than `*`: a prepared statement whose
 * result shape changed fails ("cached plan must not change result type"), so a worker still
 * running while a newer one adds a column in a migration keeps working.
 */
const COLUMNS = [
  "tenant", "key", "tool", "effect", "task", "tool_use_id", "fingerprint", "input", "input_redacted", "state", "result",
  "error", "owner", "lease_expires_at", "attempts", "version", "created_at", "updated_at",
] as const;
const COLS = COLUMNS.join(", ");
const R_COLS = COLUMNS.map((c) => `r.${c}`).join(", ");

/** A statement text and, for the per-call ones, the name it is prepared under on each connection. */
/**
 * `column = $n` conditions for the optional filters that are given, numbered from $1, with
 * their values; the caller appends further parameters (a LIMIT) after them.
 */
export function equalityFilters(pairs: readonly (readonly [column: string, value: string | undefined])[]): { filters: string[]; values: unknown[] } {
  const filters: string[] = [];
  const values: unknown[] = [];
  for (const [column, value] of pairs) {
    if (value === undefined) continue;
    values.push(value);
    filters.push(`${column} = $${values.length}`);
  }
  return { filters, values };
}

export interface Statement {
  readonly text: string;
  /** Derived from the text, so two ledgers (schemas, durabilities) on one pool never collide. */
  readonly name: string;
}

const named = (text: string): Statement => ({ text, name: `effectgate_${createHash("sha256").update(text).digest("hex").slice(0, 24)}` });

/**
 * The ledger's statements for one schema. `c` is the one-row clock (and commit mode) every write
 * joins. The per-call statements are prepared once per connection (named); the operator and
 * recovery queries (list, unsettled) are planned afresh with their values each time.
 */
export function postgresStatements(s: string, durability: "fsync" | "process") {
  const clock = `(SELECT ${NOW_MS} AS now${durability === "process" ? `, set_config('synchronous_commit', 'off', true) AS commit_mode` : ""}) AS c`;
  return {
    claim: named(`INSERT INTO ${s}.calls (tenant, key, tool, effect, task, tool_use_id, fingerprint, input, input_redacted, state,
         result, error, owner, lease_expires_at, attempts, version, created_at, updated_at)
       SELECT $1::text, $2::text, $3::text, $4::text, $5::text, $6::text, $7::text, $8::json, $9::boolean, 'in_progress', NULL, NULL,
         $10::text, c.now + $11::bigint, 1, 1, c.now, c.now
       FROM ${clock}
       ON CONFLICT (tenant, key) DO NOTHING RETURNING ${COLS}`),
    get: named(`SELECT ${COLS} FROM ${s}.calls WHERE tenant = $1 AND key = $2`),
    update: named(`UPDATE ${s}.calls AS r SET
         state = $4::text,
         result = CASE WHEN $5::boolean THEN $6::json ELSE r.result END,
         error = CASE WHEN $7::boolean THEN $8::text ELSE r.error END,
         owner = CASE WHEN $9::boolean THEN $10::text ELSE r.owner END,
         lease_expires_at = CASE
           WHEN (CASE WHEN $9::boolean THEN $10::text ELSE r.owner END) IS NULL THEN NULL
           WHEN $11::bigint IS NOT NULL THEN c.now + $11::bigint
           ELSE r.lease_expires_at END,
         attempts = r.attempts + $12::integer,
         version = r.version + 1,
         updated_at = c.now
       FROM ${clock}
       WHERE r.tenant = $1 AND r.key = $2 AND r.version = $3 AND r.state = ANY($13::text[])
       RETURNING ${R_COLS}`),
    takeOver: named(`UPDATE ${s}.calls AS r SET owner = $4, lease_expires_at = c.now + $5::bigint, version = r.version + 1, updated_at = c.now
       FROM ${clock}
       WHERE r.tenant = $1 AND r.key = $2 AND r.version = $3 AND r.state IN ('in_progress', 'uncertain')
         AND ($6::boolean OR r.owner IS NULL OR r.lease_expires_at IS NULL OR r.lease_expires_at <= c.now)
       RETURNING ${R_COLS}`),
    renew: named(`UPDATE ${s}.calls AS r SET lease_expires_at = c.now + $5::bigint
       FROM ${clock}
       WHERE r.tenant = $1 AND r.key = $2 AND r.version = $3 AND r.owner = $4 AND r.state IN ('in_progress', 'uncertain')`),
    remove: named(`DELETE FROM ${s}.calls AS r USING ${clock} WHERE r.tenant = $1 AND r.key = $2 AND r.version = $3`),
    // Each branch walks an index on state (the partial calls_unsettled, or calls_by_state for every in_progress):
    // cost follows the unsettled calls, not the ledger.
    unsettled: `(SELECT ${R_COLS} FROM ${s}.calls AS r WHERE r.state = 'uncertain' LIMIT $2)
       UNION ALL
       (SELECT ${R_COLS} FROM ${s}.calls AS r, ${clock}
        WHERE r.state = 'in_progress' AND ($1::boolean OR r.lease_expires_at IS NULL OR r.lease_expires_at <= c.now) LIMIT $2)
       LIMIT $2`,
    putCheckpoint: named(`INSERT INTO ${s}.checkpoints (tenant, id, data, updated_at) SELECT $1::text, $2::text, $3::text, c.now FROM ${clock}
       ON CONFLICT (tenant, id) DO UPDATE SET data = excluded.data, updated_at = excluded.updated_at`),
    getCheckpoint: named(`SELECT data FROM ${s}.checkpoints WHERE tenant = $1 AND id = $2`),
    now: named(`SELECT ${NOW_MS} AS now`),
    // Reconciliation: walks calls_changes (migration 2) from the cursor, so the cost is the rows returned.
    changes: named(`SELECT ${COLS} FROM ${s}.calls
       WHERE tool = $1 AND state <> 'in_progress' AND (updated_at, tenant, key) > ($2::bigint, $3::text, $4::text) AND updated_at <= $5::bigint
       ORDER BY updated_at, tenant, key LIMIT $6`),
    /** `filters` are "column = $n" terms; the limit is parameter $limitParam. */
    list: (filters: readonly string[], limitParam: number) =>
      `SELECT ${COLS} FROM ${s}.calls ${filters.length > 0 ? `WHERE ${filters.join(" AND ")}` : ""} ORDER BY created_at, tenant, key LIMIT $${limitParam}`,
  };
}
