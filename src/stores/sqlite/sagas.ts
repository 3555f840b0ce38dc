/**
 * The SQLite store's saga log, in the ledger's own file (tables `sagas`, `saga_steps`,
 * `saga_events`, migration 3 of migrations.ts). Every write is one
 * IMMEDIATE transaction that reads the row, applies the shared rules (src/saga/records.ts)
 * and writes it back with its event, so the compare-and-set and the history line commit
 * together, durably at the ledger's durability level.
 */
import type Database from "better-sqlite3";
import { EFFECT_CLASSES, type EffectClass } from "../../core/effect-class.js";
import { type Json } from "../../core/json.js";
import type {
  AddStepResult, Approval, NewSagaEvent, SagaEvent, SagaEventKind, SagaLog, SagaQuery, SagaRecord, SagaStepRecord,
} from "../../contracts/sagas.js";
import { applySagaUpdate, applyStepUpdate, isCompensation, newSaga, newStep } from "../../contracts/saga-rules.js";
import { isSagaState, isStepState } from "../../contracts/saga-states.js";
import { RowDamage } from "../row-damage.js";
import { preparedOnce, type SqliteAccess } from "./access.js";

interface SagaRow {
  tenant: string; saga_id: string; task: string; state: string; on_abandon: string; owner: string | null;
  lease_expires_at: number | null; reason: string | null; resolution: string | null; version: number;
  created_at: number; updated_at: number;
}

interface StepRow {
  tenant: string; saga_id: string; name: string; position: number; tool: string; effect: string; key: string;
  input: string; input_redacted: number; fingerprint: string; compensable: number; compensation: string | null;
  approval: string; state: string; result: string | null; error: string | null; compensation_key: string | null;
  version: number; created_at: number; updated_at: number;
}

interface EventRow {
  tenant: string; saga_id: string; seq: number; at: number; kind: string; step: string | null; message: string; data: string | null;
}

const APPROVALS: readonly Approval[] = ["not_needed", "approved", "refused"];

const statements = preparedOnce(prepare);

