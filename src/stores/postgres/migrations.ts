/**
 * The PostgreSQL ledger's schema, as append-only migrations recorded in `schema_version`.
 * Never edit a shipped migration: add the next one. A database whose schema is newer than
 * this code knows is refused by name (EG_LEDGER_TOO_NEW) and left untouched.
 */
import type { PoolClient } from "pg";

export interface Migration {
  readonly version: number;
  readonly description: string;
  /** The statements, given the schema name already quoted. */
  readonly sql: (schema: string) => string;
}

/**
 * Notes on the first schema:
 * - `input` and `result` are `json`, not `jsonb`: jsonb reorders object keys and refuses
 *   "\u0000", so a replayed result would not be the first answer verbatim (the gate renders
 *   the stored result with JSON.stringify) and some real tool results could not be recorded.
 *   `json` still checks the text is JSON; cast to jsonb in queries that need operators.
 * - Times are epoch milliseconds (bigint) on the database clock, like the other stores.
 * - tenant and key use the "C" collation: byte order like SQLite's, and cheaper comparisons.
 * - Indexes: the primary key serves every per-call operation (claim, get, update, take-over,
 *   renew, remove); `calls_unsettled` is partial, so a recovery pass costs the unsettled
 *   calls, not the ledger; `calls_by_key` finds one key in every tenant; `calls_by_state`
 *   lists a state oldest first.
 */
