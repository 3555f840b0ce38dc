/**
 * The PostgreSQL ledger's reconcile store: tables in the ledger's schema (migration 2 of
 * migrations.ts), one statement per operation, insert-once
 * (`ON CONFLICT DO NOTHING`) or compare-and-set on the status, times on the database's clock.
 * Rows come back as raw text (the ledger's RAW_TYPES) and are checked field by field: a damaged
 * row is refused by name (EG_LEDGER_CORRUPT), never read as something else.
 */
import type { Json } from "../../core/json.js";
import type { FindingCountQuery, FindingQuery, ReconcileStore } from "../../contracts/reconcile.js";
import { checkResolution, evidenceOf, findingFilters } from "../../contracts/finding-rules.js";
import { FINDING_KINDS, isFindingSource, type Confirmation, type Finding, type FindingKind, type FindingSource, type LedgerSnapshot, type StoredReceipt } from "../../contracts/findings.js";
import { type DownstreamRecord } from "../../core/hooks.js";
import { TRY_AGAIN, type PostgresAccess } from "./access.js";
import { countIn, fieldsOf, type RawRow } from "./rows.js";
import { clockOf, named } from "./statements.js";

const FINDING_COLS = "id, kind, tool, tenant, key, status, source, summary, evidence, first_seen_at, last_seen_at, times_seen, resolved_at, resolution, resolved_by";
const RECEIPT_COLS = "id, digest, tool, record, received_at, processed_at, outcome";
const CONFIRMATION_COLS = "tool, tenant, key, ref, source, fields, at";

/** Readers for one row, plus its `source` (FINDING_SOURCES). */
function decoder(row: RawRow, what: string) {
  const f = fieldsOf(row, what);
  const source = (): FindingSource => {
    const value = f.text("source");
    if (!isFindingSource(value)) throw f.bad(`has an unknown source ${JSON.stringify(value)}`);
    return value;
  };
  return { ...f, source };
}

function decodeFinding(row: RawRow): Finding {
  const d = decoder(row, `finding ${row.id ?? "?"}`);
  const kind = d.text("kind");
  if (!(FINDING_KINDS as readonly string[]).includes(kind)) throw d.bad(`has an unknown kind ${JSON.stringify(kind)}`);
  const status = d.text("status");
  if (status !== "open" && status !== "resolved") throw d.bad(`has an unknown status ${JSON.stringify(status)}`);
  const evidence = d.json<{ ledger: LedgerSnapshot | null; downstream: DownstreamRecord[]; differences: Finding["differences"] }>("evidence");
  return {
    id: d.text("id"), kind: kind as FindingKind, tool: d.text("tool"), tenant: d.optionalText("tenant"), key: d.text("key"),
    summary: d.text("summary"), ledger: evidence.ledger, downstream: evidence.downstream, differences: evidence.differences,
    source: d.source(), status, firstSeenAt: d.int("first_seen_at"), lastSeenAt: d.int("last_seen_at"), timesSeen: d.int("times_seen"),
    resolvedAt: d.optionalInt("resolved_at"), resolution: d.optionalText("resolution"), resolvedBy: d.optionalText("resolved_by"),
  };
}

function decodeConfirmation(row: RawRow): Confirmation {
  const d = decoder(row, `confirmation ${row.tool ?? "?"}/${row.key ?? "?"}/${row.ref ?? "?"}`);
  return {
    tool: d.text("tool"), tenant: d.text("tenant"), key: d.text("key"), ref: d.text("ref"), source: d.source(),
    fields: row.fields == null ? null : d.json("fields"), at: d.int("at"),
  };
}

function decodeReceipt(row: RawRow): StoredReceipt {
  const d = decoder(row, `receipt ${row.id ?? "?"}`);
  return {
    id: d.text("id"), digest: d.text("digest"), tool: d.text("tool"), record: d.json<DownstreamRecord>("record"),
    receivedAt: d.int("received_at"), processedAt: d.optionalInt("processed_at"), outcome: row.outcome == null ? null : d.json<Json>("outcome"),
  };
}

