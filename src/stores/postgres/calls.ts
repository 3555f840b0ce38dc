/**
 * The PostgreSQL store's calls and checkpoints, written with the shared statements of
 * src/stores/sql/call-statements.ts:
 * - A claim is one `INSERT … ON CONFLICT DO NOTHING`: of any number of workers claiming one
 *   key at once, exactly one gets it; the others read the winner's record.
 * - Every write is one statement, compare-and-set on the record's version and on the states
 *   the move is allowed from (src/core/states.ts), so there are no read-modify-write races.
 * - Leases and every time stored are judged by the DATABASE's clock, never a worker's, so
 *   workers whose clocks disagree still agree on whose lease ran out.
 */
import { assertKeyFits } from "../../core/keys.js";
import { assertTransition, isCallState } from "../../core/states.js";
import { newClaimToken, repeatQueryOf } from "../../contracts/call-rules.js";
import type { Answer, CallCountQuery, CallRecord, CallStore, ClaimRequest, ClaimResult, Halted, ListQuery, RecordUpdate, RepeatQuery, Repeated, TakeOverRequest } from "../../contracts/calls.js";
import type { CheckpointRecords } from "../../contracts/checkpoints.js";
import { callCountOf, callStatements, repeatValues, updateValues } from "../sql/call-statements.js";
import { positional, type CompiledSql } from "../sql/dialect.js";
import { MAY_BE_UNRECORDED, NOTHING_RAN, TRY_AGAIN, type Op, type PostgresAccess } from "./access.js";
import { knownRecords } from "../sql/known-records.js";
import { decodeCall, decodeMillis, fieldsOf, RAW_TYPES, unknowable, type RawRow } from "./rows.js";
import { named, postgresDialect, type Statement } from "./statements.js";

const HALTED: Halted = { claimed: false, halted: true };

const OPS = {
  claim: { what: "claim a call", next: NOTHING_RAN, writes: true },
  get: { what: "read a call", next: NOTHING_RAN, writes: false },
  findRepeat: { what: "look for a call this one repeats", next: NOTHING_RAN, writes: false },
  answer: { what: "record a call answered without running it", next: NOTHING_RAN, writes: true },
  update: { what: "record a call's new state", next: MAY_BE_UNRECORDED, writes: true },
  takeOver: { what: "take over a call", next: NOTHING_RAN, writes: true },
  renew: { what: "renew a lease", next: MAY_BE_UNRECORDED, writes: true },
  remove: { what: "remove a record", next: TRY_AGAIN, writes: true },
  list: { what: "list calls", next: TRY_AGAIN, writes: false },
  count: { what: "count calls", next: TRY_AGAIN, writes: false },
  unsettled: { what: "list unsettled calls", next: TRY_AGAIN, writes: false },
  now: { what: "read the database clock", next: NOTHING_RAN, writes: false },
  putCheckpoint: { what: "save a checkpoint", next: TRY_AGAIN, writes: true },
  getCheckpoint: { what: "read a checkpoint", next: TRY_AGAIN, writes: false },
  changes: { what: "list changed calls", next: TRY_AGAIN, writes: false },
} as const satisfies Record<string, Op>;

/** The shared statements for one schema and durability, each prepared under a name derived from its text. */
function statementsFor(access: PostgresAccess) {
  const sql = callStatements(postgresDialect(access.schema, access.durability, access.now));
  const names = new Map<string, Statement>();
  const prepared = (compiled: CompiledSql): Statement => {
    let statement = names.get(compiled.text);
    if (!statement) names.set(compiled.text, (statement = named(compiled.text)));
    return statement;
  };
  return { sql, prepared };
}

