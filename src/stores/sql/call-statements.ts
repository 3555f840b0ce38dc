/**
 * The call store's statements, once for both SQL dialects (see dialect.ts). They are the SQL
 * form of the rules in src/contracts/call-rules.ts, which the memory store applies directly:
 * every write is compare-and-set on the version (and, for a state change, on the states the
 * move is allowed from), a take-over only when the lease rule says the holder is gone, and every
 * list in one order. Each statement names (tenant, key), the primary key, or walks an index.
 */
import { allowedFrom, CALL_STATES, HELD_STATES, isCallState, type CallState } from "../../core/states.js";
import { isEffectClass } from "../../core/effect-class.js";
import { REPEATED_UNSETTLED } from "../../contracts/call-rules.js";
import type { CallCount, CallCountQuery, ListQuery, RepeatQuery } from "../../contracts/calls.js";
import { RowDamage } from "../row-damage.js";
import { compile, type CompiledSql, type Dialect } from "./dialect.js";
import { killSwitchLookups } from "./kill-switch-lookups.js";

/** The columns every statement returns, named rather than `*` (a cached plan survives a column added by a later migration). */
const CALL_COLUMNS = [
  "tenant", "key", "tool", "effect", "task", "tool_use_id", "fingerprint", "input", "input_redacted", "state", "result",
  "error", "owner", "lease_expires_at", "attempts", "fence", "started_at", "claim_token", "version", "created_at", "updated_at",
  "intent",
] as const;
const COLS = CALL_COLUMNS.join(", ");

const inList = (states: readonly CallState[]) => (states.length === 0 ? "(NULL)" : `(${states.map((s) => `'${s}'`).join(", ")})`);
const HELD = inList(HELD_STATES);

/** The lease rule (contracts/call-rules.ts `leaseRanOut`) in SQL. */
const LEASE_RAN_OUT = `(owner IS NULL OR lease_expires_at IS NULL OR lease_expires_at <= {now})`;

/** The last moment the holder being replaced could have sent a request (contracts/call-rules.ts `takeOverRecord`). */
const LAST_POSSIBLE_SEND = `(CASE WHEN owner IS NULL THEN started_at WHEN lease_expires_at IS NULL OR lease_expires_at > {now} THEN {now} ELSE lease_expires_at END)`;

/** The repeat rule (contracts/call-rules.ts `isRepeatOf`) for the row `r`; walks calls_by_task (a task holds few calls). */
const REPEATS = `r.tenant = :tenant:text AND r.task = :task:text AND r.intent = :intent:text AND r.key <> :key:text
  AND (r.state IN ${inList(REPEATED_UNSETTLED)} OR (r.state = 'completed' AND r.updated_at >= {now} - :window_ms:bigint))`;

/**
 * The optional parts of `list`'s WHERE, in this order (a statement is compiled per combination
 * given), each the SQL form of one clause of contracts/call-rules.ts `matchesList`. A task with
 * its tenant has an index in the list order (migration 7: calls_by_task), a few-record state has
 * SQLite's partial indexes (below) or PostgreSQL's calls_by_state; the other filters walk
 * calls_by_created in the list order and check each record: a page of a common value costs about
 * a page, a rare tenant or tool a scan. Not one index per filter: each is one more B-tree page
 * written by every claim (docs/BENCHMARKS.md, "Ledger search indexes").
 */
const LIST_CONDITIONS = {
  tenant: "tenant = :tenant:text",
  state: "state = :state:text",
  tool: "tool = :tool:text",
  key: "key = :key:text",
  task: "task = :task:text",
  createdFrom: "created_at >= :created_from:bigint",
  createdTo: "created_at <= :created_to:bigint",
  // The first bound lets an index on (filter, created_at, …) seek to the cursor; the row value is the exact rule.
  after: "created_at >= :after_at:bigint AND (created_at, tenant, key) > (:after_at:bigint, :after_tenant:text, :after_key:text)",
} as const satisfies Record<keyof Omit<ListQuery, "limit">, string>;
type ListFilter = keyof typeof LIST_CONDITIONS;
const LIST_FILTERS = Object.keys(LIST_CONDITIONS) as ListFilter[];

