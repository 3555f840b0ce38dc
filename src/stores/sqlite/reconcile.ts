/**
 * The SQLite ledger's reconcile store: tables in the ledger's own file (created by migration 2
 * of migrations.ts), written with single statements that are
 * insert-once (`ON CONFLICT DO NOTHING`) or compare-and-set on the status, so concurrent
 * scans, receipts and people resolving findings never overwrite each other.
 */
import type Database from "better-sqlite3";
import type { Json } from "../../core/json.js";
import { FINDING_KINDS, isFindingSource, type Confirmation, type Finding, type FindingKind, type LedgerSnapshot, type StoredReceipt } from "../../contracts/findings.js";
import { type DownstreamRecord } from "../../core/hooks.js";
import type { FindingCountQuery, FindingQuery, ReconcileStore } from "../../contracts/reconcile.js";
import { checkResolution, evidenceOf, findingFilters } from "../../contracts/finding-rules.js";
import { RowDamage } from "../row-damage.js";
import { preparedOnce, type SqliteAccess } from "./access.js";

interface FindingRow {
  id: string; kind: string; tool: string; tenant: string | null; key: string; status: string; source: string;
  summary: string; evidence: string; first_seen_at: number; last_seen_at: number; times_seen: number;
  resolved_at: number | null; resolution: string | null; resolved_by: string | null;
}
interface ConfirmationRow { tool: string; tenant: string; key: string; ref: string; source: string; fields: string | null; at: number }
interface ReceiptRow { id: string; digest: string; tool: string; record: string; received_at: number; processed_at: number | null; outcome: string | null }

function parse<T>(text: string, what: string): T {
  try {
    return JSON.parse(text) as T;
  } catch (err) {
    throw new RowDamage(what, `is unreadable: ${err instanceof Error ? err.message : String(err)}`);
  }
}

export function decodeFinding(row: FindingRow): Finding {
  const what = `finding ${row.id}`;
  if (!(FINDING_KINDS as readonly string[]).includes(row.kind)) throw new RowDamage(what, `has an unknown kind ${JSON.stringify(row.kind)}`);
  if (row.status !== "open" && row.status !== "resolved") throw new RowDamage(what, `has an unknown status ${JSON.stringify(row.status)}`);
  if (!isFindingSource(row.source)) throw new RowDamage(what, `has an unknown source ${JSON.stringify(row.source)}`);
  const evidence = parse<{ ledger: LedgerSnapshot | null; downstream: DownstreamRecord[]; differences: Finding["differences"] }>(row.evidence, `${what} evidence`);
  return {
    id: row.id, kind: row.kind as FindingKind, tool: row.tool, tenant: row.tenant, key: row.key, summary: row.summary,
    ledger: evidence.ledger, downstream: evidence.downstream, differences: evidence.differences, source: row.source,
    status: row.status, firstSeenAt: row.first_seen_at, lastSeenAt: row.last_seen_at, timesSeen: row.times_seen,
    resolvedAt: row.resolved_at, resolution: row.resolution, resolvedBy: row.resolved_by,
  };
}

export function decodeConfirmation(row: ConfirmationRow): Confirmation {
  if (row.source !== "scan" && row.source !== "receipt") throw new RowDamage(`confirmation ${row.tool}/${row.key}/${row.ref}`, "has an unknown source");
  return {
    tool: row.tool, tenant: row.tenant, key: row.key, ref: row.ref, source: row.source,
    fields: row.fields === null ? null : parse(row.fields, `confirmation ${row.tool}/${row.key}/${row.ref} fields`), at: row.at,
  };
}

export function decodeReceipt(row: ReceiptRow): StoredReceipt {
  return {
    id: row.id, digest: row.digest, tool: row.tool, record: parse<DownstreamRecord>(row.record, `receipt ${row.id}`),
    receivedAt: row.received_at, processedAt: row.processed_at,
    outcome: row.outcome === null ? null : parse<Json>(row.outcome, `receipt ${row.id} outcome`),
  };
}

const statements = preparedOnce(prepare);