export function postgresCallStore(access: PostgresAccess): CallStore {
  const { sql, prepared } = statementsFor(access);
  const table = `${access.schema}.calls`;
  const rows = async (compiled: CompiledSql, values: Record<string, unknown>) =>
    (await access.query(prepared(compiled), positional(compiled, values))).rows;
  const one = async (compiled: CompiledSql, values: Record<string, unknown>): Promise<CallRecord | undefined> => {
    const [row] = await rows(compiled, values);
    return row && decodeCall(row, table);
  };
  /** A write of the record (tenant, key), sent in the next group commit (access.write). */
  const write = (compiled: CompiledSql, values: Record<string, unknown> & { tenant: string; key: string }) =>
    access.write(prepared(compiled), positional(compiled, values), { table: "calls", tenant: values.tenant, key: values.key });
  const written = async (compiled: CompiledSql, values: Record<string, unknown> & { tenant: string; key: string }): Promise<CallRecord | undefined> => {
    const [row] = (await write(compiled, values)).rows;
    return row && decodeCall(row, table);
  };
  const count = async (compiled: CompiledSql, values: Record<string, unknown> & { tenant: string; key: string }) => (await write(compiled, values)).rowCount;
  const clock = named(`SELECT ${access.now} AS now`);

  /** A claim's named values (a key longer than any store keeps is refused here, before any claim statement). */
  const claimValues = (request: ClaimRequest) => {
    assertKeyFits(request);
    return {
      tenant: request.tenant, key: request.key, tool: request.tool, effect: request.effect, task: request.task,
      tool_use_id: request.toolUseId, fingerprint: request.fingerprint, intent: request.intent ?? request.fingerprint, input: JSON.stringify(request.input),
      input_redacted: request.inputRedacted, owner: request.owner, lease_ms: request.leaseMs, fence: request.fence ?? null,
      claim_token: newClaimToken(),
    };
  };

  /**
   * The claim unless repeated, in a transaction that first takes an advisory lock on the call's
   * (tenant, task, intent): under READ COMMITTED two INSERTs … WHERE NOT EXISTS from two
   * workers would each miss the other's uncommitted row; with the lock the second one's statement
   * starts after the first committed, and its snapshot holds the first one's claim.
   */
  const claimUnlessRepeated = (request: ClaimRequest, windowMs: number) => {
    // Built (and a key over the limit refused) before a connection is taken.
    const claim = { ...claimValues(request), window_ms: windowMs };
    return access.withClient(async (client) => {
      const q = (compiled: CompiledSql, values: Record<string, unknown>) =>
        client.query<RawRow>({ text: compiled.text, values: positional(compiled, values), types: RAW_TYPES });
      const decoded = (rows: RawRow[]) => rows[0] && decodeCall(rows[0], table);
      await client.query("BEGIN");
      try {
        if (access.durability === "process") await client.query("SET LOCAL synchronous_commit TO off");
        await client.query("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))", [JSON.stringify([request.tenant, request.task, repeatQueryOf(request, windowMs).intent])]);
        const inserted = decoded((await q(sql.claimUnlessRepeated, claim)).rows);
        let out: ClaimResult | Repeated | undefined;
        if (inserted) out = { claimed: true, record: inserted };
        else {
          const existing = decoded((await q(sql.get, { tenant: request.tenant, key: request.key })).rows);
          if (existing) out = { claimed: false, record: existing };
          else {
            const repeats = decoded((await q(sql.findRepeat, repeatValues(repeatQueryOf(request, windowMs)))).rows);
            if (repeats) out = { claimed: false, repeats };
          }
        }
        await client.query("COMMIT");
        if (out) return out;
        throw new Error(`a claim of ${request.tenant}/${request.key} unless repeated wrote nothing, but neither its record nor the call it repeats is there`);
      } catch (err) {
        await client.query("ROLLBACK").catch(() => undefined);
        throw err;
      }
    });
  };
  // What this store last wrote of each held call, so its next write need not read the row back (sql/known-records.ts).
  const known = knownRecords();
  const remembered = <R extends ClaimResult | Halted | Repeated>(result: R): R => {
    if (result.claimed) known.remember(result.record);
    return result;
  };

  /** The INSERT, and when it wrote nothing the record in the way; with `agent`, only while no kill switch covers the call. */
  const claim = async (request: ClaimRequest, agent?: string): Promise<ClaimResult | Halted> => {
    const values = claimValues(request);
    // A key removed between our INSERT and SELECT (an expired idempotency key) is claimable again: try once more.
    for (let tries = 0; tries < 3; tries++) {
      const inserted = agent === undefined ? await written(sql.claim, values) : await written(sql.claimUnlessHalted, { ...values, agent });
      if (inserted) return { claimed: true, record: inserted };
      const existing = await one(sql.get, { tenant: request.tenant, key: request.key });
      if (existing) return { claimed: false, record: existing };
      // Nothing written and nothing there: a kill switch covers the call (or it was removed meanwhile: the caller governs it again).
      if (agent !== undefined) return HALTED;
    }
    throw new Error(`the claim of ${request.tenant}/${request.key} conflicted three times but its record kept vanishing`);
  };

  return {
    location: access.location,
    findRepeat: (query: RepeatQuery) => access.run(OPS.findRepeat, () => one(sql.findRepeat, repeatValues(query))),
    claimUnlessRepeated: (request: ClaimRequest, windowMs: number) => access.run(OPS.claim, async () => remembered(await claimUnlessRepeated(request, windowMs))),
    claimAnswered: (request: ClaimRequest, answer: Answer) =>
      access.run(OPS.answer, async (): Promise<ClaimResult> => {
        const values = { ...claimValues(request), state: answer.state, result: answer.result === null ? null : JSON.stringify(answer.result), error: answer.error };
        const inserted = await written(sql.claimAnswered, values);
        if (inserted) return { claimed: true, record: inserted };
        const existing = await one(sql.get, { tenant: request.tenant, key: request.key });
        if (existing) return { claimed: false, record: existing };
        throw new Error(`an answered claim of ${request.tenant}/${request.key} conflicted but the record is not there`);
      }),
    claim: (request: ClaimRequest) => access.run(OPS.claim, async () => remembered(await claim(request)) as ClaimResult),
    claimUnlessHalted: (request: ClaimRequest, agent: string | undefined) => access.run(OPS.claim, async () => remembered(await claim(request, agent ?? ""))),
    get: (tenant, key) => access.run(OPS.get, () => one(sql.get, { tenant, key })),
    update: (tenant: string, key: string, version: number, update: RecordUpdate) =>
      access.run(OPS.update, async () => {
        const values = updateValues(tenant, key, version, update);
        const k = known.at(tenant, key, version);
        let current: CallRecord | undefined;
        if (k) {
          // The record as this store wrote it: the row need not come back, only what cannot be computed.
          const [row] = (await write(sql.updateKnown[update.state], { ...values, claim_token: k.record.claimToken })).rows;
          if (row) return known.updated(k, update, values.result, unknowable(row, table));
          known.forget(tenant, key, version);
          current = await one(sql.get, { tenant, key });
        }
        // Unless the record was removed and claimed again since (another claim token, same version), a miss is final.
        if (!k || (current?.version === version && current.claimToken !== k.record.claimToken)) {
          const moved = await written(sql.update[update.state], values);
          if (moved) {
            known.remember(moved);
            return moved;
          }
          current = await one(sql.get, { tenant, key });
        }
        // Not written: a stale version (normal under races), or a move the state table forbids (a bug: say so).
        if (current && current.version === version && isCallState(current.state)) assertTransition(key, current.state, update.state);
        return undefined;
      }),
    takeOver: (request: TakeOverRequest) =>
      access.run(OPS.takeOver, async () => {
        const values = {
          tenant: request.tenant, key: request.key, version: request.version, owner: request.owner, lease_ms: request.leaseMs,
          dead: request.holderIsDead === true, fence: request.fence ?? null,
        };
        const k = known.at(request.tenant, request.key, request.version);
        if (k) {
          const [row] = (await write(sql.takeOverKnown, { ...values, claim_token: k.record.claimToken })).rows;
          if (row) return known.takenOver(k, request, unknowable(row, table));
          known.forget(request.tenant, request.key, request.version);
        }
        const taken = await written(sql.takeOver, values);
        if (taken) known.remember(taken);
        return taken;
      }),
    renewLease: (tenant, key, version, owner, leaseMs) =>
      access.run(OPS.renew, async () => (await count(sql.renew, { tenant, key, version, owner, lease_ms: leaseMs })) === 1),
    remove: (tenant, key, version, claimToken) =>
      access.run(OPS.remove, async () => {
        const removed = (await count(sql.remove, { tenant, key, version, claim_token: claimToken })) === 1;
        if (removed) known.forget(tenant, key);
        return removed;
      }),
    list: (q: ListQuery = {}) =>
      access.run(OPS.list, async () => {
        const list = sql.list(q);
        // Planned afresh with its values each time (operators' filters vary): not prepared.
        return (await access.query(list.sql.text, positional(list.sql, list.values))).rows.map((row) => decodeCall(row, table));
      }),
    countByStateAndEffect: (q: CallCountQuery = {}) =>
      access.run(OPS.count, async () => {
        const counted = sql.countByStateAndEffect(q);
        return (await rows(counted.sql, counted.values)).map((row) => {
          const f = fieldsOf(row, `the call count of ${table}`);
          return callCountOf(f.text("state"), f.text("effect"), f.int("n"));
        });
      }),
    listUnsettled: (opts = {}) =>
      access.run(OPS.unsettled, async () => {
        const compiled = sql.unsettled;
        const values = { live: opts.includeLive === true, limit: opts.limit ?? 100 };
        return (await access.query(compiled.text, positional(compiled, values))).rows.map((row) => decodeCall(row, table));
      }),
    listChangedSince: (q) =>
      access.run(OPS.changes, async () =>
        (await rows(sql.changes, {
          tool: q.tool, at: q.after?.at ?? Number.MIN_SAFE_INTEGER, after_tenant: q.after?.tenant ?? "", after_key: q.after?.key ?? "",
          until: q.until ?? Number.MAX_SAFE_INTEGER, limit: q.limit ?? 100,
        })).map((row) => decodeCall(row, table))),
    now: () => access.run(OPS.now, async () => decodeMillis((await access.query(clock)).rows[0]?.now)),
  };
}

export function postgresCheckpoints(access: PostgresAccess): CheckpointRecords {
  const { sql, prepared } = statementsFor(access);
  return {
    put: (tenant, id, data) =>
      access.run(OPS.putCheckpoint, async () => {
        await access.write(prepared(sql.putCheckpoint), positional(sql.putCheckpoint, { tenant, id, data }), { table: "checkpoints", tenant, key: id });
      }),
    get: (tenant, id) =>
      access.run(OPS.getCheckpoint, async () =>
        (await access.query(prepared(sql.getCheckpoint), positional(sql.getCheckpoint, { tenant, id }))).rows[0]?.data ?? undefined),
  };
}
