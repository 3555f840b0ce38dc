/**
 * The SQLite store's calls and checkpoints, in the ledger file (migration 1), written with the
 * shared statements of src/stores/sql/call-statements.ts.
 *
 * Durability: with `durability: "fsync"` (default) every write is in a commit that SQLite fsyncs
 * before its promise resolves, so a claim or an outcome survives power loss; a gated write call
 * costs two commits, shared with the other calls of this process writing at the same moment
 * (group-commit.ts). `durability: "process"` (synchronous=NORMAL) skips those fsyncs: records still
 * survive the process being killed, but not the machine losing power.
 */
import type Database from "better-sqlite3";
import { assertKeyFits } from "../../core/keys.js";
import { assertTransition, isCallState } from "../../core/states.js";
import { isEffectClass } from "../../core/effect-class.js";
import type { Json } from "../../core/json.js";
import type { Answer, CallCountQuery, CallRecord, CallStore, ClaimRequest, ClaimResult, Halted, ListQuery, RecordUpdate, RepeatQuery, Repeated, TakeOverRequest } from "../../contracts/calls.js";
import type { CheckpointRecords } from "../../contracts/checkpoints.js";
import { newClaimToken, repeatQueryOf } from "../../contracts/call-rules.js";
import { RowDamage } from "../row-damage.js";
import { callCountOf, callStatements, repeatValues, updateValues } from "../sql/call-statements.js";
import { sqliteValues, type CompiledSql, type Dialect } from "../sql/dialect.js";
import { knownRecords, type Known, type Unknowable } from "../sql/known-records.js";
import { preparedOnce, type Db, type SqliteAccess } from "./access.js";

const SQLITE_DIALECT: Dialect = {
  name: "sqlite",
  table: (name) => name,
  now: "@now",
  fromClock: "",
  joinClock: "",
  usingClock: "",
  param: (name) => `@${name}`,
};

const SQL = callStatements(SQLITE_DIALECT);
const HALTED: Halted = { claimed: false, halted: true };

interface Row {
  tenant: string; key: string; tool: string; effect: string; task: string; tool_use_id: string;
  fingerprint: string; input: string; input_redacted: number; state: string; result: string | null;
  error: string | null; owner: string | null; lease_expires_at: number | null; attempts: number;
  fence: number; started_at: number; claim_token: string; version: number; created_at: number; updated_at: number;
  intent: string;
}

