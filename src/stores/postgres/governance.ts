/**
 * Governance state in the PostgreSQL ledger's schema (postgresLedger's `governance`), in the
 * tables and functions of the ledger's governance migration (migrations.ts,
 * `governanceMigrationSql`). Every operation is one statement:
 * - `consumeQuota` and `hitRate` call a PL/pgSQL function that locks what it counts (the
 *   counters' rows in a fixed order; an advisory lock per window) before reading, so workers on
 *   any number of machines never admit more than a limit between them;
 * - approvals move compare-and-set on their state in one UPDATE.
 * Rows come back as raw text and are checked field by field; a damaged row is refused by name.
 */
import { EffectgateError } from "../../core/errors.js";
import { isEffectClass } from "../../core/effect-class.js";
import { type Json } from "../../core/json.js";
import { canMoveApproval } from "../../contracts/approval-states.js";
import { APPROVAL_STATES, type ApprovalCountQuery, type ApprovalRecord, type ApprovalState, type Breaker, type GovernanceStore, type KillSwitch, type QuotaVerdict, type RateVerdict } from "../../contracts/governance.js";
import { type DryRunPreview } from "../../core/hooks.js";
import { NOTHING_RAN, type PostgresAccess } from "./access.js";
import { countIn, fieldsOf, literal, type RawRow } from "./rows.js";
import { approvalFilters } from "../sql/approval-filters.js";
import { commitModeOf, named, type Statement } from "./statements.js";

const EVERY = "";

const APPROVAL_COLS = "id, tenant, key, tool, effect, task, agent, tool_use_id, input, preview, reasons, digest, policy_version, state, " +
  "requested_by, requested_at, expires_at, decided_by, decided_at, note, consumed_at";
const BREAKER_COLS = "id, tenant, scope, state, reason, opened_at, closed_by, closed_at";

/** `m` sets this statement's commit mode from the ledger's durability (see commitModeOf). */
function statements(s: string, m: ReturnType<typeof commitModeOf>) {
  return {
    activeKill: named(`SELECT tenant, agent, by_whom, reason, since FROM ${s}.kill_switches WHERE tenant IN ('', $1) AND agent IN ('', $2) LIMIT 1`),
    setKill: named(`INSERT INTO ${s}.kill_switches (tenant, agent, by_whom, reason, since)
      SELECT $1::text, $2::text, $3::text, $4::text, $5::bigint ${m.from} WHERE true ON CONFLICT (tenant, agent) DO NOTHING`),
    clearKill: named(`DELETE FROM ${s}.kill_switches ${m.using} WHERE tenant = $1 AND agent = $2`),
    listKill: named(`SELECT tenant, agent, by_whom, reason, since FROM ${s}.kill_switches ORDER BY since, tenant, agent`),
    usage: named(`SELECT counter, used FROM ${s}.quota_counters WHERE counter = ANY($1::text[])`),
    consume: named(`SELECT ${s}.consume_quota($1, $2, $3::text[], $4::double precision[], $5::double precision[], $6::bigint) AS verdict ${m.from}`),
    listCounters: named(`SELECT counter, used, updated_at FROM ${s}.quota_counters WHERE starts_with(counter, $1) ORDER BY counter LIMIT $2`),
    hitRate: named(`SELECT ${s}.hit_rate($1, $2, $3::text[], $4::text[], $5::text[], $6::integer[], $7::bigint[], $8::bigint) AS verdict ${m.from}`),
    listBreakers: named(`SELECT ${BREAKER_COLS} FROM ${s}.breakers WHERE ($1::boolean OR state = 'open') ORDER BY opened_at, id LIMIT $2`),
    countOpenBreakers: named(`SELECT count(*) AS n FROM ${s}.breakers WHERE state = 'open'`),
    countAllBreakers: named(`SELECT count(*) AS n FROM ${s}.breakers`),
    closeBreaker: named(`WITH closed AS (
        UPDATE ${s}.breakers SET state = 'closed', closed_by = $2, closed_at = $3::bigint ${m.from} WHERE id = $1 AND state = 'open' RETURNING ${BREAKER_COLS}
      ), forget AS (
        DELETE FROM ${s}.rate_events WHERE breaker = $1 AND EXISTS (SELECT 1 FROM closed)
      )
      SELECT ${BREAKER_COLS} FROM closed`),
    putApproval: named(`INSERT INTO ${s}.approvals (${APPROVAL_COLS})
      SELECT $1::text, $2::text, $3::text, $4::text, $5::text, $6::text, $7::text, $8::text, $9::json, $10::json, $11::json, $12::text, $13::text,
        'pending', $14::text, $15::bigint, $16::bigint, NULL, NULL, NULL, NULL ${m.from} WHERE true
      ON CONFLICT (id) DO NOTHING RETURNING ${APPROVAL_COLS}`),
    getApproval: named(`SELECT ${APPROVAL_COLS} FROM ${s}.approvals WHERE id = $1`),
    moveApproval: named(`UPDATE ${s}.approvals SET
        state = $3,
        decided_by = CASE WHEN $4::boolean THEN $5 ELSE decided_by END,
        decided_at = CASE WHEN $4::boolean THEN $7::bigint ELSE decided_at END,
        note = CASE WHEN $4::boolean THEN $6 ELSE note END,
        consumed_at = CASE WHEN $8::boolean THEN $7::bigint ELSE consumed_at END,
        expires_at = COALESCE($9::bigint, expires_at)
      ${m.from}
      WHERE id = $1 AND state = $2
      RETURNING ${APPROVAL_COLS}`),
  };
}

