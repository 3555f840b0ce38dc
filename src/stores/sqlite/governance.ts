/**
 * Governance state in the SQLite ledger file (sqliteLedger's `governance`), in the tables of
 * the ledger's governance migration (migrations.ts). Quota charges and rate windows
 * run in one IMMEDIATE transaction each: the write lock is taken before reading, so workers in
 * several processes sharing the file can never admit more than a limit between them.
 */
import type Database from "better-sqlite3";
import { EffectgateError } from "../../core/errors.js";
import { EFFECT_CLASSES, type EffectClass } from "../../core/effect-class.js";
import { type Json } from "../../core/json.js";
import { canMoveApproval } from "../../contracts/approval-states.js";
import { RowDamage } from "../row-damage.js";
import { approvalFilters } from "../sql/approval-filters.js";
import { killSwitchLookups } from "../sql/kill-switch-lookups.js";
import { preparedOnce, type SqliteAccess } from "./access.js";
import { APPROVAL_STATES, type ApprovalCountQuery, type ApprovalRecord, type ApprovalState, type Breaker, type GovernanceStore, type KillSwitch, type QuotaCounter } from "../../contracts/governance.js";
import { type DryRunPreview } from "../../core/hooks.js";

const EVERY = "";

interface KillRow { tenant: string; agent: string; by_whom: string; reason: string | null; since: number }
interface BreakerRow { id: string; tenant: string; scope: string; state: string; reason: string; opened_at: number; closed_by: string | null; closed_at: number | null }
interface ApprovalRow {
  id: string; tenant: string; key: string; tool: string; effect: string; task: string; agent: string | null; tool_use_id: string;
  input: string; preview: string | null; reasons: string; digest: string; policy_version: string; state: string; requested_by: string;
  requested_at: number; expires_at: number; decided_by: string | null; decided_at: number | null; note: string | null; consumed_at: number | null;
}

const statements = preparedOnce(prepare);
/** The approvals listings and counts prepared so far, by text (one per combination of filters). */
const approvalQueries = preparedOnce(() => new Map<string, Database.Statement>());

/** The approvals statement for `query`'s filters: the listing (oldest first, LIMIT @limit) or the count (n), and its values. */
export function approvalsSql(query: ApprovalCountQuery, what: "list" | "count"): { readonly text: string; readonly values: Record<string, string> } {
  const values: Record<string, string> = {};
  const where = approvalFilters(query, (value) => {
    const name = `p${Object.keys(values).length}`;
    values[name] = value;
    return `@${name}`;
  });
  const filtered = where.length > 0 ? ` WHERE ${where.join(" AND ")}` : "";
  return {
    text: what === "list" ? `SELECT * FROM approvals${filtered} ORDER BY requested_at, id LIMIT @limit` : `SELECT count(*) AS n FROM approvals${filtered}`,
    values,
  };
}