export function sqliteSagaLog(access: SqliteAccess): SagaLog {
  /** One IMMEDIATE transaction (the write lock is taken first, so the read inside is current). */
  const write = <T>(what: string, fn: (s: ReturnType<typeof prepare>) => T): Promise<T> => access.write(what, (db) => fn(statements(db)));
  const read = <T>(what: string, fn: (s: ReturnType<typeof prepare>) => T): Promise<T> => access.run(what, (db) => fn(statements(db)));

  const parse = (text: string, subject: string, field: string): Json => {
    try {
      return JSON.parse(text) as Json;
    } catch (err) {
      throw new RowDamage(subject, `has unreadable ${field} (${err instanceof Error ? err.message : String(err)})`);
    }
  };

  function decodeSaga(row: SagaRow): SagaRecord {
    const where = `saga ${row.tenant}/${row.saga_id}`;
    if (!isSagaState(row.state)) throw new RowDamage(where, `has an unknown state ${JSON.stringify(row.state)}`);
    if (row.on_abandon !== "hold" && row.on_abandon !== "compensate") {
      throw new RowDamage(where, `has an unknown on_abandon ${JSON.stringify(row.on_abandon)}`);
    }
    return {
      tenant: row.tenant, id: row.saga_id, task: row.task, state: row.state, onAbandon: row.on_abandon,
      owner: row.owner, leaseExpiresAt: row.lease_expires_at, reason: row.reason, resolution: row.resolution,
      version: row.version, createdAt: row.created_at, updatedAt: row.updated_at,
    };
  }

  function decodeStep(row: StepRow): SagaStepRecord {
    const where = `step ${row.name} of saga ${row.tenant}/${row.saga_id}`;
    const bad = (problem: string) => new RowDamage(where, problem);
    if (!isStepState(row.state)) throw bad(`has an unknown state ${JSON.stringify(row.state)}`);
    if (!EFFECT_CLASSES.includes(row.effect as EffectClass)) throw bad(`has an unknown effect ${JSON.stringify(row.effect)}`);
    if (!APPROVALS.includes(row.approval as Approval)) throw bad(`has an unknown approval ${JSON.stringify(row.approval)}`);
    const compensation = row.compensation === null ? null : parse(row.compensation, where, "compensation");
    if (compensation !== null && !isCompensation(compensation)) throw bad(`has a compensation ${row.compensation ?? ""} that effectgate did not write`);
    return {
      tenant: row.tenant, sagaId: row.saga_id, name: row.name, position: row.position, tool: row.tool,
      effect: row.effect as EffectClass, key: row.key, input: parse(row.input, where, "input"),
      inputRedacted: row.input_redacted === 1, fingerprint: row.fingerprint, compensable: row.compensable === 1,
      compensation, approval: row.approval as Approval, state: row.state,
      result: row.result === null ? null : parse(row.result, where, "result"),
      error: row.error, compensationKey: row.compensation_key, version: row.version,
      createdAt: row.created_at, updatedAt: row.updated_at,
    };
  }

  function decodeEvent(row: EventRow): SagaEvent {
    return {
      tenant: row.tenant, sagaId: row.saga_id, seq: row.seq, at: row.at, kind: row.kind as SagaEventKind, step: row.step,
      message: row.message, data: row.data === null ? null : parse(row.data, `event ${row.seq} of saga ${row.tenant}/${row.saga_id}`, "data"),
    };
  }

  const sagaParams = (saga: SagaRecord) => ({
    tenant: saga.tenant, saga_id: saga.id, task: saga.task, state: saga.state, on_abandon: saga.onAbandon, owner: saga.owner,
    lease_expires_at: saga.leaseExpiresAt, reason: saga.reason, resolution: saga.resolution, version: saga.version,
    created_at: saga.createdAt, updated_at: saga.updatedAt,
  });
  const stepParams = (step: SagaStepRecord) => ({
    tenant: step.tenant, saga_id: step.sagaId, name: step.name, position: step.position, tool: step.tool, effect: step.effect,
    key: step.key, input: JSON.stringify(step.input), input_redacted: step.inputRedacted ? 1 : 0, fingerprint: step.fingerprint,
    compensable: step.compensable ? 1 : 0, compensation: step.compensation === null ? null : JSON.stringify(step.compensation),
    approval: step.approval, state: step.state, result: step.result === null ? null : JSON.stringify(step.result),
    error: step.error, compensation_key: step.compensationKey, version: step.version, created_at: step.createdAt, updated_at: step.updatedAt,
  });
  const appendEvent = (s: ReturnType<typeof prepare>, tenant: string, sagaId: string, at: number, event: NewSagaEvent | undefined) => {
    if (!event) return;
    s.insertEvent.run({
      tenant, saga_id: sagaId, at, kind: event.kind, step: event.step ?? null, message: event.message,
      data: event.data === undefined ? null : JSON.stringify(event.data),
    });
  };

  return {
    async begin(request, event) {
      return write("start a saga", (s) => {
        const existing = s.getSaga.get(request.tenant, request.id) as SagaRow | undefined;
        if (existing) return { created: false, saga: decodeSaga(existing) };
        const now = access.clock();
        const saga = newSaga(request, now);
        s.insertSaga.run(sagaParams(saga));
        appendEvent(s, saga.tenant, saga.id, now, event);
        return { created: true, saga };
      });
    },
    async get(tenant, id) {
      return read("read a saga", (s) => {
        const row = s.getSaga.get(tenant, id) as SagaRow | undefined;
        return row && decodeSaga(row);
      });
    },
    async update(tenant, id, version, update, event) {
      return write("record a saga's new state", (s) => {
        const row = s.getSaga.get(tenant, id) as SagaRow | undefined;
        if (!row || row.version !== version) return undefined;
        const now = access.clock();
        const next = applySagaUpdate(decodeSaga(row), update, now);
        s.writeSaga.run({ ...sagaParams(next), prev: version });
        appendEvent(s, tenant, id, now, event);
        return next;
      });
    },
    async renewLease(tenant, id, owner, leaseMs) {
      return read("renew a saga's lease", (s) => s.renew.run({ tenant, saga_id: id, owner, lease_ms: leaseMs, now: access.clock() }).changes === 1);
    },
    async addStep(request, event): Promise<AddStepResult> {
      return write("record a saga step", (s): AddStepResult => {
        const existing = s.getStep.get(request.tenant, request.sagaId, request.name) as StepRow | undefined;
        if (existing) return { outcome: "exists", step: decodeStep(existing) };
        const sagaRow = s.getSaga.get(request.tenant, request.sagaId) as SagaRow | undefined;
        const saga = sagaRow && decodeSaga(sagaRow);
        if (!saga || saga.state !== "running") return { outcome: "saga_not_running", saga };
        const now = access.clock();
        const position = (s.nextPosition.get(request.tenant, request.sagaId) as { next: number }).next;
        const step = newStep(request, position, now);
        s.insertStep.run(stepParams(step));
        appendEvent(s, request.tenant, request.sagaId, now, event);
        return { outcome: "added", step };
      });
    },
    async getStep(tenant, sagaId, name) {
      return read("read a saga step", (s) => {
        const row = s.getStep.get(tenant, sagaId, name) as StepRow | undefined;
        return row && decodeStep(row);
      });
    },
    async updateStep(tenant, sagaId, name, version, update, event) {
      return write("record a saga step's new state", (s) => {
        const row = s.getStep.get(tenant, sagaId, name) as StepRow | undefined;
        if (!row || row.version !== version) return undefined;
        const now = access.clock();
        const next = applyStepUpdate(decodeStep(row), update, now);
        s.writeStep.run({ ...stepParams(next), prev: version });
        appendEvent(s, tenant, sagaId, now, event);
        return next;
      });
    },
    async steps(tenant, sagaId) {
      return read("read a saga's steps", (s) => (s.steps.all(tenant, sagaId) as StepRow[]).map(decodeStep));
    },
    async appendEvent(tenant, sagaId, event) {
      await write("record a saga event", (s) => appendEvent(s, tenant, sagaId, access.clock(), event));
    },
    async history(tenant, sagaId, options = {}) {
      return read("read a saga's history", (s) => (s.history.all(tenant, sagaId, options.limit ?? 1000) as EventRow[]).map(decodeEvent));
    },
    async list(query: SagaQuery = {}) {
      return read("list sagas", (s) => (s.list.all({
        tenant: query.tenant ?? null, state: query.state ?? null, saga_id: query.id ?? null, limit: query.limit ?? 100,
      }) as SagaRow[]).map(decodeSaga));
    },
    async listActive(options = {}) {
      return read("list active sagas", (s) => (s.active.all(options.limit ?? 100) as SagaRow[]).map(decodeSaga));
    },
  };
}