/**
 * The approvals listing (oldest first, the limit last) or count (n) for `query`'s filters, each
 * combination prepared under its own name, and its values.
 */
function approvalsSql(schema: string, prepared: Map<string, Statement>, query: ApprovalCountQuery, what: "list" | "count"): { statement: Statement; values: unknown[] } {
  const values: unknown[] = [];
  const where = approvalFilters(query, (value) => {
    values.push(value);
    return `$${values.length}::text`;
  });
  const filtered = where.length > 0 ? ` WHERE ${where.join(" AND ")}` : "";
  const text = what === "list"
    ? `SELECT ${APPROVAL_COLS} FROM ${schema}.approvals${filtered} ORDER BY requested_at, id LIMIT $${values.length + 1}::integer`
    : `SELECT count(*) AS n FROM ${schema}.approvals${filtered}`;
  let statement = prepared.get(text);
  if (!statement) prepared.set(text, (statement = named(text)));
  return { statement, values };
}

export function postgresGovernance(access: PostgresAccess): GovernanceStore {
  const sql = statements(access.schema, commitModeOf(access.durability));
  const approvalStatements = new Map<string, Statement>();
  const read = <T>(what: string, fn: () => Promise<T>) => access.run({ what, next: NOTHING_RAN, writes: false }, fn);
  const write = <T>(what: string, fn: () => Promise<T>) => access.run({ what, next: NOTHING_RAN, writes: true }, fn);
  const decodeApproval = (row: RawRow) => approvalOf(row, access.schema);

  return {
    activeKillSwitch: (tenant, agent) =>
      read("read the kill switches", async () => {
        const row = (await access.query(sql.activeKill, [tenant, agent ?? EVERY])).rows[0];
        return row && decodeKill(row);
      }),
    setKillSwitch: (target, on, meta, now) =>
      write(on ? "set a kill switch" : "clear a kill switch", async () => {
        const key = [target.tenant ?? EVERY, target.agent ?? EVERY];
        const done = on ? await access.query(sql.setKill, [...key, meta.by, meta.reason ?? null, now]) : await access.query(sql.clearKill, key);
        return done.rowCount === 1;
      }),
    listKillSwitches: () => read("list the kill switches", async () => (await access.query(sql.listKill, [])).rows.map(decodeKill)),

    quotaUsage: (counters) =>
      read("read quota counters", async () => {
        const found = new Map((await access.query(sql.usage, [counters])).rows.map((r) => [field(r, "counter", "quota counter"), num(r, "used", "quota counter")]));
        return new Map(counters.map((c) => [c, found.get(c) ?? 0]));
      }),
    consumeQuota: ({ tenant, key, charges, now }) =>
      write("charge a quota", async () => {
        const row = (await access.query(sql.consume, [
          tenant, key, charges.map((c) => c.counter), charges.map((c) => c.limit), charges.map((c) => c.amount), now,
        ])).rows[0];
        return JSON.parse(field(row, "verdict", "quota verdict")) as QuotaVerdict;
      }),
    listQuotas: (options = {}) =>
      read("list quota counters", async () =>
        (await access.query(sql.listCounters, [options.prefix ?? "", options.limit ?? 100])).rows.map((r) => ({
          counter: field(r, "counter", "quota counter"), used: num(r, "used", "quota counter"), updatedAt: num(r, "updated_at", "quota counter"),
        }))),

    hitRate: ({ tenant, key, scopes, counts, now }) =>
      write("count a call in its rate windows", async () => {
        const row = (await access.query(sql.hitRate, [
          tenant, key, scopes, counts.map((c) => c.breaker), counts.map((c) => c.scope), counts.map((c) => c.limit), counts.map((c) => c.windowMs), now,
        ])).rows[0];
        const verdict = JSON.parse(field(row, "verdict", "rate verdict")) as { ok: boolean; opened?: boolean; breaker?: Record<string, unknown> };
        if (verdict.ok) return { ok: true } satisfies RateVerdict;
        return { ok: false, opened: verdict.opened === true, breaker: decodeBreakerJson(verdict.breaker ?? {}) } satisfies RateVerdict;
      }),
    listBreakers: (options = {}) =>
      read("list rate breakers", async () => (await access.query(sql.listBreakers, [options.includeClosed === true, options.limit ?? 100])).rows.map(decodeBreaker)),
    countBreakers: (options = {}) =>
      read("count rate breakers", async () =>
        countIn((await access.query(options.includeClosed === true ? sql.countAllBreakers : sql.countOpenBreakers, [])).rows, "the breaker count")),
    closeBreaker: (id, by, now) =>
      write("close a rate breaker", async () => {
        const row = (await access.query(sql.closeBreaker, [id, by, now])).rows[0];
        return row && decodeBreaker(row);
      }),

    putApproval: (a) =>
      write("file an approval request", async () => {
        const inserted = (await access.query(sql.putApproval, [
          a.id, a.tenant, a.key, a.tool, a.effect, a.task, a.agent, a.toolUseId, JSON.stringify(a.input),
          a.preview === null ? null : JSON.stringify(a.preview), JSON.stringify(a.reasons), a.digest, a.policyVersion,
          a.requestedBy, a.requestedAt, a.expiresAt,
        ])).rows[0];
        if (inserted) return { created: true, approval: decodeApproval(inserted) };
        const existing = (await access.query(sql.getApproval, [a.id])).rows[0];
        if (!existing) throw new Error(`approval ${a.id} conflicted but cannot be read`);
        return { created: false, approval: decodeApproval(existing) };
      }),
    getApproval: (id) =>
      read("read an approval", async () => {
        const row = (await access.query(sql.getApproval, [id])).rows[0];
        return row && decodeApproval(row);
      }),
    listApprovals: (q = {}) =>
      read("list approvals", async () => {
        const { statement, values } = approvalsSql(access.schema, approvalStatements, q, "list");
        return (await access.query(statement, [...values, q.limit ?? 100])).rows.map(decodeApproval);
      }),
    countApprovals: (q = {}) =>
      read("count approvals", async () => {
        const { statement, values } = approvalsSql(access.schema, approvalStatements, q, "count");
        return countIn((await access.query(statement, values)).rows, "the approval count");
      }),
    async moveApproval(id, from, move, now) {
      if (!canMoveApproval(from, move.to)) throw new EffectgateError("EG_ILLEGAL_TRANSITION", `approval ${id} cannot move from ${from} to ${move.to}`);
      const decided = move.to === "approved" || move.to === "denied";
      return write("record an approval decision", async () => {
        const row = (await access.query(sql.moveApproval, [
          id, from, move.to, decided, move.by ?? null, move.note ?? null, now, move.to === "consumed", move.expiresAt ?? null,
        ])).rows[0];
        return row && decodeApproval(row);
      });
    },
  };
}