/** The store's statements for a schema name already quoted; `c` is the clock every write joins (statements.ts). */
export function postgresReconcileStatements(s: string, durability: "fsync" | "process", nowSql?: string) {
  const clock = clockOf(durability, nowSql);
  const now = "c.now";
  return {
    insertFinding: named(`INSERT INTO ${s}.reconcile_findings (${FINDING_COLS})
       SELECT $1::text, $2::text, $3::text, $4::text, $5::text, 'open', $6::text, $7::text, $8::json, c.now, c.now, 1, NULL, NULL, NULL
       FROM ${clock}
       ON CONFLICT (id) DO NOTHING RETURNING ${FINDING_COLS}`),
    refreshFinding: named(`UPDATE ${s}.reconcile_findings AS f SET summary = $2::text, evidence = $3::json,
         last_seen_at = greatest(f.last_seen_at, c.now), times_seen = f.times_seen + 1
       FROM ${clock} WHERE f.id = $1 RETURNING ${FINDING_COLS.split(", ").map((col) => `f.${col}`).join(", ")}`),
    getFinding: named(`SELECT ${FINDING_COLS} FROM ${s}.reconcile_findings WHERE id = $1`),
    resolveFinding: named(`UPDATE ${s}.reconcile_findings AS f SET status = 'resolved', resolved_at = c.now, resolution = $2::text, resolved_by = $3::text
       FROM ${clock} WHERE f.id = $1 AND f.status = 'open' RETURNING ${FINDING_COLS.split(", ").map((col) => `f.${col}`).join(", ")}`),
    insertConfirmation: named(`INSERT INTO ${s}.reconcile_confirmations (${CONFIRMATION_COLS})
       SELECT $1::text, $2::text, $3::text, $4::text, $5::text, $6::json, ${now} FROM ${clock}
       ON CONFLICT (tool, tenant, key, ref) DO NOTHING RETURNING ref`),
    confirmationsByKey: named(`SELECT ${CONFIRMATION_COLS} FROM ${s}.reconcile_confirmations WHERE tool = $1 AND tenant = $2 AND key = $3 ORDER BY at, ref`),
    confirmationsByRef: named(`SELECT ${CONFIRMATION_COLS} FROM ${s}.reconcile_confirmations WHERE tool = $1 AND ref = $2 ORDER BY at, tenant, key`),
    insertReceipt: named(`INSERT INTO ${s}.reconcile_receipts (${RECEIPT_COLS})
       SELECT $1::text, $2::text, $3::text, $4::json, ${now}, NULL, NULL FROM ${clock}
       ON CONFLICT (id) DO NOTHING RETURNING ${RECEIPT_COLS}`),
    getReceipt: named(`SELECT ${RECEIPT_COLS} FROM ${s}.reconcile_receipts WHERE id = $1`),
    finishReceipt: named(`UPDATE ${s}.reconcile_receipts SET processed_at = ${now}, outcome = $2::json FROM ${clock} WHERE id = $1 AND processed_at IS NULL`),
    getCursor: named(`SELECT value FROM ${s}.reconcile_cursors WHERE name = $1`),
    putCursor: named(`INSERT INTO ${s}.reconcile_cursors (name, value, updated_at) SELECT $1::text, $2::json, ${now} FROM ${clock}
       ON CONFLICT (name) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at`),
    /** `where` holds findingFilters' terms; the limit is the last parameter. */
    listFindings: (where: readonly string[], limitParam: number) =>
      `SELECT ${FINDING_COLS} FROM ${s}.reconcile_findings ${where.length ? `WHERE ${where.join(" AND ")}` : ""} ORDER BY first_seen_at, id LIMIT $${limitParam}`,
    /** `where` holds findingFilters' terms. */
    countFindings: (where: readonly string[]) =>
      `SELECT count(*) AS n FROM ${s}.reconcile_findings ${where.length ? `WHERE ${where.join(" AND ")}` : ""}`,
  };
}

/** The terms of `query`'s filters (findingFilters), numbered from $1, and their values. */
function filtered(query: FindingCountQuery): { where: string[]; values: unknown[] } {
  const values: unknown[] = [];
  const where = findingFilters(query, (value) => {
    values.push(value);
    return `$${values.length}`;
  });
  return { where, values };
}