export function sqliteReconcileStore(access: SqliteAccess): ReconcileStore {
  const listCache = new WeakMap<Database.Database, Map<string, Database.Statement>>();
  /** A listing's or count's statement, prepared once per text (one per combination of filters). */
  const prepared = (db: Database.Database, text: string): Database.Statement => {
    let byText = listCache.get(db);
    if (!byText) listCache.set(db, (byText = new Map<string, Database.Statement>()));
    let statement = byText.get(text);
    if (!statement) byText.set(text, (statement = db.prepare(text)));
    return statement;
  };
  /** The WHERE of `query`'s filters (findingFilters) and its named values. */
  const filtered = (query: FindingCountQuery): { where: string; values: Record<string, string> } => {
    const values: Record<string, string> = {};
    let n = 0;
    const where = findingFilters(query, (value) => {
      const name = `p${n++}`;
      values[name] = value;
      return `@${name}`;
    });
    return { where: where.length ? `WHERE ${where.join(" AND ")}` : "", values };
  };

  return {
    async recordFinding(report) {
      return access.run("record a reconciliation finding", (db) => {
        const s = statements(db);
        const now = access.clock();
        const values = {
          id: report.id, kind: report.kind, tool: report.tool, tenant: report.tenant, key: report.key, source: report.source,
          summary: report.summary, evidence: evidenceOf(report), now,
        };
        // One statement each, in one transaction: insert-once, else refresh the evidence (never the status).
        return db.transaction(() => {
          const [inserted] = s.insertFinding.all(values) as FindingRow[];
          if (inserted) return { finding: decodeFinding(inserted), created: true };
          const [refreshed] = s.refreshFinding.all(values) as FindingRow[];
          if (!refreshed) throw new Error(`finding ${report.id} conflicted but is not there`);
          return { finding: decodeFinding(refreshed), created: false };
        }).immediate();
      });
    },
    async getFinding(id) {
      return access.run("read a reconciliation finding", (db) => {
        const row = statements(db).getFinding.get(id) as FindingRow | undefined;
        return row && decodeFinding(row);
      });
    },
    async listFindings(query: FindingQuery = {}) {
      return access.run("list reconciliation findings", (db) => {
        const { where, values } = filtered(query);
        const statement = prepared(db, `SELECT * FROM reconcile_findings ${where} ORDER BY first_seen_at, id LIMIT @limit`);
        return (statement.all({ ...values, limit: query.limit ?? 100 }) as FindingRow[]).map(decodeFinding);
      });
    },
    async countFindings(query: FindingCountQuery = {}) {
      return access.run("count reconciliation findings", (db) => {
        const { where, values } = filtered(query);
        return (prepared(db, `SELECT count(*) AS n FROM reconcile_findings ${where}`).get(values) as { n: number }).n;
      });
    },
    async resolveFinding(id, resolution) {
      checkResolution(resolution);
      return access.run("resolve a reconciliation finding", (db) => {
        const s = statements(db);
        const [row] = s.resolveFinding.all({ id, note: resolution.note, by: resolution.by ?? null, now: access.clock() }) as FindingRow[];
        if (row) return { finding: decodeFinding(row), changed: true };
        const current = s.getFinding.get(id) as FindingRow | undefined;
        return current && { finding: decodeFinding(current), changed: false };
      });
    },
    async recordConfirmation(c) {
      return access.run("record a reconciliation confirmation", (db) =>
        statements(db).insertConfirmation.all({
          tool: c.tool, tenant: c.tenant, key: c.key, ref: c.ref, source: c.source,
          fields: c.fields === null ? null : JSON.stringify(c.fields), now: access.clock(),
        }).length === 1);
    },
    async listConfirmations(query) {
      return access.run("list reconciliation confirmations", (db) => {
        const s = statements(db);
        const rows = ("ref" in query
          ? s.confirmationsByRef.all({ tool: query.tool, ref: query.ref })
          : s.confirmationsByKey.all({ tool: query.tool, tenant: query.tenant, key: query.key })) as ConfirmationRow[];
        return rows.map(decodeConfirmation);
      });
    },
    async recordReceipt(receipt) {
      return access.run("record a receipt", (db) => {
        const s = statements(db);
        const [inserted] = s.insertReceipt.all({
          id: receipt.id, digest: receipt.digest, tool: receipt.tool, record: JSON.stringify(receipt.record), now: access.clock(),
        }) as ReceiptRow[];
        if (inserted) return { receipt: decodeReceipt(inserted), created: true };
        const existing = s.getReceipt.get(receipt.id) as ReceiptRow | undefined;
        if (!existing) throw new Error(`receipt ${receipt.id} conflicted but is not there`);
        return { receipt: decodeReceipt(existing), created: false };
      });
    },
    async getReceipt(id) {
      return access.run("read a receipt", (db) => {
        const row = statements(db).getReceipt.get(id) as ReceiptRow | undefined;
        return row && decodeReceipt(row);
      });
    },
    async finishReceipt(id, outcome) {
      return access.run("record a receipt's outcome", (db) => {
        const s = statements(db);
        s.finishReceipt.run({ id, outcome: JSON.stringify(outcome), now: access.clock() });
        const row = s.getReceipt.get(id) as ReceiptRow | undefined;
        return row && decodeReceipt(row);
      });
    },
    async getCursor(name) {
      return access.run("read a scan cursor", (db) => {
        const row = statements(db).getCursor.get(name) as { value: string } | undefined;
        return row && parse<Json>(row.value, `scan cursor ${name}`);
      });
    },
    async putCursor(name, value) {
      await access.run("save a scan cursor", (db) => {
        statements(db).putCursor.run({ name, value: JSON.stringify(value), now: access.clock() });
      });
    },
  };
}

