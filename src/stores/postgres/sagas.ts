/**
 * The PostgreSQL store's saga log: tables `sagas`, `saga_steps`, `saga_events` in the ledger's
 * schema (migration 3 of migrations.ts). Every write is one transaction that first locks the
 * saga's row (`SELECT … FOR UPDATE`), so all writes to one saga are serialised across workers
 * and machines: the read that follows sees the latest committed state, the shared rules
 * (src/saga/records.ts) are applied to it, and the row and its history line commit together.
 * Times are the database's clock. Rows come back as raw text (RAW_TYPES) and are checked field
 * by field: a damaged row is refused by name (EG_LEDGER_CORRUPT), never read as something else.
 */
import type { PoolClient } from "pg";
import { EFFECT_CLASSES, type EffectClass } from "../../core/effect-class.js";
import type {
  AddStepResult, Approval, NewSagaEvent, SagaEvent, SagaEventKind, SagaLog, SagaQuery, SagaRecord, SagaStepRecord,
} from "../../contracts/sagas.js";
import { applySagaUpdate, applyStepUpdate, isCompensation, newSaga, newStep } from "../../contracts/saga-rules.js";
import { isSagaState, isStepState } from "../../contracts/saga-states.js";
import { SAGA_NEXT, type PostgresAccess } from "./access.js";
import { fieldsOf, literal, RAW_TYPES, type RawRow } from "./rows.js";
import { equalityFilters } from "./statements.js";

const SAGA_COLS = "tenant, saga_id, task, state, on_abandon, owner, lease_expires_at, reason, resolution, version, created_at, updated_at";
const STEP_COLS =
  "tenant, saga_id, name, position, tool, effect, key, input, input_redacted, fingerprint, compensable, compensation, approval, " +
  "state, result, error, compensation_key, version, created_at, updated_at";
const APPROVALS: readonly Approval[] = ["not_needed", "approved", "refused"];