export const MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    description: "calls and checkpoints",
    sql: (s) => `
      CREATE TABLE ${s}.calls (
        tenant text COLLATE "C" NOT NULL,
        key text COLLATE "C" NOT NULL,
        tool text NOT NULL,
        effect text NOT NULL,
        task text NOT NULL,
        tool_use_id text NOT NULL,
        fingerprint text NOT NULL,
        input json NOT NULL,
        input_redacted boolean NOT NULL,
        state text NOT NULL,
        result json,
        error text,
        owner text,
        lease_expires_at bigint,
        attempts integer NOT NULL,
        version integer NOT NULL,
        created_at bigint NOT NULL,
        updated_at bigint NOT NULL,
        PRIMARY KEY (tenant, key)
      );
      CREATE INDEX calls_unsettled ON ${s}.calls (state, lease_expires_at) WHERE state IN ('in_progress', 'uncertain');
      CREATE INDEX calls_by_state ON ${s}.calls (state, created_at);
      CREATE INDEX calls_by_key ON ${s}.calls (key);
      CREATE TABLE ${s}.checkpoints (
        tenant text COLLATE "C" NOT NULL,
        id text COLLATE "C" NOT NULL,
        data text NOT NULL,
        updated_at bigint NOT NULL,
        PRIMARY KEY (tenant, id)
      );`,
  },
  {
    // Reconciliation (src/reconcile/postgres.ts). `calls_changes` lists a tool's records in change
    // order for incremental scans; partial, so a claim (still in_progress) adds no entry. Evidence,
    // fields and records are `json` for the same fidelity reasons as `calls.result`.
    version: 2,
    description: "reconciliation",
    sql: (s) => `
      CREATE INDEX calls_changes ON ${s}.calls (tool, updated_at, tenant, key) WHERE state <> 'in_progress';
      CREATE TABLE ${s}.reconcile_findings (
        id text COLLATE "C" PRIMARY KEY,
        kind text NOT NULL,
        tool text NOT NULL,
        tenant text COLLATE "C",
        key text COLLATE "C" NOT NULL,
        status text NOT NULL,
        source text NOT NULL,
        summary text NOT NULL,
        evidence json NOT NULL,
        first_seen_at bigint NOT NULL,
        last_seen_at bigint NOT NULL,
        times_seen integer NOT NULL,
        resolved_at bigint,
        resolution text,
        resolved_by text
      );
      CREATE INDEX reconcile_findings_open ON ${s}.reconcile_findings (first_seen_at, id) WHERE status = 'open';
      CREATE INDEX reconcile_findings_by_key ON ${s}.reconcile_findings (key);
      CREATE TABLE ${s}.reconcile_confirmations (
        tool text NOT NULL,
        tenant text COLLATE "C" NOT NULL,
        key text COLLATE "C" NOT NULL,
        ref text COLLATE "C" NOT NULL,
        source text NOT NULL,
        fields json,
        at bigint NOT NULL,
        PRIMARY KEY (tool, tenant, key, ref)
      );
      CREATE INDEX reconcile_confirmations_by_ref ON ${s}.reconcile_confirmations (tool, ref);
      CREATE TABLE ${s}.reconcile_receipts (
        id text COLLATE "C" PRIMARY KEY,
        digest text NOT NULL,
        tool text NOT NULL,
        record json NOT NULL,
        received_at bigint NOT NULL,
        processed_at bigint,
        outcome json
      );
      CREATE TABLE ${s}.reconcile_cursors (
        name text COLLATE "C" PRIMARY KEY,
        value json NOT NULL,
        updated_at bigint NOT NULL
      );`,
  },
  {
    // Sagas (sagas.ts). `n` orders sagas by creation (list, oldest first);
    // `sagas_active` is partial, so a recovery pass costs the running and compensating sagas, not the
    // log; steps and history are read per saga through their primary keys. Every write to a saga
    // locks its row first, which serialises step positions and history sequence numbers.
    version: 3,
    description: "sagas",
    sql: (s) => `
      CREATE TABLE ${s}.sagas (
        n bigint GENERATED ALWAYS AS IDENTITY,
        tenant text COLLATE "C" NOT NULL,
        saga_id text COLLATE "C" NOT NULL,
        task text NOT NULL,
        state text NOT NULL,
        on_abandon text NOT NULL,
        owner text,
        lease_expires_at bigint,
        reason text,
        resolution text,
        version integer NOT NULL,
        created_at bigint NOT NULL,
        updated_at bigint NOT NULL,
        PRIMARY KEY (tenant, saga_id)
      );
      CREATE INDEX sagas_active ON ${s}.sagas (n) WHERE state IN ('running', 'compensating');
      CREATE INDEX sagas_by_id ON ${s}.sagas (saga_id);
      CREATE INDEX sagas_by_state ON ${s}.sagas (state, n);
      CREATE INDEX sagas_order ON ${s}.sagas (n);
      CREATE TABLE ${s}.saga_steps (
        tenant text COLLATE "C" NOT NULL,
        saga_id text COLLATE "C" NOT NULL,
        name text COLLATE "C" NOT NULL,
        position integer NOT NULL,
        tool text NOT NULL,
        effect text NOT NULL,
        key text NOT NULL,
        input json NOT NULL,
        input_redacted boolean NOT NULL,
        fingerprint text NOT NULL,
        compensable boolean NOT NULL,
        compensation json,
        approval text NOT NULL,
        state text NOT NULL,
        result json,
        error text,
        compensation_key text,
        version integer NOT NULL,
        created_at bigint NOT NULL,
        updated_at bigint NOT NULL,
        PRIMARY KEY (tenant, saga_id, name),
        UNIQUE (tenant, saga_id, position)
      );
      CREATE TABLE ${s}.saga_events (
        tenant text COLLATE "C" NOT NULL,
        saga_id text COLLATE "C" NOT NULL,
        seq integer NOT NULL,
        at bigint NOT NULL,
        kind text NOT NULL,
        step text,
        message text NOT NULL,
        data json,
        PRIMARY KEY (tenant, saga_id, seq)
      );`,
  },
  {
    // Governance (governance.ts): kill switches, quota counters and the calls already
    // charged, rate windows and breakers, approvals, and the two functions that charge a quota and
    // count a rate window atomically in one statement.
    version: 4,
    description: "governance",
    sql: (s) => governanceMigrationSql(s),
  },
  {
    // The one list order of every store (contracts/call-rules.ts \`listOrder\`): oldest first, ties by tenant and key.
    version: 5,
    description: "list order",
    sql: (s) => `CREATE INDEX calls_by_created ON ${s}.calls (created_at, tenant, key);`,
  },
  {
    // Fencing tokens, the time the tool was last started (the settle horizon counts from it) and the
    // claim token a remove compares. A call recorded before it counts as started when last written.
    version: 6,
    description: "fences and send times",
    sql: (s) => `
      ALTER TABLE ${s}.calls ADD COLUMN fence bigint NOT NULL DEFAULT 1;
      ALTER TABLE ${s}.calls ADD COLUMN started_at bigint NOT NULL DEFAULT 0;
      ALTER TABLE ${s}.calls ADD COLUMN claim_token text NOT NULL DEFAULT '';
      UPDATE ${s}.calls SET started_at = updated_at, claim_token = md5(random()::text || clock_timestamp()::text || key);`,
  },
  {
    // Ledger search by task (ListQuery) and intent windows (ToolSpec.repeats): a task's calls in the
    // list order. One index, not one per filter: each is one more B-tree page written per claim.
    version: 7,
    description: "call search and intent windows",
    sql: (s) => `CREATE INDEX calls_by_task ON ${s}.calls (tenant, task, created_at, key);`,
  },
  {
    // A call's approval requests (ApprovalQuery.key: the console's call detail), without reading
    // every request of its tenant. Written once per request, so it costs the gate nothing per call.
    version: 8,
    description: "approval requests by key",
    sql: (s) => `CREATE INDEX approvals_by_key ON ${s}.approvals (key);`,
  },
  {
    // A call's intent (the fingerprint of the input its tool runs with), which intent windows
    // compare. A call recorded before it gets its fingerprint (once, here: the repeat check stays one
    // plain comparison on calls_by_task).
    version: 9,
    description: "call intents",
    sql: (s) => `
      ALTER TABLE ${s}.calls ADD COLUMN intent text NOT NULL DEFAULT '';
      UPDATE ${s}.calls SET intent = fingerprint;
      ALTER TABLE ${s}.calls ALTER COLUMN intent DROP DEFAULT;`,
  },
];