// Writes run with .all() (see calls.ts: .get() leaves the statement unfinished and the WAL unchecked).
function prepare(db: Database.Database) {
  return {
    insertFinding: db.prepare(
      `INSERT INTO reconcile_findings (id, kind, tool, tenant, key, status, source, summary, evidence, first_seen_at, last_seen_at, times_seen)
       VALUES (@id, @kind, @tool, @tenant, @key, 'open', @source, @summary, @evidence, @now, @now, 1)
       ON CONFLICT (id) DO NOTHING RETURNING *`,
    ),
    refreshFinding: db.prepare(
      `UPDATE reconcile_findings SET summary = @summary, evidence = @evidence, last_seen_at = max(last_seen_at, @now), times_seen = times_seen + 1
       WHERE id = @id RETURNING *`,
    ),
    getFinding: db.prepare(`SELECT * FROM reconcile_findings WHERE id = ?`),
    resolveFinding: db.prepare(
      `UPDATE reconcile_findings SET status = 'resolved', resolved_at = @now, resolution = @note, resolved_by = @by
       WHERE id = @id AND status = 'open' RETURNING *`,
    ),
    insertConfirmation: db.prepare(
      `INSERT INTO reconcile_confirmations (tool, tenant, key, ref, source, fields, at) VALUES (@tool, @tenant, @key, @ref, @source, @fields, @now)
       ON CONFLICT (tool, tenant, key, ref) DO NOTHING RETURNING ref`,
    ),
    confirmationsByKey: db.prepare(`SELECT * FROM reconcile_confirmations WHERE tool = @tool AND tenant = @tenant AND key = @key ORDER BY at, ref`),
    confirmationsByRef: db.prepare(`SELECT * FROM reconcile_confirmations WHERE tool = @tool AND ref = @ref ORDER BY at, tenant, key`),
    insertReceipt: db.prepare(
      `INSERT INTO reconcile_receipts (id, digest, tool, record, received_at) VALUES (@id, @digest, @tool, @record, @now)
       ON CONFLICT (id) DO NOTHING RETURNING *`,
    ),
    getReceipt: db.prepare(`SELECT * FROM reconcile_receipts WHERE id = ?`),
    finishReceipt: db.prepare(`UPDATE reconcile_receipts SET processed_at = @now, outcome = @outcome WHERE id = @id AND processed_at IS NULL`),
    getCursor: db.prepare(`SELECT value FROM reconcile_cursors WHERE name = ?`),
    putCursor: db.prepare(
      `INSERT INTO reconcile_cursors (name, value, updated_at) VALUES (@name, @value, @now)
       ON CONFLICT (name) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at`,
    ),
  };
}