function decode(row: Row): CallRecord {
  const subject = `record ${row.tenant}/${row.key}`;
  const parse = (text: string, field: string): Json => {
    try {
      return JSON.parse(text) as Json;
    } catch (err) {
      throw new RowDamage(subject, `has unreadable ${field} (${err instanceof Error ? err.message : String(err)})`);
    }
  };
  if (!isCallState(row.state)) throw new RowDamage(subject, `has an unknown state ${JSON.stringify(row.state)}`);
  if (!isEffectClass(row.effect)) throw new RowDamage(subject, `has an unknown effect ${JSON.stringify(row.effect)}`);
  return {
    tenant: row.tenant,
    key: row.key,
    tool: row.tool,
    effect: row.effect,
    task: row.task,
    toolUseId: row.tool_use_id,
    fingerprint: row.fingerprint,
    intent: row.intent,
    input: parse(row.input, "input"),
    inputRedacted: row.input_redacted === 1,
    state: row.state,
    result: row.result === null ? null : parse(row.result, "result"),
    error: row.error,
    owner: row.owner,
    leaseExpiresAt: row.lease_expires_at,
    attempts: row.attempts,
    fence: row.fence,
    startedAt: row.started_at,
    claimToken: row.claim_token,
    version: row.version,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}

// Statements that write run with .all(), never .get(): .get() resets the statement after the
// first row without stepping it to the end, and SQLite only auto-checkpoints the WAL from a
// step that completes, so with .get() the WAL grows without bound and every fsync gets slower.
const statements = preparedOnce((db: Db) => {
  const cache = new Map<string, Database.Statement>();
  return (sql: CompiledSql): Database.Statement => {
    let statement = cache.get(sql.text);
    if (!statement) cache.set(sql.text, (statement = db.prepare(sql.text)));
    return statement;
  };
});

/** What a write of a known record returns (call-statements.ts UNKNOWABLE). */
interface UnknowableRow {
  lease_expires_at: number | null;
  started_at: number;
  updated_at: number;
}

/** What a write returned inside its batch: the few columns of a known record, or the whole record. */
type Written = { readonly known: UnknowableRow; readonly record?: undefined } | { readonly record: CallRecord };

const unknowable = (row: UnknowableRow): Unknowable => ({ leaseExpiresAt: row.lease_expires_at, startedAt: row.started_at, updatedAt: row.updated_at });

export function sqliteCallStore(access: SqliteAccess): CallStore {
  // What this store last wrote of each held call, so its next write need not read the row back (sql/known-records.ts).
  const known = knownRecords();
  const remembered = <R extends ClaimResult | Halted | Repeated>(result: R): R => {
    if (result.claimed) known.remember(result.record);
    return result;
  };
  /** Runs one compiled statement at the store's clock and returns its rows. */
  const rows = (db: Db, sql: CompiledSql, values: Record<string, unknown>) =>
    statements(db)(sql).all(sqliteValues({ now: access.clock(), ...values })) as Row[];
  /** A claim's named values (a key longer than any store keeps is refused here, before any claim statement). */
  const claimValues = (request: ClaimRequest) => {
    assertKeyFits(request);
    return {
      tenant: request.tenant, key: request.key, tool: request.tool, effect: request.effect,
      task: request.task, tool_use_id: request.toolUseId, fingerprint: request.fingerprint, intent: request.intent ?? request.fingerprint,
      input: JSON.stringify(request.input), input_redacted: request.inputRedacted,
      owner: request.owner, lease_ms: request.leaseMs, fence: request.fence ?? null, claim_token: newClaimToken(),
    };
  };
  /** The record in the way of an INSERT that wrote nothing, if there is one. */
  const existing = (db: Db, request: ClaimRequest): ClaimResult | undefined => {
    const [row] = rows(db, SQL.get, { tenant: request.tenant, key: request.key });
    return row && { claimed: false, record: decode(row) };
  };
  /** The INSERT, and when it wrote nothing the record in the way; with `agent`, only while no kill switch covers the call. */
  const claim = (db: Db, request: ClaimRequest, agent?: string): ClaimResult | Halted => {
    const values = claimValues(request);
    const [inserted] = agent === undefined ? rows(db, SQL.claim, values) : rows(db, SQL.claimUnlessHalted, { ...values, agent });
    if (inserted) return { claimed: true, record: decode(inserted) };
    const found = existing(db, request);
    if (found) return found;
    if (agent !== undefined) return HALTED;
    throw new Error("claim conflicted but the record is not there");
  };
  const findRepeat = (db: Db, query: RepeatQuery): CallRecord | undefined => {
    const [row] = rows(db, SQL.findRepeat, repeatValues(query));
    return row && decode(row);
  };
  // One writer at a time (the batch's transaction): the NOT EXISTS and the INSERT see the same file, so no twin slips between them.
  const claimUnlessRepeated = (db: Db, request: ClaimRequest, windowMs: number): ClaimResult | Repeated => {
    const [inserted] = rows(db, SQL.claimUnlessRepeated, { ...claimValues(request), window_ms: windowMs });
    if (inserted) return { claimed: true, record: decode(inserted) };
    const found = existing(db, request);
    if (found) return found;
    const repeats = findRepeat(db, repeatQueryOf(request, windowMs));
    if (repeats) return { claimed: false, repeats };
    throw new Error("a claim unless repeated wrote nothing, but neither its record nor the call it repeats is there");
  };
  const claimAnswered = (db: Db, request: ClaimRequest, answer: Answer): ClaimResult => {
    const [inserted] = rows(db, SQL.claimAnswered, {
      ...claimValues(request), state: answer.state, result: answer.result === null ? null : JSON.stringify(answer.result), error: answer.error,
    });
    if (inserted) return { claimed: true, record: decode(inserted) };
    const found = existing(db, request);
    if (found) return found;
    throw new Error("an answered claim conflicted but the record is not there");
  };
  return {
    location: access.location,
    findRepeat: (query: RepeatQuery) => access.run("look for a call this one repeats", (db) => findRepeat(db, query)),
    claimUnlessRepeated: async (request: ClaimRequest, windowMs: number) => remembered(await access.batched("claim a call", (db) => claimUnlessRepeated(db, request, windowMs))),
    claimAnswered: (request: ClaimRequest, answer: Answer) => access.batched("record a call answered without running it", (db) => claimAnswered(db, request, answer)),
    claim: async (request: ClaimRequest) => remembered(await access.batched("claim a call", (db) => claim(db, request) as ClaimResult)),
    claimUnlessHalted: async (request: ClaimRequest, agent: string | undefined) =>
      remembered(await access.batched("claim a call", (db) => claim(db, request, agent ?? ""))),
    get: (tenant, key) =>
      access.run("read a call", (db) => {
        const [row] = rows(db, SQL.get, { tenant, key });
        return row && decode(row);
      }),
    update: async (tenant: string, key: string, version: number, update: RecordUpdate) => {
      const values = updateValues(tenant, key, version, update);
      const k = known.at(tenant, key, version);
      const out = await access.batched("record a call's outcome", (db): Written | undefined => {
        let current: Row | undefined;
        if (k) {
          // The record as this store wrote it: the row need not come back, only what cannot be computed.
          const [row] = rows(db, SQL.updateKnown[update.state], { ...values, claim_token: k.record.claimToken }) as UnknowableRow[];
          if (row) return { known: row };
          [current] = rows(db, SQL.get, { tenant, key });
        }
        // Unless the record was removed and claimed again since (another claim token, same version), a miss is final.
        if (!k || (current?.version === version && current.claim_token !== k.record.claimToken)) {
          const [row] = rows(db, SQL.update[update.state], values);
          if (row) return { record: decode(row) };
          [current] = rows(db, SQL.get, { tenant, key });
        }
        // Not written: a stale version (normal under races), or a move the state table forbids (a bug: say so).
        if (current && current.version === version && isCallState(current.state)) assertTransition(key, current.state, update.state);
        return undefined;
      });
      // Committed: only now is what it wrote remembered.
      if (out === undefined) known.forget(tenant, key, version);
      else if ("known" in out) return known.updated(k as Known, update, values.result, unknowable(out.known));
      else known.remember(out.record);
      return out?.record;
    },
    takeOver: async (request: TakeOverRequest) => {
      const values = {
        tenant: request.tenant, key: request.key, version: request.version, owner: request.owner,
        lease_ms: request.leaseMs, dead: request.holderIsDead === true, fence: request.fence ?? null,
      };
      const k = known.at(request.tenant, request.key, request.version);
      const out = await access.batched("take over a call", (db): Written | undefined => {
        if (k) {
          const [row] = rows(db, SQL.takeOverKnown, { ...values, claim_token: k.record.claimToken }) as UnknowableRow[];
          if (row) return { known: row };
        }
        const [row] = rows(db, SQL.takeOver, values);
        return row && { record: decode(row) };
      });
      if (out === undefined) known.forget(request.tenant, request.key, request.version);
      else if ("known" in out) return known.takenOver(k as Known, request, unknowable(out.known));
      else known.remember(out.record);
      return out?.record;
    },
    renewLease: (tenant, key, version, owner, leaseMs) =>
      access.batched("renew a lease", (db) =>
        statements(db)(SQL.renew).run(sqliteValues({ tenant, key, version, owner, lease_ms: leaseMs, now: access.clock() })).changes === 1),
    remove: async (tenant, key, version, claimToken) => {
      const removed = await access.batched("remove a record", (db) => statements(db)(SQL.remove).run({ tenant, key, version, claim_token: claimToken }).changes === 1);
      if (removed) known.forget(tenant, key);
      return removed;
    },
    list: (query: ListQuery = {}) =>
      access.run("list calls", (db) => {
        const list = SQL.list(query);
        return rows(db, list.sql, list.values).map(decode);
      }),
    countByStateAndEffect: (query: CallCountQuery = {}) =>
      access.run("count calls", (db) => {
        const counted = SQL.countByStateAndEffect(query);
        return (statements(db)(counted.sql).all(counted.values) as { state: string; effect: string; n: number }[])
          .map((row) => callCountOf(row.state, row.effect, row.n));
      }),
    listUnsettled: (options = {}) =>
      access.run("list unsettled calls", (db) =>
        rows(db, SQL.unsettled, { live: options.includeLive === true, limit: options.limit ?? 100 }).map(decode)),
    listChangedSince: (query) =>
      access.run("list changed calls", (db) =>
        rows(db, SQL.changes, {
          tool: query.tool, at: query.after?.at ?? Number.MIN_SAFE_INTEGER, after_tenant: query.after?.tenant ?? "", after_key: query.after?.key ?? "",
          until: query.until ?? Number.MAX_SAFE_INTEGER, limit: query.limit ?? 100,
        }).map(decode)),
    now: async () => access.clock(),
  };
}

export function sqliteCheckpoints(access: SqliteAccess): CheckpointRecords {
  return {
    async put(tenant, id, data) {
      await access.batched("save a checkpoint", (db) => statements(db)(SQL.putCheckpoint).run({ tenant, id, data, now: access.clock() }));
    },
    get: (tenant, id) =>
      access.run("read a checkpoint", (db) => (statements(db)(SQL.getCheckpoint).get({ tenant, id }) as { data: string } | undefined)?.data),
  };
}