/**
 * effectgate 0.1.0 numbered PostgreSQL's migrations 3 = governance, 4 = sagas (SQLite's were the
 * other way round). Versions now mean the same in both, so a 0.1.0 schema is brought to the new
 * numbering first: at version 4 it holds the same tables and only the descriptions change; at
 * version 3 it has governance but no sagas, so the sagas migration runs and the two are swapped.
 * Returns the version in the new numbering. Runs inside the migration's transaction and lock.
 */
async function renumberFrom010(client: PoolClient, quoted: string, from: number): Promise<number> {
  if (from !== 3 && from !== 4) return from;
  const { rows } = await client.query<{ description: string }>(`SELECT description FROM ${quoted}.schema_version WHERE version = 3`);
  if (rows[0]?.description !== "governance") return from;
  const sagas = MIGRATIONS[2];
  const governance = MIGRATIONS[3];
  if (sagas === undefined || governance === undefined) throw new Error("the sagas and governance migrations are missing");
  if (from === 3) {
    await client.query(sagas.sql(quoted));
    await client.query(`INSERT INTO ${quoted}.schema_version (version, description) VALUES (4, $1)`, [governance.description]);
  } else {
    await client.query(`UPDATE ${quoted}.schema_version SET description = $1 WHERE version = 4`, [governance.description]);
  }
  await client.query(`UPDATE ${quoted}.schema_version SET description = $1 WHERE version = 3`, [sagas.description]);
  return 4;
}

/** The schema version this code writes and reads. */
export const SCHEMA_VERSION = MIGRATIONS.length;

/** Namespace of the advisory lock that serialises migrations (the second key is hashtext(schema)). */
const LOCK_NAMESPACE = 0x45474d31; // "EGM1"

/** The schema's version: 0 when there is no effectgate ledger in it (no schema_version table). */
export async function readSchemaVersion(client: PoolClient, quoted: string): Promise<number> {
  const found = await client.query<{ t: string | null }>(`SELECT to_regclass($1)::text AS t`, [`${quoted}.schema_version`]);
  if (found.rows[0]?.t == null) return 0;
  const max = await client.query<{ v: string | null }>(`SELECT max(version)::text AS v FROM ${quoted}.schema_version`);
  return Number(max.rows[0]?.v ?? 0);
}

export class SchemaTooNew extends Error {
  constructor(readonly found: number) {
    super(`schema version ${found} is newer than ${SCHEMA_VERSION}`);
  }
}

/**
 * Brings the schema up to SCHEMA_VERSION. Two workers starting together do not race: the
 * work happens in one transaction under an advisory lock, and the version is read again
 * once the lock is held. Returns the versions before and after.
 */