export function postgresReconcileStore(access: PostgresAccess): ReconcileStore {
  const sql = postgresReconcileStatements(access.schema, access.durability, access.now);
  const op = <T>(what: string, writes: boolean, fn: () => Promise<T>): Promise<T> => access.run({ what, next: TRY_AGAIN, writes }, fn);

  return {
    recordFinding: (report) =>
      op("record a reconciliation finding", true, async () => {
        const evidence = evidenceOf(report);
        const [inserted] = (await access.query(sql.insertFinding, [
          report.id, report.kind, report.tool, report.tenant, report.key, report.source, report.summary, evidence,
        ])).rows;
        if (inserted) return { finding: decodeFinding(inserted), created: true };
        const [refreshed] = (await access.query(sql.refreshFinding, [report.id, report.summary, evidence])).rows;
        if (!refreshed) throw new Error(`finding ${report.id} conflicted but is not there`);
        return { finding: decodeFinding(refreshed), created: false };
      }),
    getFinding: (id) =>
      op("read a reconciliation finding", false, async () => {
        const [row] = (await access.query(sql.getFinding, [id])).rows;
        return row && decodeFinding(row);
      }),
    listFindings: (query: FindingQuery = {}) =>
      op("list reconciliation findings", false, async () => {
        const { where, values } = filtered(query);
        values.push(query.limit ?? 100);
        return (await access.query(sql.listFindings(where, values.length), values)).rows.map(decodeFinding);
      }),
    countFindings: (query: FindingCountQuery = {}) =>
      op("count reconciliation findings", false, async () => {
        const { where, values } = filtered(query);
        return countIn((await access.query(sql.countFindings(where), values)).rows, "the findings count");
      }),
    resolveFinding: async (id, resolution) => {
      checkResolution(resolution);
      return op("resolve a reconciliation finding", true, async () => {
        const [row] = (await access.query(sql.resolveFinding, [id, resolution.note, resolution.by ?? null])).rows;
        if (row) return { finding: decodeFinding(row), changed: true };
        const [current] = (await access.query(sql.getFinding, [id])).rows;
        return current && { finding: decodeFinding(current), changed: false };
      });
    },
    recordConfirmation: (c) =>
      op("record a reconciliation confirmation", true, async () =>
        (await access.query(sql.insertConfirmation, [c.tool, c.tenant, c.key, c.ref, c.source, c.fields === null ? null : JSON.stringify(c.fields)])).rows.length === 1),
    listConfirmations: (query) =>
      op("list reconciliation confirmations", false, async () => {
        const result = "ref" in query
          ? await access.query(sql.confirmationsByRef, [query.tool, query.ref])
          : await access.query(sql.confirmationsByKey, [query.tool, query.tenant, query.key]);
        return result.rows.map(decodeConfirmation);
      }),
    recordReceipt: (receipt) =>
      op("record a receipt", true, async () => {
        const [inserted] = (await access.query(sql.insertReceipt, [receipt.id, receipt.digest, receipt.tool, JSON.stringify(receipt.record)])).rows;
        if (inserted) return { receipt: decodeReceipt(inserted), created: true };
        const [existing] = (await access.query(sql.getReceipt, [receipt.id])).rows;
        if (!existing) throw new Error(`receipt ${receipt.id} conflicted but is not there`);
        return { receipt: decodeReceipt(existing), created: false };
      }),
    getReceipt: (id) =>
      op("read a receipt", false, async () => {
        const [row] = (await access.query(sql.getReceipt, [id])).rows;
        return row && decodeReceipt(row);
      }),
    finishReceipt: (id, outcome) =>
      op("record a receipt's outcome", true, async () => {
        await access.query(sql.finishReceipt, [id, JSON.stringify(outcome)]);
        const [row] = (await access.query(sql.getReceipt, [id])).rows;
        return row && decodeReceipt(row);
      }),
    getCursor: (name) =>
      op("read a scan cursor", false, async () => {
        const [row] = (await access.query(sql.getCursor, [name])).rows;
        if (!row) return undefined;
        return decoder(row, `scan cursor ${name}`).json<Json>("value");
      }),
    putCursor: (name, value) =>
      op("save a scan cursor", true, async () => {
        await access.query(sql.putCursor, [name, JSON.stringify(value)]);
      }),
  };
}
