/**
 * The embedded default: one SQLite file in WAL mode via better-sqlite3.
 *
 * Durability: with `durability: "fsync"` (default) every write is a commit that SQLite
 * fsyncs before returning, so a claim or an outcome survives power loss; a gated write call
 * costs two commits. `durability: "process"` (synchronous=NORMAL) skips those fsyncs: records
 * still survive the process being killed, but not the machine losing power.
 */
import { existsSync, mkdirSync } from "node:fs";
import { dirname, resolve } from "node:path";
import Database from "better-sqlite3";
import { EffectgateError, messageOf } from "../../core/errors.js";
import { allowedFrom, assertTransition, CALL_STATES, isCallState, type CallState } from "../../core/states.js";
import { EFFECT_CLASSES, type EffectClass, type Json } from "../../core/tool.js";
import type { CallRecord, ClaimRequest, ClaimResult, Ledger, ListQuery, RecordUpdate, TakeOverRequest } from "../../contracts/calls.js";
import { ReconcileRowDamage, sqliteReconcileStore } from "./reconcile.js";
import { sqliteSagaLog } from "./sagas.js";
import { sqliteGovernance } from "./governance.js";

export interface SqliteLedgerOptions {
  /** "fsync" (default): survives power loss. "process": survives a killed process only, faster. */
  readonly durability?: "fsync" | "process";
  /** How long to wait for another process's write lock (default 5000 ms). */
  readonly busyTimeoutMs?: number;
  /**
   * Create the file when it does not exist (default true). With false, a missing file, an
   * empty one or a SQLite file that is not an effectgate ledger is refused untouched.
   */
  readonly create?: boolean;
  /** Open read-only (operator tools): implies create: false; never migrates or changes the file. */
  readonly readOnly?: boolean;
}

/** Append-only: never edit a shipped migration, add the next one. */
// Shaped for few pages per commit, since each page is a WAL frame that the commit's fsync
// must write: a rowid table (new rows land on the same rightmost page, in creation order, so
// listing needs no extra index) with a unique (tenant, key) index, and partial indexes that
// hold only the few unsettled or attention-needing calls.
const MIGRATIONS: readonly string[] = [
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
  // `ledger show KEY`). The reconcile_* tables are src/reconcile/sqlite.ts's.
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
  // 3: sagas (src/ledger/sqlite-sagas.ts). `sagas_active` is partial: a recovery pass costs the
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
  // 4: governance (src/governance/sqlite.ts): kill switches ('' = every tenant / agent), quota
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
];

interface Row {
  tenant: string; key: string; tool: string; effect: string; task: string; tool_use_id: string;
  fingerprint: string; input: string; input_redacted: number; state: string; result: string | null;
  error: string | null; owner: string | null; lease_expires_at: number | null; attempts: number;
  version: number; created_at: number; updated_at: number;
}

const CORRUPT_CODES = new Set(["SQLITE_CORRUPT", "SQLITE_NOTADB", "SQLITE_CORRUPT_INDEX", "SQLITE_CORRUPT_VTAB", "SQLITE_CORRUPT_SEQUENCE"]);