export async function applyMigrations(client: PoolClient, schema: string, quoted: string): Promise<{ from: number; to: number }> {
  const seen = await readSchemaVersion(client, quoted);
  if (seen > SCHEMA_VERSION) throw new SchemaTooNew(seen);
  if (seen === SCHEMA_VERSION) return { from: seen, to: seen };
  await client.query("BEGIN");
  try {
    await client.query(`SELECT pg_advisory_xact_lock($1, hashtext($2))`, [LOCK_NAMESPACE, schema]);
    // CREATE SCHEMA IF NOT EXISTS needs the CREATE right on the database even when the schema
    // exists; a schema a DBA made for us must not need it.
    const exists = await client.query(`SELECT 1 FROM pg_namespace WHERE nspname = $1`, [schema]);
    if (exists.rowCount === 0) await client.query(`CREATE SCHEMA ${quoted}`);
    await client.query(
      `CREATE TABLE IF NOT EXISTS ${quoted}.schema_version (
         version integer PRIMARY KEY,
         description text NOT NULL,
         applied_at timestamptz NOT NULL DEFAULT now()
       )`,
    );
    let from = await readSchemaVersion(client, quoted);
    if (from > SCHEMA_VERSION) throw new SchemaTooNew(from);
    from = await renumberFrom010(client, quoted, from);
    for (const migration of MIGRATIONS.slice(from)) {
      await client.query(migration.sql(quoted));
      await client.query(`INSERT INTO ${quoted}.schema_version (version, description) VALUES ($1, $2)`, [migration.version, migration.description]);
    }
    await client.query("COMMIT");
    return { from, to: SCHEMA_VERSION };
  } catch (err) {
    await client.query("ROLLBACK").catch(() => undefined);
    throw err;
  }
}

/** Advisory-lock namespace for rate windows ("EGRW"); the second key is hashtext(breaker id). */
const RATE_LOCK = 0x45475257;