function decodeKill(row: RawRow): KillSwitch {
  const f = fieldsOf(row, "a kill switch");
  const tenant = f.text("tenant");
  const agent = f.text("agent");
  return {
    tenant: tenant === EVERY ? null : tenant, agent: agent === EVERY ? null : agent, by: f.text("by_whom"),
    reason: f.optionalText("reason"), since: f.num("since"),
  };
}

function decodeBreaker(row: RawRow): Breaker {
  const f = fieldsOf(row, `breaker ${row.id ?? "?"}`);
  return {
    id: f.text("id"), tenant: f.text("tenant"), scope: f.text("scope"), state: f.text("state") === "open" ? "open" : "closed",
    reason: f.text("reason"), openedAt: f.num("opened_at"), closedBy: f.optionalText("closed_by"),
    closedAt: row.closed_at == null ? null : f.num("closed_at"),
  };
}

/** A breaker as row_to_json gives it (numbers as JSON numbers). */
function decodeBreakerJson(raw: Record<string, unknown>): Breaker {
  const text: Record<string, string | null> = {};
  for (const [k, v] of Object.entries(raw)) text[k] = typeof v === "string" || typeof v === "number" ? String(v) : null;
  return decodeBreaker(text);
}

function approvalOf(row: RawRow, schema: string): ApprovalRecord {
  const f = fieldsOf(row, `approval ${row.id ?? "?"}`, `${schema}.approvals WHERE id = ${literal(row.id)}`);
  const state = f.text("state");
  if (!(APPROVAL_STATES as readonly string[]).includes(state)) throw f.bad(`has an unknown state ${JSON.stringify(state)}`);
  const effect = f.text("effect");
  if (!isEffectClass(effect)) throw f.bad(`has an unknown effect ${JSON.stringify(effect)}`);
  return {
    id: f.text("id"), tenant: f.text("tenant"), key: f.text("key"), tool: f.text("tool"), effect, task: f.text("task"),
    agent: f.optionalText("agent"), toolUseId: f.text("tool_use_id"), input: f.json<Json>("input"),
    preview: f.optionalJson<DryRunPreview>("preview"), reasons: f.json<string[]>("reasons"), digest: f.text("digest"),
    policyVersion: f.text("policy_version"), state: state as ApprovalState, requestedBy: f.text("requested_by"),
    requestedAt: f.num("requested_at"), expiresAt: f.num("expires_at"), decidedBy: f.optionalText("decided_by"),
    decidedAt: row.decided_at == null ? null : f.num("decided_at"), note: f.optionalText("note"),
    consumedAt: row.consumed_at == null ? null : f.num("consumed_at"),
  };
}

/** One text field of a one-row answer (a counter, a verdict), refused by name when missing. */
const field = (row: RawRow | undefined, name: string, what: string): string => fieldsOf(row ?? {}, `a ${what}`).text(name);
const num = (row: RawRow, name: string, what: string): number => fieldsOf(row, `a ${what}`).num(name);
