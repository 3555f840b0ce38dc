/**
 * The SQLite ledger's schema: one append-only list of migrations, numbered like PostgreSQL's
 * (src/stores/postgres/migrations.ts) so a version means the same tables in both, recorded in
 * `PRAGMA user_version`. A file whose version is newer than this code knows is refused by name.
 */
import type Database from "better-sqlite3";
import { MIGRATION_NAMES } from "../migration-names.js";

/** Append-only: never edit a shipped migration, add the next one. */
// Shaped for few pages per commit, since each page is a WAL frame that the commit's fsync
// must write: a rowid table (new rows land on the same rightmost page, in creation order, so
// listing needs no extra index) with a unique (tenant, key) index, and partial indexes that
// hold only the few unsettled or attention-needing calls.
const SQL: readonly string[] = [
  `CREATE TABLE calls (
     id INTEGER PRIMARY KEY,
     tenant TEXT NOT NULL, key TEXT NOT NULL, tool TEXT NOT NULL, effect TEXT NOT NULL,
     task TEXT NOT NULL, tool_use_id TEXT NOT NULL, fingerprint TEXT NOT NULL,
     input TEXT NOT NULL, input_redacted INTEGER NOT NULL, state TEXT NOT NULL,
     result TEXT, error TEXT, owner TEXT, lease_expires_at INTEGER,
     attempts INTEGER NOT NULL, version INTEGER NOT NULL,
     created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL,
     UNIQUE (tenant, key)
   );
   CREATE INDEX calls_unsettled ON calls (state, lease_expires_at) WHERE state IN ('in_progress', 'uncertain');
   CREATE INDEX calls_attention ON calls (state) WHERE state IN ('needs_human', 'compensation_failed');
   CREATE TABLE checkpoints (
     tenant TEXT NOT NULL, id TEXT NOT NULL, data TEXT NOT NULL, updated_at INTEGER NOT NULL,
     PRIMARY KEY (tenant, id)
   ) WITHOUT ROWID;`,
  // 2: reconciliation. `calls_changes` lists a tool's records in change order for incremental
  // scans (partial: a claim, still in_progress, writes no entry; its outcome writes one);
  // `calls_by_key` finds a key in every tenant (a downstream record that names no tenant,
  // `ledger show KEY`). The reconcile_* tables are in reconcile.ts.
  `CREATE INDEX calls_changes ON calls (tool, updated_at, tenant, key) WHERE state <> 'in_progress';
   CREATE INDEX calls_by_key ON calls (key);
   CREATE TABLE reconcile_findings (
     id TEXT PRIMARY KEY, kind TEXT NOT NULL, tool TEXT NOT NULL, tenant TEXT, key TEXT NOT NULL,
     status TEXT NOT NULL, source TEXT NOT NULL, summary TEXT NOT NULL, evidence TEXT NOT NULL,
     first_seen_at INTEGER NOT NULL, last_seen_at INTEGER NOT NULL, times_seen INTEGER NOT NULL,
     resolved_at INTEGER, resolution TEXT, resolved_by TEXT
   ) WITHOUT ROWID;
   CREATE INDEX reconcile_findings_open ON reconcile_findings (first_seen_at, id) WHERE status = 'open';
   CREATE INDEX reconcile_findings_by_key ON reconcile_findings (key);
   CREATE TABLE reconcile_confirmations (
     tool TEXT NOT NULL, tenant TEXT NOT NULL, key TEXT NOT NULL, ref TEXT NOT NULL,
     source TEXT NOT NULL, fields TEXT, at INTEGER NOT NULL,
     PRIMARY KEY (tool, tenant, key, ref)
   ) WITHOUT ROWID;
   CREATE INDEX reconcile_confirmations_by_ref ON reconcile_confirmations (tool, ref);
   CREATE TABLE reconcile_receipts (
     id TEXT PRIMARY KEY, digest TEXT NOT NULL, tool TEXT NOT NULL, record TEXT NOT NULL,
     received_at INTEGER NOT NULL, processed_at INTEGER, outcome TEXT
   ) WITHOUT ROWID;
   CREATE TABLE reconcile_cursors (name TEXT PRIMARY KEY, value TEXT NOT NULL, updated_at INTEGER NOT NULL) WITHOUT ROWID;`,
  // 3: sagas (sagas.ts). `sagas_active` is partial: a recovery pass costs the
  // running and compensating sagas, not the log; steps and history are read per saga by key.
  `CREATE TABLE sagas (
     id INTEGER PRIMARY KEY,
     tenant TEXT NOT NULL, saga_id TEXT NOT NULL, task TEXT NOT NULL, state TEXT NOT NULL, on_abandon TEXT NOT NULL,
     owner TEXT, lease_expires_at INTEGER, reason TEXT, resolution TEXT,
     version INTEGER NOT NULL, created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL,
     UNIQUE (tenant, saga_id)
   );
   CREATE INDEX sagas_active ON sagas (state) WHERE state IN ('running', 'compensating');
   CREATE INDEX sagas_by_id ON sagas (saga_id);
   CREATE INDEX sagas_by_state ON sagas (state, id);
   CREATE TABLE saga_steps (
     tenant TEXT NOT NULL, saga_id TEXT NOT NULL, name TEXT NOT NULL, position INTEGER NOT NULL,
     tool TEXT NOT NULL, effect TEXT NOT NULL, key TEXT NOT NULL, input TEXT NOT NULL, input_redacted INTEGER NOT NULL,
     fingerprint TEXT NOT NULL, compensable INTEGER NOT NULL, compensation TEXT, approval TEXT NOT NULL,
     state TEXT NOT NULL, result TEXT, error TEXT, compensation_key TEXT,
     version INTEGER NOT NULL, created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL,
     PRIMARY KEY (tenant, saga_id, name),
     UNIQUE (tenant, saga_id, position)
   ) WITHOUT ROWID;
   CREATE TABLE saga_events (
     tenant TEXT NOT NULL, saga_id TEXT NOT NULL, seq INTEGER NOT NULL, at INTEGER NOT NULL,
     kind TEXT NOT NULL, step TEXT, message TEXT NOT NULL, data TEXT,
     PRIMARY KEY (tenant, saga_id, seq)
   ) WITHOUT ROWID;`,
  // 4: governance (governance.ts): kill switches ('' = every tenant / agent), quota
  // counters and the calls already charged, rate windows and breakers, approval requests.
  `CREATE TABLE kill_switches (
     tenant TEXT NOT NULL, agent TEXT NOT NULL, by_whom TEXT NOT NULL, reason TEXT, since INTEGER NOT NULL,
     PRIMARY KEY (tenant, agent)
   ) WITHOUT ROWID;
   CREATE TABLE quota_counters (counter TEXT PRIMARY KEY, used REAL NOT NULL, updated_at INTEGER NOT NULL) WITHOUT ROWID;
   CREATE TABLE quota_uses (tenant TEXT NOT NULL, key TEXT NOT NULL, at INTEGER NOT NULL, PRIMARY KEY (tenant, key)) WITHOUT ROWID;
   CREATE TABLE rate_events (
     breaker TEXT NOT NULL, tenant TEXT NOT NULL, key TEXT NOT NULL, at INTEGER NOT NULL,
     PRIMARY KEY (breaker, tenant, key)
   ) WITHOUT ROWID;
   CREATE INDEX rate_events_window ON rate_events (breaker, at);
   CREATE TABLE breakers (
     id TEXT PRIMARY KEY, tenant TEXT NOT NULL, scope TEXT NOT NULL, state TEXT NOT NULL, reason TEXT NOT NULL,
     opened_at INTEGER NOT NULL, closed_by TEXT, closed_at INTEGER
   ) WITHOUT ROWID;
   CREATE INDEX breakers_open ON breakers (scope) WHERE state = 'open';
   CREATE TABLE approvals (
     id TEXT PRIMARY KEY, tenant TEXT NOT NULL, key TEXT NOT NULL, tool TEXT NOT NULL, effect TEXT NOT NULL,
     task TEXT NOT NULL, agent TEXT, tool_use_id TEXT NOT NULL, input TEXT NOT NULL, preview TEXT, reasons TEXT NOT NULL,
     digest TEXT NOT NULL, policy_version TEXT NOT NULL, state TEXT NOT NULL, requested_by TEXT NOT NULL,
     requested_at INTEGER NOT NULL, expires_at INTEGER NOT NULL, decided_by TEXT, decided_at INTEGER, note TEXT, consumed_at INTEGER
   ) WITHOUT ROWID;
   CREATE INDEX approvals_by_state ON approvals (state, requested_at);`,
  // 5: the one list order of every store (contracts/call-rules.ts `listOrder`).
  `CREATE INDEX calls_by_created ON calls (created_at, tenant, key);`,
  // 6: fencing tokens, the time the tool was last started (the settle horizon counts from it) and
  // the claim token a remove compares. A call recorded before it counts as started when last written.
  `ALTER TABLE calls ADD COLUMN fence INTEGER NOT NULL DEFAULT 1;
   ALTER TABLE calls ADD COLUMN started_at INTEGER NOT NULL DEFAULT 0;
   ALTER TABLE calls ADD COLUMN claim_token TEXT NOT NULL DEFAULT '';
   UPDATE calls SET started_at = updated_at, claim_token = lower(hex(randomblob(16)));`,
  // 7: ledger search by task (ListQuery) and intent windows (ToolSpec.repeats): a task's calls in
  // the list order. One index, not one per filter: each is one more B-tree page written per claim
  // (bench/index-cost.mjs); tenant and tool searches walk calls_by_created or sort.
  `CREATE INDEX calls_by_task ON calls (tenant, task, created_at, key);`,
  // 8: a call's approval requests (ApprovalQuery.key: the console's call detail), without reading
  // every request of its tenant. Written once per request, so it costs the gate nothing per call.
  `CREATE INDEX approvals_by_key ON approvals (key);`,
  // 9: a call's intent (the fingerprint of the input its tool runs with), which intent windows
  // compare. A call recorded before it gets its fingerprint (once, here: the repeat check stays one
  // plain comparison on calls_by_task).
  `ALTER TABLE calls ADD COLUMN intent TEXT NOT NULL DEFAULT '';
   UPDATE calls SET intent = fingerprint;`,
];