/**
 * The few-record states SQLite keeps partial indexes of (migration 1: calls_unsettled,
 * calls_attention), each with its index's condition. SQLite walks a partial index only for a
 * query whose WHERE contains the index's condition word for word, so a list by one of these
 * states repeats it: the list then costs the unsettled or attention-needing calls, not the
 * ledger, and no index of every call's state is kept up on every write. (PostgreSQL reads the
 * repeat as the no-op it is, and has calls_by_state.)
 */
const PARTIAL_STATE_INDEXES: readonly { readonly states: readonly CallState[]; readonly condition: string }[] = [
  { states: HELD_STATES, condition: `state IN ${HELD}` },
  { states: ["needs_human", "compensation_failed"], condition: `state IN ('needs_human', 'compensation_failed')` },
];

/** A statement compiled for one query's filters (`list`, `countByStateAndEffect`), and its named values. */
export interface QueryStatement {
  readonly sql: CompiledSql;
  readonly values: Readonly<Record<string, unknown>>;
}
/** The update rule (contracts/call-rules.ts `applyUpdate`) for a move to `to`: fields not given keep their value; no owner, no lease. */
const UPDATE = (to: CallState) => `UPDATE {calls} SET
     state = :state:text,
     result = CASE WHEN :set_result:boolean THEN :result:json ELSE result END,
     error = CASE WHEN :set_error:boolean THEN :error:text ELSE error END,
     owner = CASE WHEN :set_owner:boolean THEN :owner:text ELSE owner END,
     lease_expires_at = CASE
       WHEN (CASE WHEN :set_owner:boolean THEN :owner:text ELSE owner END) IS NULL THEN NULL
       WHEN :lease_ms:bigint IS NOT NULL THEN {now} + :lease_ms:bigint
       ELSE lease_expires_at END,
     attempts = attempts + :count_attempt:integer,
     started_at = CASE WHEN :count_attempt:integer = 1 OR :send_ended:boolean THEN {now} ELSE started_at END,
     version = version + 1,
     updated_at = {now}
   {from_clock}
   WHERE tenant = :tenant:text AND key = :key:text AND version = :version:integer AND state IN ${inList(allowedFrom(to))}`;

/** The take-over rule (contracts/call-rules.ts `takeOverRecord`): the fence goes up by at least one. */
const TAKE_OVER = `UPDATE {calls} SET owner = :owner:text, lease_expires_at = {now} + :lease_ms:bigint,
     fence = CASE WHEN :fence:bigint IS NOT NULL AND :fence:bigint > fence + 1 THEN :fence:bigint ELSE fence + 1 END,
     started_at = CASE WHEN ${LAST_POSSIBLE_SEND} > started_at THEN ${LAST_POSSIBLE_SEND} ELSE started_at END,
     version = version + 1, updated_at = {now}
   {from_clock}
   WHERE tenant = :tenant:text AND key = :key:text AND version = :version:integer AND state IN ${HELD}
     AND (:dead:boolean OR ${LEASE_RAN_OUT})`;

/**
 * What a write of a record the store knows (sql/known-records.ts) returns: only what the store cannot
 * compute from what it wrote. The clock (the database's, in PostgreSQL), the lease (a renewal changes it
 * without a new version) and the take-over's start of the last possible send (judged from that lease).
 */
const UNKNOWABLE = "lease_expires_at, started_at, updated_at";


/** A claim's state and holder: `in_progress`, held by :owner for :lease_ms, its first attempt (contracts/call-rules.ts `newRecord`). */
const CLAIMED = "'in_progress', NULL, NULL, :owner:text, {now} + :lease_ms:bigint, 1";
/** A call answered without running its tool (`answeredRecord`): settled in :state, nobody holding it, no attempt. */
const ANSWERED = ":state:text, :result:json, :error:text, NULL, NULL, 0";

/**
 * The one INSERT of a new record, made only `where` holds (`true`: always); a key that exists is
 * left as it is (ON CONFLICT DO NOTHING). `WHERE` even when always: SQLite needs a WHERE before ON
 * CONFLICT when the rows come from a SELECT.
 */
const insertCall = (where: string, stateAndHolder: string = CLAIMED) => `INSERT INTO {calls} (${COLS})
   SELECT :tenant:text, :key:text, :tool:text, :effect:text, :task:text, :tool_use_id:text, :fingerprint:text, :input:json,
     :input_redacted:boolean, ${stateAndHolder}, coalesce(:fence:bigint, 1), {now},
     :claim_token:text, 1, {now}, {now}, :intent:text
   {from_clock} WHERE ${where}
   ON CONFLICT (tenant, key) DO NOTHING RETURNING ${COLS}`;