export function sqliteLedger(path: string, options: SqliteLedgerOptions = {}): Ledger {
  const file = resolve(path);
  const location = `sqlite:${file}`;
  let db: Database.Database | undefined;
  let statements: ReturnType<typeof prepare> | undefined;

  const damaged = (err: unknown, what: string): EffectgateError =>
    new EffectgateError(
      "EG_LEDGER_CORRUPT",
      `the ledger file ${file} is damaged (${what}: ${messageOf(err)}). It was left exactly as it is and no call ` +
        `was executed. Restore it from a backup, or inspect it with \`sqlite3 ${file} "PRAGMA integrity_check"\`. ` +
        `Moving it aside starts an empty ledger, which forgets which calls already ran: check the downstream systems first.`,
      { cause: err },
    );

  /** Map driver errors to the contract's: damage is never read as absence. */
  function guard<T>(what: string, fn: () => T): T {
    try {
      return fn();
    } catch (err) {
      if (err instanceof EffectgateError) throw err;
      const code = (err as { code?: unknown }).code;
      if (typeof code === "string" && CORRUPT_CODES.has(code)) throw damaged(err, what);
      throw new EffectgateError(
        "EG_LEDGER_UNAVAILABLE",
        `the ledger ${file} is unavailable (could not ${what}: ${messageOf(err)}). Nothing was executed for this call; replay it once the ledger is reachable.`,
        { cause: err },
      );
    }
  }

  function open() {
    if (statements) return statements;
    return guard("open it", () => {
      const mustExist = options.create === false || options.readOnly === true;
      if (mustExist) refuseNonLedger();
      else mkdirSync(dirname(file), { recursive: true });
      const conn = new Database(file, options.readOnly ? { readonly: true, fileMustExist: true } : {});
      try {
        conn.pragma(`busy_timeout = ${options.busyTimeoutMs ?? 5000}`);
        if (options.readOnly) {
          const version = conn.pragma("user_version", { simple: true }) as number;
          if (version > MIGRATIONS.length) throw tooNew(version);
          if (version < MIGRATIONS.length) {
            throw new EffectgateError("EG_LEDGER_UNAVAILABLE", `the ledger ${file} has schema version ${version}; open it once with a writable effectgate to migrate it to ${MIGRATIONS.length}`);
          }
        } else {
          conn.pragma("journal_mode = WAL");
          conn.pragma(`synchronous = ${options.durability === "process" ? "NORMAL" : "FULL"}`);
        // After a checkpoint the WAL is truncated back to this size instead of staying at its peak.
        conn.pragma("journal_size_limit = 8388608");
          migrate(conn);
        }
        statements = prepare(conn);
        db = conn;
        return statements;
      } catch (err) {
        conn.close();
        throw err;
      }
    });
  }

  const tooNew = (version: number) =>
    new EffectgateError(
      "EG_LEDGER_TOO_NEW",
      `the ledger ${file} has schema version ${version}, newer than this effectgate knows (${MIGRATIONS.length}). Upgrade effectgate; the file was not touched.`,
    );

  /** Looks before touching: a missing file, or one that is not an effectgate ledger, is refused as it is. */
  function refuseNonLedger() {
    if (!existsSync(file)) {
      throw new EffectgateError("EG_LEDGER_UNAVAILABLE", `there is no ledger at ${file} (nothing was created). Check the path, or run the agent once to create it.`);
    }
    const peek = new Database(file, { readonly: true, fileMustExist: true });
    try {
      if ((peek.pragma("user_version", { simple: true }) as number) === 0) {
        throw new EffectgateError("EG_LEDGER_UNAVAILABLE", `${file} is not an effectgate ledger (empty, or another program's SQLite database). It was left as it is; check the path.`);
      }
    } finally {
      peek.close();
    }
  }

  function migrate(conn: Database.Database) {
    const current = conn.pragma("user_version", { simple: true }) as number;
    if (current > MIGRATIONS.length) throw tooNew(current);
    if (current === MIGRATIONS.length) return;
    conn.transaction(() => {
      // Re-read inside the write lock: another process may have migrated meanwhile.
      const now = conn.pragma("user_version", { simple: true }) as number;
      for (let v = now; v < MIGRATIONS.length; v++) conn.exec(MIGRATIONS[v] as string);
      conn.pragma(`user_version = ${MIGRATIONS.length}`);
    }).immediate();
  }

  function decode(row: Row): CallRecord {
    const parse = (text: string, field: string): Json => {
      try {
        return JSON.parse(text) as Json;
      } catch (err) {
        throw damaged(err, `record ${row.tenant}/${row.key} has unreadable ${field}`);
      }
    };
    if (!isCallState(row.state)) throw damaged(new Error(`unknown state ${JSON.stringify(row.state)}`), `record ${row.tenant}/${row.key}`);
    if (!EFFECT_CLASSES.includes(row.effect as EffectClass)) {
      throw damaged(new Error(`unknown effect ${JSON.stringify(row.effect)}`), `record ${row.tenant}/${row.key}`);
    }
    return {
      tenant: row.tenant,
      key: row.key,
      tool: row.tool,
      effect: row.effect as EffectClass,
      task: row.task,
      toolUseId: row.tool_use_id,
      fingerprint: row.fingerprint,
      input: parse(row.input, "input"),
      inputRedacted: row.input_redacted === 1,
      state: row.state,
      result: row.result === null ? null : parse(row.result, "result"),
      error: row.error,
      owner: row.owner,
      leaseExpiresAt: row.lease_expires_at,
      attempts: row.attempts,
      version: row.version,
      createdAt: row.created_at,
      updatedAt: row.updated_at,
    };
  }

  return {
    location,
    async claim(request: ClaimRequest): Promise<ClaimResult> {
      const s = open();
      return guard("claim a call", () => {
        const now = Date.now();
        const [inserted] = s.claim.all({
          tenant: request.tenant, key: request.key, tool: request.tool, effect: request.effect,
          task: request.task, tool_use_id: request.toolUseId, fingerprint: request.fingerprint,
          input: JSON.stringify(request.input), input_redacted: request.inputRedacted ? 1 : 0,
          owner: request.owner, lease_expires_at: now + request.leaseMs, now,
        }) as Row[];
        if (inserted) return { claimed: true, record: decode(inserted) };
        const existing = s.get.get(request.tenant, request.key) as Row | undefined;
        if (!existing) throw new Error("claim conflicted but the record is not there");
        return { claimed: false, record: decode(existing) };
      });
    },
    async get(tenant, key) {
      const s = open();
      return guard("read a call", () => {
        const row = s.get.get(tenant, key) as Row | undefined;
        return row && decode(row);
      });
    },
    async update(tenant: string, key: string, version: number, update: RecordUpdate) {
      const s = open();
      return guard("record a call's outcome", () => {
        const [row] = s.update[update.state].all({
          tenant, key, version, state: update.state, now: Date.now(),
          set_result: update.result === undefined ? 0 : 1,
          result: update.result === undefined || update.result === null ? null : JSON.stringify(update.result),
          set_error: update.error === undefined ? 0 : 1,
          error: update.error ?? null,
          set_owner: update.owner === undefined ? 0 : 1,
          owner: update.owner ?? null,
          lease_ms: update.leaseMs ?? null,
          count_attempt: update.countAttempt ? 1 : 0,
        }) as Row[];
        if (row) return decode(row);
        // Not written: a stale version (normal under races), or a move the state table forbids (a bug: say so).
        const current = s.get.get(tenant, key) as Row | undefined;
        if (current && current.version === version && isCallState(current.state)) assertTransition(key, current.state, update.state);
        return undefined;
      });
    },
    async takeOver(request: TakeOverRequest) {
      const s = open();
      return guard("take over a call", () => {
        const [row] = s.takeOver.all({
          tenant: request.tenant, key: request.key, version: request.version, owner: request.owner,
          lease_ms: request.leaseMs, now: Date.now(), dead: request.holderIsDead ? 1 : 0,
        }) as Row[];
        return row && decode(row);
      });
    },
    async renewLease(tenant, key, version, owner, leaseMs) {
      const s = open();
      return guard("renew a lease", () => s.renew.run({ tenant, key, version, owner, lease_ms: leaseMs, now: Date.now() }).changes === 1);
    },
    async remove(tenant, key, version) {
      const s = open();
      return guard("remove a record", () => s.remove.run(tenant, key, version).changes === 1);
    },
    async list(query: ListQuery = {}) {
      const s = open();
      return guard("list calls", () => {
        const rows = (query.key === undefined ? s.list : s.listByKey).all({
          tenant: query.tenant ?? null, state: query.state ?? null, tool: query.tool ?? null, key: query.key ?? null,
          limit: query.limit ?? 100,
        }) as Row[];
        return rows.map(decode);
      });
    },
    async listUnsettled(options = {}) {
      const s = open();
      return guard("list unsettled calls", () => {
        const rows = s.unsettled.all({ now: Date.now(), live: options.includeLive ? 1 : 0, limit: options.limit ?? 100 }) as Row[];
        return rows.map(decode);
      });
    },
    async listChangedSince(query) {
      const s = open();
      return guard("list changed calls", () => {
        const rows = s.changes.all({
          tool: query.tool, at: query.after?.at ?? Number.MIN_SAFE_INTEGER, tenant: query.after?.tenant ?? "", key: query.after?.key ?? "",
          until: query.until ?? Number.MAX_SAFE_INTEGER, limit: query.limit ?? 100,
        }) as Row[];
        return rows.map(decode);
      });
    },
    governance: sqliteGovernance({
      location,
      run(what, fn) {
        open();
        return guard(what, () => fn(db as Database.Database));
      },
    }),
    sagas: sqliteSagaLog({
      connection() {
        open();
        return db as Database.Database;
      },
      guard,
      damaged,
    }),
    reconcile: sqliteReconcileStore({
      run(what, fn) {
        open();
        return guard(what, () => {
          try {
            return fn(db as Database.Database);
          } catch (err) {
            throw err instanceof ReconcileRowDamage ? damaged(err, what) : err;
          }
        });
      },
    }),
    async now() {
      return Date.now();
    },
    async putCheckpoint(tenant, id, data) {
      const s = open();
      guard("save a checkpoint", () => s.putCheckpoint.run({ tenant, id, data, now: Date.now() }));
    },
    async getCheckpoint(tenant, id) {
      const s = open();
      return guard("read a checkpoint", () => (s.getCheckpoint.get(tenant, id) as { data: string } | undefined)?.data);
    },
    async close() {
      db?.close();
      db = undefined;
      statements = undefined;
    },
  };
}