export interface Migration {
  readonly version: number;
  readonly description: string;
  readonly sql: string;
}

/** Append-only, numbered and named as in MIGRATION_NAMES (the same in PostgreSQL). */
export const MIGRATIONS: readonly Migration[] = SQL.map((sql, i) => ({ version: i + 1, description: MIGRATION_NAMES[i] ?? `migration ${i + 1}`, sql }));

/** The schema version this code writes and reads. */
export const SCHEMA_VERSION = MIGRATIONS.length;

export function schemaVersion(db: Database.Database): number {
  return db.pragma("user_version", { simple: true }) as number;
}

/**
 * Brings the file up to SCHEMA_VERSION in one IMMEDIATE transaction (the version is read again
 * under the write lock: another process may have migrated meanwhile). `tooNew` names a newer file.
 */
export function migrate(db: Database.Database, tooNew: (version: number) => Error): void {
  const current = schemaVersion(db);
  if (current > SCHEMA_VERSION) throw tooNew(current);
  if (current === SCHEMA_VERSION) return;
  db.transaction(() => {
    const now = schemaVersion(db);
    if (now > SCHEMA_VERSION) throw tooNew(now);
    for (const migration of MIGRATIONS.slice(now)) db.exec(migration.sql);
    db.pragma(`user_version = ${SCHEMA_VERSION}`);
  }).immediate();
}