export function sqliteGovernance(access: SqliteAccess): GovernanceStore {
  const run = <T>(what: string, fn: (s: ReturnType<typeof prepare>, db: Database.Database) => T): Promise<T> =>
    access.run(what, (db) => fn(statements(db), db));

  const approvalQuery = (db: Database.Database, text: string): Database.Statement => {
    const prepared = approvalQueries(db);
    let statement = prepared.get(text);
    if (!statement) prepared.set(text, (statement = db.prepare(text)));
    return statement;
  };

  const damaged = (id: string, what: string) => new RowDamage(`approval ${id}`, `has unreadable ${what}`);

  function decodeApproval(row: ApprovalRow): ApprovalRecord {
    const json = <T>(text: string, what: string): T => {
      try {
        return JSON.parse(text) as T;
      } catch {
        throw damaged(row.id, what);
      }
    };
    if (!(APPROVAL_STATES as readonly string[]).includes(row.state)) throw damaged(row.id, `state ${JSON.stringify(row.state)}`);
    if (!EFFECT_CLASSES.includes(row.effect as EffectClass)) throw damaged(row.id, `effect ${JSON.stringify(row.effect)}`);
    return {
      id: row.id, tenant: row.tenant, key: row.key, tool: row.tool, effect: row.effect as EffectClass, task: row.task, agent: row.agent,
      toolUseId: row.tool_use_id, input: json<Json>(row.input, "input"),
      preview: row.preview === null ? null : json<DryRunPreview>(row.preview, "preview"),
      reasons: json<string[]>(row.reasons, "reasons"), digest: row.digest, policyVersion: row.policy_version,
      state: row.state as ApprovalState, requestedBy: row.requested_by, requestedAt: row.requested_at, expiresAt: row.expires_at,
      decidedBy: row.decided_by, decidedAt: row.decided_at, note: row.note, consumedAt: row.consumed_at,
    };
  }

  return {
    async activeKillSwitch(tenant, agent) {
      return run("read the kill switches", (s) => {
        const row = s.activeKill.get({ tenant, agent: agent ?? EVERY }) as KillRow | undefined;
        return row && decodeKill(row);
      });
    },
    async setKillSwitch(target, on, meta, now) {
      return run(on ? "set a kill switch" : "clear a kill switch", (s) => {
        const key = { tenant: target.tenant ?? EVERY, agent: target.agent ?? EVERY };
        if (!on) return s.clearKill.run(key).changes === 1;
        return s.setKill.run({ ...key, by: meta.by, reason: meta.reason ?? null, now }).changes === 1;
      });
    },
    async listKillSwitches() {
      return run("list the kill switches", (s) => (s.listKill.all() as KillRow[]).map(decodeKill));
    },

    async quotaUsage(names) {
      return run("read quota counters", (s) => new Map(names.map((n) => [n, (s.counter.get(n) as { used: number } | undefined)?.used ?? 0])));
    },
    async consumeQuota({ tenant, key, charges, now }) {
      return run("charge a quota", (s, db) => db.transaction(() => {
        if (s.use.get(tenant, key)) return { ok: true as const, charged: false };
        for (const c of charges) {
          const used = (s.counter.get(c.counter) as { used: number } | undefined)?.used ?? 0;
          if (used + c.amount > c.limit) return { ok: false as const, counter: c.counter, used, limit: c.limit, amount: c.amount };
        }
        for (const c of charges) s.charge.run({ counter: c.counter, amount: c.amount, now });
        s.addUse.run({ tenant, key, now });
        return { ok: true as const, charged: true };
      }).immediate());
    },
    async listQuotas(options = {}) {
      return run("list quota counters", (s) =>
        (s.listCounters.all({ prefix: options.prefix ?? "", limit: options.limit ?? 100 }) as { counter: string; used: number; updated_at: number }[])
          .map((r): QuotaCounter => ({ counter: r.counter, used: r.used, updatedAt: r.updated_at })));
    },

    async hitRate({ tenant, key, scopes, counts, now }) {
      return run("count a call in its rate windows", (s, db) => db.transaction(() => {
        const [a, b, c] = scopes;
        const open = s.openBreaker.get({ a: a ?? null, b: b ?? null, c: c ?? null }) as BreakerRow | undefined;
        if (open) return { ok: false as const, breaker: decodeBreaker(open), opened: false };
        const fresh: typeof counts[number][] = [];
        for (const count of counts) {
          s.pruneWindow.run({ breaker: count.breaker, before: now - count.windowMs });
          if (s.event.get({ breaker: count.breaker, tenant, key })) continue;
          const inWindow = (s.countWindow.get(count.breaker) as { n: number }).n;
          if (inWindow + 1 > count.limit) {
            const reason = `more than ${count.limit} call${count.limit === 1 ? "" : "s"} within ${count.windowMs} ms`;
            const [row] = s.openIt.all({ id: count.breaker, tenant, scope: count.scope, reason, now }) as BreakerRow[];
            if (!row) throw new Error(`breaker ${count.breaker} could not be opened`);
            return { ok: false as const, breaker: decodeBreaker(row), opened: true };
          }
          fresh.push(count);
        }
        for (const count of fresh) s.addEvent.run({ breaker: count.breaker, tenant, key, now });
        return { ok: true as const };
      }).immediate());
    },
    async listBreakers(options = {}) {
      return run("list rate breakers", (s) =>
        (s.listBreakers.all({ all: options.includeClosed === true ? 1 : 0, limit: options.limit ?? 100 }) as BreakerRow[]).map(decodeBreaker));
    },
    async countBreakers(options = {}) {
      return run("count rate breakers", (s) => ((options.includeClosed === true ? s.countAllBreakers : s.countOpenBreakers).get() as { n: number }).n);
    },
    async closeBreaker(id, by, now) {
      return run("close a rate breaker", (s, db) => db.transaction(() => {
        const [row] = s.closeIt.all({ id, by, now }) as BreakerRow[];
        if (!row) return undefined;
        s.forgetWindow.run(id);
        return decodeBreaker(row);
      }).immediate());
    },

    async putApproval(request) {
      return run("file an approval request", (s) => {
        const inserted = s.putApproval.run({
          id: request.id, tenant: request.tenant, key: request.key, tool: request.tool, effect: request.effect, task: request.task,
          agent: request.agent, tool_use_id: request.toolUseId, input: JSON.stringify(request.input),
          preview: request.preview === null ? null : JSON.stringify(request.preview), reasons: JSON.stringify(request.reasons),
          digest: request.digest, policy_version: request.policyVersion, requested_by: request.requestedBy,
          requested_at: request.requestedAt, expires_at: request.expiresAt,
        }).changes === 1;
        const row = s.getApproval.get(request.id) as ApprovalRow | undefined;
        if (!row) throw new Error(`approval ${request.id} was filed but cannot be read back`);
        return { created: inserted, approval: decodeApproval(row) };
      });
    },
    async getApproval(id) {
      return run("read an approval", (s) => {
        const row = s.getApproval.get(id) as ApprovalRow | undefined;
        return row && decodeApproval(row);
      });
    },
    async listApprovals(query = {}) {
      return run("list approvals", (_s, db) => {
        const { text, values } = approvalsSql(query, "list");
        return (approvalQuery(db, text).all({ ...values, limit: query.limit ?? 100 }) as ApprovalRow[]).map(decodeApproval);
      });
    },
    async countApprovals(query = {}) {
      return run("count approvals", (_s, db) => {
        const { text, values } = approvalsSql(query, "count");
        return (approvalQuery(db, text).get(values) as { n: number }).n;
      });
    },
    async moveApproval(id, from, move, now) {
      if (!canMoveApproval(from, move.to)) {
        throw new EffectgateError("EG_ILLEGAL_TRANSITION", `approval ${id} cannot move from ${from} to ${move.to}`);
      }
      return run("record an approval decision", (s) => {
        const decided = move.to === "approved" || move.to === "denied";
        const [row] = s.moveApproval.all({
          id, from, to: move.to, now, decided: decided ? 1 : 0, by: move.by ?? null, note: move.note ?? null,
          consumed: move.to === "consumed" ? 1 : 0, expires_at: move.expiresAt ?? null,
        }) as ApprovalRow[];
        return row && decodeApproval(row);
      });
    },
  };
}

