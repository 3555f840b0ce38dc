/**
 * Governance state in the PostgreSQL ledger's schema (postgresLedger's `governance`), in the
 * tables and functions of the ledger's governance migration (src/ledger/postgres/migrations.ts,
 * `governanceMigrationSql`). Every operation is one statement:
 * - `consumeQuota` and `hitRate` call a PL/pgSQL function that locks what it counts (the
 *   counters' rows in a fixed order; an advisory lock per window) before reading, so workers on
 *   any number of machines never admit more than a limit between them;
 * - approvals move compare-and-set on their state in one UPDATE.
 * Rows come back as raw text and are checked field by field; a damaged row is refused by name.
 */
import { createHash } from "node:crypto";
import { EffectgateError } from "../../core/errors.js";
import { EFFECT_CLASSES, type EffectClass, type Json } from "../../core/tool.js";
import { canMoveApproval } from "../../governance/approvals.js";
import {
  APPROVAL_STATES, type ApprovalRecord, type ApprovalState, type Breaker, type DryRunPreview, type GovernanceStore, type KillSwitch,
  type QuotaVerdict, type RateVerdict,
} from "../../contracts/governance.js";

type RawRow = Readonly<Record<string, string | null | undefined>>;

export interface PgStatement {
  readonly text: string;
  readonly name: string;
}

/** How the ledger lends its pool: `run` opens the ledger and maps errors to its codes; `query` returns raw text rows. */
export interface PostgresGovernanceAccess {
  readonly location: string;
  run<T>(what: string, writes: boolean, fn: () => Promise<T>): Promise<T>;
  query(statement: PgStatement | string, values: readonly unknown[]): Promise<{ rows: RawRow[]; rowCount: number | null }>;
}

const EVERY = "";
/** Advisory-lock namespace for rate windows ("EGRW"); the second key is hashtext(breaker id). */
const RATE_LOCK = 0x45475257;

/** The governance tables and functions, for schema `s` (already quoted). Used by the ledger's migration. */
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

const named = (text: string): PgStatement => ({ text, name: `effectgate_gv_${createHash("sha256").update(text).digest("hex").slice(0, 24)}` });

const APPROVAL_COLS = "id, tenant, key, tool, effect, task, agent, tool_use_id, input, preview, reasons, digest, policy_version, state, " +
  "requested_by, requested_at, expires_at, decided_by, decided_at, note, consumed_at";
const BREAKER_COLS = "id, tenant, scope, state, reason, opened_at, closed_by, closed_at";

function statements(s: string) {
  return {
    activeKill: named(`SELECT tenant, agent, by_whom, reason, since FROM ${s}.kill_switches WHERE tenant IN ('', $1) AND agent IN ('', $2) LIMIT 1`),
    setKill: named(`INSERT INTO ${s}.kill_switches (tenant, agent, by_whom, reason, since) VALUES ($1, $2, $3, $4, $5) ON CONFLICT (tenant, agent) DO NOTHING`),
    clearKill: named(`DELETE FROM ${s}.kill_switches WHERE tenant = $1 AND agent = $2`),
    listKill: named(`SELECT tenant, agent, by_whom, reason, since FROM ${s}.kill_switches ORDER BY since, tenant, agent`),
    usage: named(`SELECT counter, used FROM ${s}.quota_counters WHERE counter = ANY($1::text[])`),
    consume: named(`SELECT ${s}.consume_quota($1, $2, $3::text[], $4::double precision[], $5::double precision[], $6::bigint) AS verdict`),
    listCounters: named(`SELECT counter, used, updated_at FROM ${s}.quota_counters WHERE starts_with(counter, $1) ORDER BY counter LIMIT $2`),
    hitRate: named(`SELECT ${s}.hit_rate($1, $2, $3::text[], $4::text[], $5::text[], $6::integer[], $7::bigint[], $8::bigint) AS verdict`),
    listBreakers: named(`SELECT ${BREAKER_COLS} FROM ${s}.breakers WHERE ($1::boolean OR state = 'open') ORDER BY opened_at, id LIMIT $2`),
    closeBreaker: named(`WITH closed AS (
        UPDATE ${s}.breakers SET state = 'closed', closed_by = $2, closed_at = $3::bigint WHERE id = $1 AND state = 'open' RETURNING ${BREAKER_COLS}
      ), forget AS (
        DELETE FROM ${s}.rate_events WHERE breaker = $1 AND EXISTS (SELECT 1 FROM closed)
      )
      SELECT ${BREAKER_COLS} FROM closed`),
    putApproval: named(`INSERT INTO ${s}.approvals (${APPROVAL_COLS})
      VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9::json, $10::json, $11::json, $12, $13, 'pending', $14, $15::bigint, $16::bigint, NULL, NULL, NULL, NULL)
      ON CONFLICT (id) DO NOTHING RETURNING ${APPROVAL_COLS}`),
    getApproval: named(`SELECT ${APPROVAL_COLS} FROM ${s}.approvals WHERE id = $1`),
    listApprovals: named(`SELECT ${APPROVAL_COLS} FROM ${s}.approvals
      WHERE ($1::text IS NULL OR state = $1) AND ($2::text IS NULL OR tenant = $2) ORDER BY requested_at, id LIMIT $3`),
    moveApproval: named(`UPDATE ${s}.approvals SET
        state = $3,
        decided_by = CASE WHEN $4::boolean THEN $5 ELSE decided_by END,
        decided_at = CASE WHEN $4::boolean THEN $7::bigint ELSE decided_at END,
        note = CASE WHEN $4::boolean THEN $6 ELSE note END,
        consumed_at = CASE WHEN $8::boolean THEN $7::bigint ELSE consumed_at END,
        expires_at = COALESCE($9::bigint, expires_at)
      WHERE id = $1 AND state = $2
      RETURNING ${APPROVAL_COLS}`),
  };
}