export interface CallStatements {
  readonly claim: CompiledSql;
  /** The claim, made only when no kill switch covers :tenant and :agent ('' = every tenant, every agent). */
  readonly claimUnlessHalted: CompiledSql;
  /** The claim, made only when the call repeats no earlier one (REPEATS). */
  readonly claimUnlessRepeated: CompiledSql;
  /** A new record straight in a settled state (:state), nobody holding it, no attempt counted. */
  readonly claimAnswered: CompiledSql;
  /** The earliest call the new one repeats. */
  readonly findRepeat: CompiledSql;
  readonly get: CompiledSql;
  /** One per target state: its allowed-from states spelled out. */
  readonly update: Readonly<Record<CallState, CompiledSql>>;
  /** `update` of the record with :claim_token at :version, as the store knows it: returns only the columns it cannot compute (UNKNOWABLE). */
  readonly updateKnown: Readonly<Record<CallState, CompiledSql>>;
  readonly takeOver: CompiledSql;
  /** `takeOver` of the record with :claim_token at :version, as the store knows it: returns only UNKNOWABLE. */
  readonly takeOverKnown: CompiledSql;
  readonly renew: CompiledSql;
  readonly remove: CompiledSql;
  readonly unsettled: CompiledSql;
  readonly changes: CompiledSql;
  list(query: ListQuery): QueryStatement;
  /** The exact count by state and effect class: one grouped COUNT (n) of every call, or of :tenant's. */
  countByStateAndEffect(query: CallCountQuery): QueryStatement;
  readonly putCheckpoint: CompiledSql;
  readonly getCheckpoint: CompiledSql;
}

export function callStatements(dialect: Dialect): CallStatements {
  const sql = (template: string) => compile(dialect, template);
  const lists = new Map<string, CompiledSql>();
  // Every call (a scan of the table), or one tenant's (the (tenant, key) primary key or unique index).
  const countWhere = (where: string) => sql(`SELECT state, effect, COUNT(*) AS n FROM {calls} ${where} GROUP BY state, effect`);
  const countAll = countWhere("");
  const countOfTenant = countWhere("WHERE tenant = :tenant:text");
  return {
    claim: sql(insertCall("true")),
    claimUnlessHalted: sql(insertCall(`NOT EXISTS (${killSwitchLookups("{kill_switches}", "1", ":tenant:text", ":agent:text")})`)),
    claimUnlessRepeated: sql(insertCall(`NOT EXISTS (SELECT 1 FROM {calls} r WHERE ${REPEATS})`)),
    claimAnswered: sql(insertCall("true", ANSWERED)),
    findRepeat: sql(`SELECT ${COLS.split(", ").map((c) => `r.${c}`).join(", ")} FROM {calls} r {join_clock} WHERE ${REPEATS}
       ORDER BY r.created_at, r.tenant, r.key LIMIT 1`),
    get: sql(`SELECT ${COLS} FROM {calls} WHERE tenant = :tenant:text AND key = :key:text`),
    update: Object.fromEntries(CALL_STATES.map((to) => [to, sql(`${UPDATE(to)} RETURNING ${COLS}`)])) as Record<CallState, CompiledSql>,
    updateKnown: Object.fromEntries(CALL_STATES.map((to) => [to, sql(`${UPDATE(to)} AND claim_token = :claim_token:text RETURNING ${UNKNOWABLE}`)])) as Record<CallState, CompiledSql>,
    takeOver: sql(`${TAKE_OVER} RETURNING ${COLS}`),
    takeOverKnown: sql(`${TAKE_OVER} AND claim_token = :claim_token:text RETURNING ${UNKNOWABLE}`),
    renew: sql(`UPDATE {calls} SET lease_expires_at = {now} + :lease_ms:bigint
       {from_clock}
       WHERE tenant = :tenant:text AND key = :key:text AND version = :version:integer AND owner = :owner:text AND state IN ${HELD}`),
    remove: sql(`DELETE FROM {calls} {using_clock}
       WHERE tenant = :tenant:text AND key = :key:text AND version = :version:integer AND claim_token = :claim_token:text`),
    // Each branch walks the partial calls_unsettled index: cost follows the unsettled calls, not the ledger.
    unsettled: sql(`SELECT ${COLS} FROM {calls} WHERE state = 'uncertain'
       UNION ALL
       SELECT ${COLS} FROM {calls} {join_clock}
        WHERE state = 'in_progress' AND (:live:boolean OR lease_expires_at IS NULL OR lease_expires_at <= {now})
       LIMIT :limit:integer`),
    // Walks calls_changes: (tool, updated_at, tenant, key) is the index's order, so the cost is the rows returned.
    changes: sql(`SELECT ${COLS} FROM {calls}
       WHERE tool = :tool:text AND state <> 'in_progress' AND (updated_at, tenant, key) > (:at:bigint, :after_tenant:text, :after_key:text)
         AND updated_at <= :until:bigint
       ORDER BY updated_at, tenant, key LIMIT :limit:integer`),
    // The list order (contracts/call-rules.ts `listOrder`): oldest first, ties by tenant and key.
    list(query) {
      const filters = LIST_FILTERS.filter((f) => query[f] !== undefined);
      const partial = query.state === undefined ? undefined : PARTIAL_STATE_INDEXES.find((p) => p.states.includes(query.state as CallState));
      const id = `${filters.join(",")}|${partial?.condition ?? ""}`;
      let compiled = lists.get(id);
      if (!compiled) {
        const where = [...filters.map((f) => LIST_CONDITIONS[f]), ...(partial ? [partial.condition] : [])];
        compiled = sql(`SELECT ${COLS} FROM {calls} ${where.length > 0 ? `WHERE ${where.join(" AND ")}` : ""}
          ORDER BY created_at, tenant, key LIMIT :limit:integer`);
        lists.set(id, compiled);
      }
      const values = Object.fromEntries(Object.entries({
        limit: query.limit ?? 100,
        tenant: query.tenant, state: query.state, tool: query.tool, key: query.key, task: query.task,
        created_from: query.createdFrom, created_to: query.createdTo,
        after_at: query.after?.createdAt, after_tenant: query.after?.tenant, after_key: query.after?.key,
      }).filter(([, value]) => value !== undefined));
      return { sql: compiled, values };
    },
    countByStateAndEffect(query) {
      return query.tenant === undefined ? { sql: countAll, values: {} } : { sql: countOfTenant, values: { tenant: query.tenant } };
    },
    putCheckpoint: sql(`INSERT INTO {checkpoints} (tenant, id, data, updated_at) SELECT :tenant:text, :id:text, :data:text, {now} {from_clock} WHERE true
       ON CONFLICT (tenant, id) DO UPDATE SET data = excluded.data, updated_at = excluded.updated_at`),
    getCheckpoint: sql(`SELECT data FROM {checkpoints} WHERE tenant = :tenant:text AND id = :id:text`),
  };
}