function decodeKill(row: KillRow): KillSwitch {
  return {
    tenant: row.tenant === EVERY ? null : row.tenant, agent: row.agent === EVERY ? null : row.agent,
    by: row.by_whom, reason: row.reason, since: row.since,
  };
}

function decodeBreaker(row: BreakerRow): Breaker {
  return {
    id: row.id, tenant: row.tenant, scope: row.scope, state: row.state === "open" ? "open" : "closed", reason: row.reason,
    openedAt: row.opened_at, closedBy: row.closed_by, closedAt: row.closed_at,
  };
}

// Writes that return rows run with .all() (see calls.ts: .get() would leave the statement unfinished).
function prepare(db: Database.Database) {
  return {
    activeKill: db.prepare(`${killSwitchLookups("kill_switches", "*", "@tenant", "@agent")} LIMIT 1`),
    setKill: db.prepare(
      `INSERT INTO kill_switches (tenant, agent, by_whom, reason, since) VALUES (@tenant, @agent, @by, @reason, @now)
       ON CONFLICT (tenant, agent) DO NOTHING`,
    ),
    clearKill: db.prepare(`DELETE FROM kill_switches WHERE tenant = @tenant AND agent = @agent`),
    listKill: db.prepare(`SELECT * FROM kill_switches ORDER BY since`),
    counter: db.prepare(`SELECT used FROM quota_counters WHERE counter = ?`),
    charge: db.prepare(
      `INSERT INTO quota_counters (counter, used, updated_at) VALUES (@counter, @amount, @now)
       ON CONFLICT (counter) DO UPDATE SET used = used + excluded.used, updated_at = excluded.updated_at`,
    ),
    use: db.prepare(`SELECT 1 FROM quota_uses WHERE tenant = ? AND key = ?`),
    addUse: db.prepare(`INSERT INTO quota_uses (tenant, key, at) VALUES (@tenant, @key, @now)`),
    listCounters: db.prepare(`SELECT * FROM quota_counters WHERE substr(counter, 1, length(@prefix)) = @prefix ORDER BY counter LIMIT @limit`),
    openBreaker: db.prepare(`SELECT * FROM breakers WHERE state = 'open' AND scope IN (@a, @b, @c) LIMIT 1`),
    pruneWindow: db.prepare(`DELETE FROM rate_events WHERE breaker = @breaker AND at <= @before`),
    event: db.prepare(`SELECT 1 FROM rate_events WHERE breaker = @breaker AND tenant = @tenant AND key = @key`),
    countWindow: db.prepare(`SELECT count(*) AS n FROM rate_events WHERE breaker = ?`),
    addEvent: db.prepare(`INSERT INTO rate_events (breaker, tenant, key, at) VALUES (@breaker, @tenant, @key, @now)`),
    openIt: db.prepare(
      `INSERT INTO breakers (id, tenant, scope, state, reason, opened_at, closed_by, closed_at)
       VALUES (@id, @tenant, @scope, 'open', @reason, @now, NULL, NULL)
       ON CONFLICT (id) DO UPDATE SET state = 'open', reason = excluded.reason, opened_at = excluded.opened_at, closed_by = NULL, closed_at = NULL
       RETURNING *`,
    ),
    listBreakers: db.prepare(`SELECT * FROM breakers WHERE (@all OR state = 'open') ORDER BY opened_at LIMIT @limit`),
    countOpenBreakers: db.prepare(`SELECT count(*) AS n FROM breakers WHERE state = 'open'`),
    countAllBreakers: db.prepare(`SELECT count(*) AS n FROM breakers`),
    closeIt: db.prepare(`UPDATE breakers SET state = 'closed', closed_by = @by, closed_at = @now WHERE id = @id AND state = 'open' RETURNING *`),
    forgetWindow: db.prepare(`DELETE FROM rate_events WHERE breaker = ?`),
    putApproval: db.prepare(
      `INSERT INTO approvals (id, tenant, key, tool, effect, task, agent, tool_use_id, input, preview, reasons, digest, policy_version,
         state, requested_by, requested_at, expires_at, decided_by, decided_at, note, consumed_at)
       VALUES (@id, @tenant, @key, @tool, @effect, @task, @agent, @tool_use_id, @input, @preview, @reasons, @digest, @policy_version,
         'pending', @requested_by, @requested_at, @expires_at, NULL, NULL, NULL, NULL)
       ON CONFLICT (id) DO NOTHING`,
    ),
    getApproval: db.prepare(`SELECT * FROM approvals WHERE id = ?`),
    moveApproval: db.prepare(
      `UPDATE approvals SET
         state = @to,
         decided_by = CASE WHEN @decided THEN @by ELSE decided_by END,
         decided_at = CASE WHEN @decided THEN @now ELSE decided_at END,
         note = CASE WHEN @decided THEN @note ELSE note END,
         consumed_at = CASE WHEN @consumed THEN @now ELSE consumed_at END,
         expires_at = COALESCE(@expires_at, expires_at)
       WHERE id = @id AND state = @from
       RETURNING *`,
    ),
  };
}