/** The governance tables and functions, for schema `s` (already quoted). Migration 4. */
export function governanceMigrationSql(s: string): string {
  return `
    CREATE TABLE ${s}.kill_switches (
      tenant text COLLATE "C" NOT NULL,
      agent text COLLATE "C" NOT NULL,
      by_whom text NOT NULL,
      reason text,
      since bigint NOT NULL,
      PRIMARY KEY (tenant, agent)
    );
    CREATE TABLE ${s}.quota_counters (counter text COLLATE "C" PRIMARY KEY, used double precision NOT NULL, updated_at bigint NOT NULL);
    CREATE TABLE ${s}.quota_uses (tenant text COLLATE "C" NOT NULL, key text COLLATE "C" NOT NULL, at bigint NOT NULL, PRIMARY KEY (tenant, key));
    CREATE TABLE ${s}.rate_events (
      breaker text COLLATE "C" NOT NULL,
      tenant text COLLATE "C" NOT NULL,
      key text COLLATE "C" NOT NULL,
      at bigint NOT NULL,
      PRIMARY KEY (breaker, tenant, key)
    );
    CREATE INDEX rate_events_window ON ${s}.rate_events (breaker, at);
    CREATE TABLE ${s}.breakers (
      id text COLLATE "C" PRIMARY KEY,
      tenant text COLLATE "C" NOT NULL,
      scope text COLLATE "C" NOT NULL,
      state text NOT NULL,
      reason text NOT NULL,
      opened_at bigint NOT NULL,
      closed_by text,
      closed_at bigint
    );
    CREATE INDEX breakers_open ON ${s}.breakers (scope) WHERE state = 'open';
    CREATE TABLE ${s}.approvals (
      id text COLLATE "C" PRIMARY KEY,
      tenant text COLLATE "C" NOT NULL,
      key text COLLATE "C" NOT NULL,
      tool text NOT NULL,
      effect text NOT NULL,
      task text NOT NULL,
      agent text,
      tool_use_id text NOT NULL,
      input json NOT NULL,
      preview json,
      reasons json NOT NULL,
      digest text NOT NULL,
      policy_version text NOT NULL,
      state text NOT NULL,
      requested_by text NOT NULL,
      requested_at bigint NOT NULL,
      expires_at bigint NOT NULL,
      decided_by text,
      decided_at bigint,
      note text,
      consumed_at bigint
    );
    CREATE INDEX approvals_by_state ON ${s}.approvals (state, requested_at, id);
    CREATE FUNCTION ${s}.consume_quota(p_tenant text, p_key text, p_counters text[], p_limits double precision[], p_amounts double precision[], p_now bigint)
    RETURNS json LANGUAGE plpgsql AS $body$
    DECLARE
      i integer;
      cur double precision;
    BEGIN
      -- Once per call: a replayed or twin call finds its row and charges nothing.
      INSERT INTO ${s}.quota_uses (tenant, key, at) VALUES (p_tenant, p_key, p_now) ON CONFLICT DO NOTHING;
      IF NOT FOUND THEN
        RETURN json_build_object('ok', true, 'charged', false);
      END IF;
      -- Lock every counter, in one order, before reading any.
      INSERT INTO ${s}.quota_counters (counter, used, updated_at)
        SELECT c, 0, p_now FROM (SELECT DISTINCT unnest(p_counters) AS c) AS d ORDER BY c ON CONFLICT DO NOTHING;
      PERFORM 1 FROM ${s}.quota_counters WHERE counter = ANY(p_counters) ORDER BY counter FOR UPDATE;
      FOR i IN 1 .. coalesce(array_length(p_counters, 1), 0) LOOP
        SELECT used INTO cur FROM ${s}.quota_counters WHERE counter = p_counters[i];
        IF cur + p_amounts[i] > p_limits[i] THEN
          DELETE FROM ${s}.quota_uses WHERE tenant = p_tenant AND key = p_key;
          DELETE FROM ${s}.quota_counters WHERE counter = ANY(p_counters) AND used = 0;
          RETURN json_build_object('ok', false, 'counter', p_counters[i], 'used', cur, 'limit', p_limits[i], 'amount', p_amounts[i]);
        END IF;
      END LOOP;
      UPDATE ${s}.quota_counters AS q SET used = q.used + c.amount, updated_at = p_now
        FROM unnest(p_counters, p_amounts) AS c(counter, amount) WHERE q.counter = c.counter;
      RETURN json_build_object('ok', true, 'charged', true);
    END
    $body$;
    CREATE FUNCTION ${s}.hit_rate(p_tenant text, p_key text, p_scopes text[], p_breakers text[], p_breaker_scopes text[],
                                  p_limits integer[], p_windows bigint[], p_now bigint)
    RETURNS json LANGUAGE plpgsql AS $body$
    DECLARE
      b ${s}.breakers;
      i integer;
      n bigint;
      fresh boolean[] := '{}';
    BEGIN
      -- One window at a time: lock each this call counts in, in one order, before reading.
      PERFORM pg_advisory_xact_lock(${RATE_LOCK}, hashtext(x)) FROM (SELECT DISTINCT unnest(p_breakers) AS x ORDER BY 1) AS l;
      SELECT * INTO b FROM ${s}.breakers WHERE state = 'open' AND scope = ANY(p_scopes) LIMIT 1;
      IF FOUND THEN
        RETURN json_build_object('ok', false, 'opened', false, 'breaker', row_to_json(b));
      END IF;
      FOR i IN 1 .. coalesce(array_length(p_breakers, 1), 0) LOOP
        DELETE FROM ${s}.rate_events WHERE breaker = p_breakers[i] AND at <= p_now - p_windows[i];
        IF EXISTS (SELECT 1 FROM ${s}.rate_events WHERE breaker = p_breakers[i] AND tenant = p_tenant AND key = p_key) THEN
          fresh := fresh || false;
          CONTINUE;
        END IF;
        SELECT count(*) INTO n FROM ${s}.rate_events WHERE breaker = p_breakers[i];
        IF n + 1 > p_limits[i] THEN
          INSERT INTO ${s}.breakers (id, tenant, scope, state, reason, opened_at, closed_by, closed_at)
            VALUES (p_breakers[i], p_tenant, p_breaker_scopes[i], 'open',
                    format('more than %s call%s within %s ms', p_limits[i], CASE WHEN p_limits[i] = 1 THEN '' ELSE 's' END, p_windows[i]),
                    p_now, NULL, NULL)
            ON CONFLICT (id) DO UPDATE SET state = 'open', reason = excluded.reason, opened_at = excluded.opened_at, closed_by = NULL, closed_at = NULL
            RETURNING * INTO b;
          RETURN json_build_object('ok', false, 'opened', true, 'breaker', row_to_json(b));
        END IF;
        fresh := fresh || true;
      END LOOP;
      INSERT INTO ${s}.rate_events (breaker, tenant, key, at)
        SELECT p_breakers[k], p_tenant, p_key, p_now FROM generate_subscripts(p_breakers, 1) AS k WHERE fresh[k];
      RETURN json_build_object('ok', true);
    END
    $body$;`;
}