/** A call update's named values (the RecordUpdate spelled out for the statement). */
export function updateValues(
  tenant: string, key: string, version: number,
  update: { state: CallState; result?: unknown; error?: string | null; owner?: string | null; leaseMs?: number; countAttempt?: boolean; sendEnded?: boolean },
): Record<string, unknown> & { readonly tenant: string; readonly key: string; readonly result: string | null } {
  return {
    tenant, key, version, state: update.state,
    set_result: update.result !== undefined,
    result: update.result === undefined || update.result === null ? null : JSON.stringify(update.result),
    set_error: update.error !== undefined,
    error: update.error ?? null,
    set_owner: update.owner !== undefined,
    owner: update.owner ?? null,
    lease_ms: update.leaseMs ?? null,
    count_attempt: update.countAttempt === true ? 1 : 0,
    send_ended: update.sendEnded === true,
  };
}

/** A repeat query's named values (findRepeat; claimUnlessRepeated takes window_ms beside the claim's). */
export function repeatValues(query: RepeatQuery): Record<string, unknown> {
  return { tenant: query.tenant, task: query.task, intent: query.intent, key: query.key, window_ms: query.windowMs };
}

/**
 * One row of `countByStateAndEffect` as a count. A state or effect class the code does not know is
 * damage (RowDamage naming the pair, then EG_LEDGER_CORRUPT), never a count left out.
 */
export function callCountOf(state: string, effect: string, n: number): CallCount {
  if (!isCallState(state)) throw new RowDamage(`${n} call record(s)`, `have an unknown state ${JSON.stringify(state)}`);
  if (!isEffectClass(effect)) throw new RowDamage(`${n} call record(s)`, `have an unknown effect ${JSON.stringify(effect)}`);
  return { state, effect, count: n };
}