// Statements that write run with .all(), never .get(): .get() resets the statement after the
// first row without stepping it to the end, and SQLite only auto-checkpoints the WAL from a
// step that completes, so with .get() the WAL grows without bound and every fsync gets slower.
function prepare(db: Database.Database) {
  return {
    claim: db.prepare(
      `INSERT INTO calls (tenant, key, tool, effect, task, tool_use_id, fingerprint, input, input_redacted, state,
         result, error, owner, lease_expires_at, attempts, version, created_at, updated_at)
       VALUES (@tenant, @key, @tool, @effect, @task, @tool_use_id, @fingerprint, @input, @input_redacted, 'in_progress',
         NULL, NULL, @owner, @lease_expires_at, 1, 1, @now, @now)
       ON CONFLICT (tenant, key) DO NOTHING RETURNING *`,
    ),
    get: db.prepare(`SELECT * FROM calls WHERE tenant = ? AND key = ?`),
    // One statement per target state, its allowed-from states spelled out (src/core/states.ts).
    update: Object.fromEntries(CALL_STATES.map((to) => [to, db.prepare(
      `UPDATE calls SET
         state = @state,
         result = CASE WHEN @set_result THEN @result ELSE result END,
         error = CASE WHEN @set_error THEN @error ELSE error END,
         owner = CASE WHEN @set_owner THEN @owner ELSE owner END,
         lease_expires_at = CASE
           WHEN (CASE WHEN @set_owner THEN @owner ELSE owner END) IS NULL THEN NULL
           WHEN @lease_ms IS NOT NULL THEN @now + @lease_ms
           ELSE lease_expires_at END,
         attempts = attempts + @count_attempt,
         version = version + 1,
         updated_at = @now
       WHERE tenant = @tenant AND key = @key AND version = @version
         AND state IN (${allowedFrom(to).map((from) => `'${from}'`).join(", ") || "NULL"}) RETURNING *`,
    )])) as Record<CallState, Database.Statement>,
    takeOver: db.prepare(
      `UPDATE calls SET owner = @owner, lease_expires_at = @now + @lease_ms, version = version + 1, updated_at = @now
       WHERE tenant = @tenant AND key = @key AND version = @version
         AND state IN ('in_progress', 'uncertain')
         AND (@dead OR owner IS NULL OR lease_expires_at IS NULL OR lease_expires_at <= @now)
       RETURNING *`,
    ),
    renew: db.prepare(
      `UPDATE calls SET lease_expires_at = @now + @lease_ms
       WHERE tenant = @tenant AND key = @key AND version = @version AND owner = @owner AND state IN ('in_progress', 'uncertain')`,
    ),
    remove: db.prepare(`DELETE FROM calls WHERE tenant = ? AND key = ? AND version = ?`),
    list: db.prepare(
      `SELECT * FROM calls
       WHERE (@tenant IS NULL OR tenant = @tenant) AND (@state IS NULL OR state = @state) AND (@tool IS NULL OR tool = @tool)
         AND (@key IS NULL OR key = @key)
       ORDER BY id LIMIT @limit`,
    ),
    // One key in every tenant walks calls_by_key (migration 2).
    listByKey: db.prepare(
      `SELECT * FROM calls
       WHERE key = @key AND (@tenant IS NULL OR tenant = @tenant) AND (@state IS NULL OR state = @state) AND (@tool IS NULL OR tool = @tool)
       ORDER BY id LIMIT @limit`,
    ),
    unsettled: db.prepare(
      `SELECT * FROM calls WHERE state = 'uncertain'
       UNION ALL
       SELECT * FROM calls WHERE state = 'in_progress' AND (@live OR lease_expires_at IS NULL OR lease_expires_at <= @now)
       LIMIT @limit`,
    ),
    // Walks calls_changes: (tool, updated_at, tenant, key) is the index's order, so the cost is the rows returned.
    changes: db.prepare(
      `SELECT * FROM calls
       WHERE tool = @tool AND state <> 'in_progress' AND (updated_at, tenant, key) > (@at, @tenant, @key) AND updated_at <= @until
       ORDER BY updated_at, tenant, key LIMIT @limit`,
    ),
    putCheckpoint: db.prepare(
      `INSERT INTO checkpoints (tenant, id, data, updated_at) VALUES (@tenant, @id, @data, @now)
       ON CONFLICT (tenant, id) DO UPDATE SET data = excluded.data, updated_at = excluded.updated_at`,
    ),
    getCheckpoint: db.prepare(`SELECT data FROM checkpoints WHERE tenant = ? AND id = ?`),
  };
}