const SAGA_COLUMNS = "tenant, saga_id, task, state, on_abandon, owner, lease_expires_at, reason, resolution, version, created_at, updated_at";
const STEP_COLUMNS =
  "tenant, saga_id, name, position, tool, effect, key, input, input_redacted, fingerprint, compensable, compensation, approval, " +
  "state, result, error, compensation_key, version, created_at, updated_at";
const values = (columns: string) => columns.split(", ").map((c) => `@${c}`).join(", ");

function prepare(db: Database.Database) {
  return {
    getSaga: db.prepare(`SELECT ${SAGA_COLUMNS} FROM sagas WHERE tenant = ? AND saga_id = ?`),
    insertSaga: db.prepare(`INSERT INTO sagas (${SAGA_COLUMNS}) VALUES (${values(SAGA_COLUMNS)})`),
    writeSaga: db.prepare(
      `UPDATE sagas SET state = @state, owner = @owner, lease_expires_at = @lease_expires_at, reason = @reason,
         resolution = @resolution, version = @version, updated_at = @updated_at
       WHERE tenant = @tenant AND saga_id = @saga_id AND version = @prev`,
    ),
    renew: db.prepare(
      `UPDATE sagas SET lease_expires_at = @now + @lease_ms
       WHERE tenant = @tenant AND saga_id = @saga_id AND owner = @owner AND state IN ('running', 'compensating')`,
    ),
    getStep: db.prepare(`SELECT ${STEP_COLUMNS} FROM saga_steps WHERE tenant = ? AND saga_id = ? AND name = ?`),
    insertStep: db.prepare(`INSERT INTO saga_steps (${STEP_COLUMNS}) VALUES (${values(STEP_COLUMNS)})`),
    writeStep: db.prepare(
      `UPDATE saga_steps SET state = @state, result = @result, error = @error, compensation = @compensation,
         compensation_key = @compensation_key, version = @version, updated_at = @updated_at
       WHERE tenant = @tenant AND saga_id = @saga_id AND name = @name AND version = @prev`,
    ),
    nextPosition: db.prepare(`SELECT coalesce(max(position) + 1, 0) AS next FROM saga_steps WHERE tenant = ? AND saga_id = ?`),
    steps: db.prepare(`SELECT ${STEP_COLUMNS} FROM saga_steps WHERE tenant = ? AND saga_id = ? ORDER BY position`),
    // Only for a saga that exists: an event never creates an orphan history.
    insertEvent: db.prepare(
      `INSERT INTO saga_events (tenant, saga_id, seq, at, kind, step, message, data)
       SELECT @tenant, @saga_id, coalesce((SELECT max(seq) FROM saga_events WHERE tenant = @tenant AND saga_id = @saga_id), 0) + 1,
         @at, @kind, @step, @message, @data
       WHERE EXISTS (SELECT 1 FROM sagas WHERE tenant = @tenant AND saga_id = @saga_id)`,
    ),
    history: db.prepare(`SELECT * FROM saga_events WHERE tenant = ? AND saga_id = ? ORDER BY seq LIMIT ?`),
    list: db.prepare(
      `SELECT ${SAGA_COLUMNS} FROM sagas
       WHERE (@tenant IS NULL OR tenant = @tenant) AND (@state IS NULL OR state = @state) AND (@saga_id IS NULL OR saga_id = @saga_id)
       ORDER BY id LIMIT @limit`,
    ),
    active: db.prepare(`SELECT ${SAGA_COLUMNS} FROM sagas WHERE state IN ('running', 'compensating') ORDER BY id LIMIT ?`),
  };
}