export function postgresSagaLog(access: PostgresAccess): SagaLog {
  const s = access.schema;
  const q = (client: PoolClient, text: string, values: readonly unknown[] = []) =>
    client.query<RawRow>({ text, values: values as unknown[], types: RAW_TYPES });

  /** One transaction; `durability: "process"` commits it without waiting for the flush (this transaction only). */
  function transaction<T>(what: string, fn: (client: PoolClient) => Promise<T>): Promise<T> {
    return access.run({ what, next: SAGA_NEXT, writes: true }, () => access.withClient(async (client) => {
      await client.query("BEGIN");
      try {
        if (access.durability === "process") await client.query("SET LOCAL synchronous_commit TO off");
        const out = await fn(client);
        await client.query("COMMIT");
        return out;
      } catch (err) {
        await client.query("ROLLBACK").catch(() => undefined);
        throw err;
      }
    }));
  }
  const read = <T>(what: string, fn: (client: PoolClient) => Promise<T>): Promise<T> =>
    access.run({ what, next: SAGA_NEXT, writes: false }, () => access.withClient(fn));

  /** Locks the saga's row (every write to a saga takes it first) and reads it with the database clock. */
  async function lockSaga(client: PoolClient, tenant: string, id: string): Promise<{ saga: SagaRecord | undefined; now: number }> {
    const { rows } = await q(client, `SELECT ${SAGA_COLS}, ${access.now}::text AS now FROM ${s}.sagas WHERE tenant = $1 AND saga_id = $2 FOR UPDATE`, [tenant, id]);
    const row = rows[0];
    if (!row) return { saga: undefined, now: await clock(client) };
    return { saga: decodeSaga(row), now: int(row, "now", () => `saga ${tenant}/${id}`) };
  }

  async function clock(client: PoolClient): Promise<number> {
    const { rows } = await q(client, `SELECT ${access.now}::text AS now`);
    return int(rows[0] ?? {}, "now", () => "the database clock");
  }

  const int = (row: RawRow, field: string, where: () => string): number => fieldsOf(row, where(), `${s}.sagas`).int(field);

  function decodeSaga(row: RawRow): SagaRecord {
    const f = fieldsOf(row, `saga ${row.tenant ?? "?"}/${row.saga_id ?? "?"}`,
      `${s}.sagas WHERE tenant = ${literal(row.tenant)} AND saga_id = ${literal(row.saga_id)}`);
    const state = f.text("state");
    if (!isSagaState(state)) throw f.bad(`has an unknown state ${JSON.stringify(state)}`);
    const onAbandon = f.text("on_abandon");
    if (onAbandon !== "hold" && onAbandon !== "compensate") throw f.bad(`has an unknown on_abandon ${JSON.stringify(onAbandon)}`);
    return {
      tenant: f.text("tenant"), id: f.text("saga_id"), task: f.text("task"), state, onAbandon,
      owner: f.optionalText("owner"), leaseExpiresAt: f.optionalInt("lease_expires_at"), reason: f.optionalText("reason"),
      resolution: f.optionalText("resolution"), version: f.int("version"), createdAt: f.int("created_at"), updatedAt: f.int("updated_at"),
    };
  }

  function decodeStep(row: RawRow): SagaStepRecord {
    const f = fieldsOf(row, `step ${row.name ?? "?"} of saga ${row.tenant ?? "?"}/${row.saga_id ?? "?"}`,
      `${s}.saga_steps WHERE tenant = ${literal(row.tenant)} AND saga_id = ${literal(row.saga_id)} AND name = ${literal(row.name)}`);
    const state = f.text("state");
    if (!isStepState(state)) throw f.bad(`has an unknown state ${JSON.stringify(state)}`);
    const effect = f.text("effect");
    if (!EFFECT_CLASSES.includes(effect as EffectClass)) throw f.bad(`has an unknown effect ${JSON.stringify(effect)}`);
    const approval = f.text("approval");
    if (!APPROVALS.includes(approval as Approval)) throw f.bad(`has an unknown approval ${JSON.stringify(approval)}`);
    const compensation = f.optionalJson("compensation");
    if (compensation !== null && !isCompensation(compensation)) throw f.bad("has a compensation effectgate did not write");
    return {
      tenant: f.text("tenant"), sagaId: f.text("saga_id"), name: f.text("name"), position: f.int("position"), tool: f.text("tool"),
      effect: effect as EffectClass, key: f.text("key"), input: f.json("input"), inputRedacted: f.bool("input_redacted"),
      fingerprint: f.text("fingerprint"), compensable: f.bool("compensable"), compensation, approval: approval as Approval, state,
      result: f.optionalJson("result"), error: f.optionalText("error"), compensationKey: f.optionalText("compensation_key"),
      version: f.int("version"), createdAt: f.int("created_at"), updatedAt: f.int("updated_at"),
    };
  }

  function decodeEvent(row: RawRow): SagaEvent {
    const f = fieldsOf(row, `event ${row.seq ?? "?"} of saga ${row.tenant ?? "?"}/${row.saga_id ?? "?"}`,
      `${s}.saga_events WHERE tenant = ${literal(row.tenant)} AND saga_id = ${literal(row.saga_id)} AND seq = ${row.seq ?? "0"}`);
    return {
      tenant: f.text("tenant"), sagaId: f.text("saga_id"), seq: f.int("seq"), at: f.int("at"), kind: f.text("kind") as SagaEventKind,
      step: f.optionalText("step"), message: f.text("message"), data: f.optionalJson("data"),
    };
  }

  const sagaValues = (saga: SagaRecord) => [
    saga.tenant, saga.id, saga.task, saga.state, saga.onAbandon, saga.owner, saga.leaseExpiresAt, saga.reason, saga.resolution,
    saga.version, saga.createdAt, saga.updatedAt,
  ];
  const stepValues = (step: SagaStepRecord) => [
    step.tenant, step.sagaId, step.name, step.position, step.tool, step.effect, step.key, JSON.stringify(step.input), step.inputRedacted,
    step.fingerprint, step.compensable, step.compensation === null ? null : JSON.stringify(step.compensation), step.approval, step.state,
    step.result === null ? null : JSON.stringify(step.result), step.error, step.compensationKey, step.version, step.createdAt, step.updatedAt,
  ];
  const placeholders = (n: number) => Array.from({ length: n }, (_, i) => `$${i + 1}`).join(", ");

  /** Appends one event to a saga whose row the transaction holds locked. */
  async function appendLocked(client: PoolClient, tenant: string, id: string, at: number, event: NewSagaEvent | undefined): Promise<void> {
    if (!event) return;
    await q(client,
      `INSERT INTO ${s}.saga_events (tenant, saga_id, seq, at, kind, step, message, data)
       SELECT $1, $2, coalesce(max(seq), 0) + 1, $3, $4, $5, $6, $7::json FROM ${s}.saga_events WHERE tenant = $1 AND saga_id = $2`,
      [tenant, id, at, event.kind, event.step ?? null, event.message, event.data === undefined ? null : JSON.stringify(event.data)]);
  }

  async function getStepRow(client: PoolClient, tenant: string, id: string, name: string): Promise<SagaStepRecord | undefined> {
    const row = (await q(client, `SELECT ${STEP_COLS} FROM ${s}.saga_steps WHERE tenant = $1 AND saga_id = $2 AND name = $3`, [tenant, id, name])).rows[0];
    return row && decodeStep(row);
  }

  return {
    begin: (request, event) =>
      transaction("start a saga", async (client) => {
        const now = await clock(client);
        const saga = newSaga(request, now);
        const inserted = await q(client, `INSERT INTO ${s}.sagas (${SAGA_COLS}) VALUES (${placeholders(12)}) ON CONFLICT (tenant, saga_id) DO NOTHING`, sagaValues(saga));
        if (inserted.rowCount === 1) {
          await appendLocked(client, saga.tenant, saga.id, now, event);
          return { created: true, saga };
        }
        const existing = (await q(client, `SELECT ${SAGA_COLS} FROM ${s}.sagas WHERE tenant = $1 AND saga_id = $2`, [request.tenant, request.id])).rows[0];
        if (!existing) throw new Error(`saga ${request.tenant}/${request.id} conflicted but is not there`);
        return { created: false, saga: decodeSaga(existing) };
      }),
    get: (tenant, id) =>
      read("read a saga", async (client) => {
        const row = (await q(client, `SELECT ${SAGA_COLS} FROM ${s}.sagas WHERE tenant = $1 AND saga_id = $2`, [tenant, id])).rows[0];
        return row && decodeSaga(row);
      }),
    update: (tenant, id, version, update, event) =>
      transaction("record a saga's new state", async (client) => {
        const { saga, now } = await lockSaga(client, tenant, id);
        if (!saga || saga.version !== version) return undefined;
        const next = applySagaUpdate(saga, update, now);
        await q(client,
          `UPDATE ${s}.sagas SET state = $3, owner = $4, lease_expires_at = $5, reason = $6, resolution = $7, version = $8, updated_at = $9
           WHERE tenant = $1 AND saga_id = $2`,
          [tenant, id, next.state, next.owner, next.leaseExpiresAt, next.reason, next.resolution, next.version, next.updatedAt]);
        await appendLocked(client, tenant, id, now, event);
        return next;
      }),
    renewLease: (tenant, id, owner, leaseMs) =>
      access.run({ what: "renew a saga's lease", next: SAGA_NEXT, writes: true }, () => access.withClient(async (client) => {
        const res = await q(client,
          `UPDATE ${s}.sagas SET lease_expires_at = ${access.now} + $4::bigint
           WHERE tenant = $1 AND saga_id = $2 AND owner = $3 AND state IN ('running', 'compensating')`, [tenant, id, owner, leaseMs]);
        return res.rowCount === 1;
      })),
    addStep: (request, event) =>
      transaction("record a saga step", async (client): Promise<AddStepResult> => {
        const { saga, now } = await lockSaga(client, request.tenant, request.sagaId);
        const existing = await getStepRow(client, request.tenant, request.sagaId, request.name);
        if (existing) return { outcome: "exists", step: existing };
        if (!saga || saga.state !== "running") return { outcome: "saga_not_running", saga };
        const position = int((await q(client,
          `SELECT (coalesce(max(position) + 1, 0))::text AS next FROM ${s}.saga_steps WHERE tenant = $1 AND saga_id = $2`,
          [request.tenant, request.sagaId])).rows[0] ?? {}, "next", () => `steps of saga ${request.tenant}/${request.sagaId}`);
        const step = newStep(request, position, now);
        await q(client, `INSERT INTO ${s}.saga_steps (${STEP_COLS}) VALUES (${placeholders(20)})`, stepValues(step));
        await appendLocked(client, request.tenant, request.sagaId, now, event);
        return { outcome: "added", step };
      }),
    getStep: (tenant, id, name) => read("read a saga step", (client) => getStepRow(client, tenant, id, name)),
    updateStep: (tenant, id, name, version, update, event) =>
      transaction("record a saga step's new state", async (client) => {
        const { now } = await lockSaga(client, tenant, id);
        const step = await getStepRow(client, tenant, id, name);
        if (!step || step.version !== version) return undefined;
        const next = applyStepUpdate(step, update, now);
        await q(client,
          `UPDATE ${s}.saga_steps SET state = $4, result = $5::json, error = $6, compensation = $7::json, compensation_key = $8, version = $9, updated_at = $10
           WHERE tenant = $1 AND saga_id = $2 AND name = $3`,
          [tenant, id, name, next.state, next.result === null ? null : JSON.stringify(next.result), next.error,
            next.compensation === null ? null : JSON.stringify(next.compensation), next.compensationKey, next.version, next.updatedAt]);
        await appendLocked(client, tenant, id, now, event);
        return next;
      }),
    steps: (tenant, id) =>
      read("read a saga's steps", async (client) =>
        (await q(client, `SELECT ${STEP_COLS} FROM ${s}.saga_steps WHERE tenant = $1 AND saga_id = $2 ORDER BY position`, [tenant, id])).rows.map(decodeStep)),
    appendEvent: (tenant, id, event) =>
      transaction("record a saga event", async (client) => {
        const { saga, now } = await lockSaga(client, tenant, id);
        if (saga) await appendLocked(client, tenant, id, now, event);
      }),
    history: (tenant, id, options = {}) =>
      read("read a saga's history", async (client) =>
        (await q(client, `SELECT tenant, saga_id, seq, at, kind, step, message, data FROM ${s}.saga_events WHERE tenant = $1 AND saga_id = $2 ORDER BY seq LIMIT $3`,
          [tenant, id, options.limit ?? 1000])).rows.map(decodeEvent)),
    list: (query: SagaQuery = {}) =>
      read("list sagas", async (client) => {
        const { filters, values } = equalityFilters([["tenant", query.tenant], ["state", query.state], ["saga_id", query.id]]);
        values.push(query.limit ?? 100);
        return (await q(client,
          `SELECT ${SAGA_COLS} FROM ${s}.sagas ${filters.length ? `WHERE ${filters.join(" AND ")}` : ""} ORDER BY n LIMIT $${values.length}`,
          values)).rows.map(decodeSaga);
      }),
    listActive: (options = {}) =>
      read("list active sagas", async (client) =>
        (await q(client, `SELECT ${SAGA_COLS} FROM ${s}.sagas WHERE state IN ('running', 'compensating') ORDER BY n LIMIT $1`,
          [options.limit ?? 100])).rows.map(decodeSaga)),
  };
}