class Damage extends Error {}

export function postgresGovernance(s: string, access: PostgresGovernanceAccess): GovernanceStore {
  const sql = statements(s);
  const guarded = <T>(what: string, writes: boolean, fn: () => Promise<T>) =>
    access.run(what, writes, async () => {
      try {
        return await fn();
      } catch (err) {
        if (!(err instanceof Damage)) throw err;
        throw new EffectgateError("EG_LEDGER_CORRUPT", `the ledger ${access.location} holds damaged governance state: ${err.message}; it was left as it is`);
      }
    });
  const read = <T>(what: string, fn: () => Promise<T>) => guarded(what, false, fn);
  const write = <T>(what: string, fn: () => Promise<T>) => guarded(what, true, fn);

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
        return JSON.parse(field(row ?? {}, "verdict", "quota verdict")) as QuotaVerdict;
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
        const verdict = JSON.parse(field(row ?? {}, "verdict", "rate verdict")) as { ok: boolean; opened?: boolean; breaker?: Record<string, unknown> };
        if (verdict.ok) return { ok: true } satisfies RateVerdict;
        return { ok: false, opened: verdict.opened === true, breaker: decodeBreakerJson(verdict.breaker ?? {}) } satisfies RateVerdict;
      }),
    listBreakers: (options = {}) =>
      read("list rate breakers", async () => (await access.query(sql.listBreakers, [options.includeClosed === true, options.limit ?? 100])).rows.map(decodeBreaker)),
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
      read("list approvals", async () => (await access.query(sql.listApprovals, [q.state ?? null, q.tenant ?? null, q.limit ?? 100])).rows.map(decodeApproval)),
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

function field(row: RawRow, name: string, what: string): string {
  const value = row[name];
  if (typeof value !== "string") throw new Damage(`a ${what} has no ${name}`);
  return value;
}

function num(row: RawRow, name: string, what: string): number {
  const value = Number(field(row, name, what));
  if (!Number.isFinite(value)) throw new Damage(`a ${what} has an unreadable ${name} (${JSON.stringify(row[name])})`);
  return value;
}

const optionalNum = (row: RawRow, name: string, what: string): number | null => (row[name] == null ? null : num(row, name, what));

function decodeKill(row: RawRow): KillSwitch {
  const tenant = field(row, "tenant", "kill switch");
  const agent = field(row, "agent", "kill switch");
  return {
    tenant: tenant === EVERY ? null : tenant, agent: agent === EVERY ? null : agent, by: field(row, "by_whom", "kill switch"),
    reason: row.reason ?? null, since: num(row, "since", "kill switch"),
  };
}

function decodeBreaker(row: RawRow): Breaker {
  const what = `breaker ${row.id ?? "?"}`;
  return {
    id: field(row, "id", what), tenant: field(row, "tenant", what), scope: field(row, "scope", what),
    state: field(row, "state", what) === "open" ? "open" : "closed", reason: field(row, "reason", what), openedAt: num(row, "opened_at", what),
    closedBy: row.closed_by ?? null, closedAt: optionalNum(row, "closed_at", what),
  };
}

/** A breaker as row_to_json gives it (numbers as JSON numbers). */
function decodeBreakerJson(raw: Record<string, unknown>): Breaker {
  const text: Record<string, string | null> = {};
  for (const [k, v] of Object.entries(raw)) text[k] = typeof v === "string" || typeof v === "number" ? String(v) : null;
  return decodeBreaker(text);
}

function decodeApproval(row: RawRow): ApprovalRecord {
  const what = `approval ${row.id ?? "?"}`;
  const json = <T>(name: string): T => {
    try {
      return JSON.parse(field(row, name, what)) as T;
    } catch (err) {
      if (err instanceof Damage) throw err;
      throw new Damage(`${what} has unreadable ${name}`);
    }
  };
  const state = field(row, "state", what);
  if (!(APPROVAL_STATES as readonly string[]).includes(state)) throw new Damage(`${what} has an unknown state ${JSON.stringify(state)}`);
  const effect = field(row, "effect", what);
  if (!EFFECT_CLASSES.includes(effect as EffectClass)) throw new Damage(`${what} has an unknown effect ${JSON.stringify(effect)}`);
  return {
    id: field(row, "id", what), tenant: field(row, "tenant", what), key: field(row, "key", what), tool: field(row, "tool", what),
    effect: effect as EffectClass, task: field(row, "task", what), agent: row.agent ?? null, toolUseId: field(row, "tool_use_id", what),
    input: json<Json>("input"), preview: row.preview == null ? null : json<DryRunPreview>("preview"), reasons: json<string[]>("reasons"),
    digest: field(row, "digest", what), policyVersion: field(row, "policy_version", what), state: state as ApprovalState,
    requestedBy: field(row, "requested_by", what), requestedAt: num(row, "requested_at", what), expiresAt: num(row, "expires_at", what),
    decidedBy: row.decided_by ?? null, decidedAt: optionalNum(row, "decided_at", what), note: row.note ?? null,
    consumedAt: optionalNum(row, "consumed_at", what),
  };
}
