/**
 * The memory store's saga log: the same compare-and-set, insert-if-absent and state-table
 * rules as the SQL stores (the contract suite would prove nothing otherwise), with copies
 * handed out so a caller can never mutate what is stored.
 */
import type { AddStepResult, NewSagaEvent, SagaEvent, SagaLog, SagaRecord, SagaStepRecord } from "../../contracts/sagas.js";
import { applySagaUpdate, applyStepUpdate, newEvent, newSaga, newStep } from "../../contracts/saga-rules.js";
import { recordId } from "./ids.js";

interface Entry {
  saga: SagaRecord;
  steps: Map<string, SagaStepRecord>;
  events: SagaEvent[];
}

export function memorySagaLog(clock: () => number): SagaLog {
  const sagas = new Map<string, Entry>();
  const id = (tenant: string, sagaId: string) => recordId(tenant, sagaId);
  const copy = <T>(value: T): T => structuredClone(value);
  const log = (entry: Entry, event: NewSagaEvent | undefined, at: number) => {
    if (event) entry.events.push(newEvent(entry.saga.tenant, entry.saga.id, entry.events.length + 1, at, event));
  };

  return {
    async begin(request, event) {
      const existing = sagas.get(id(request.tenant, request.id));
      if (existing) return { created: false, saga: copy(existing.saga) };
      const now = clock();
      const entry: Entry = { saga: newSaga(request, now), steps: new Map(), events: [] };
      sagas.set(id(request.tenant, request.id), entry);
      log(entry, event, now);
      return { created: true, saga: copy(entry.saga) };
    },
    async get(tenant, sagaId) {
      const entry = sagas.get(id(tenant, sagaId));
      return entry && copy(entry.saga);
    },
    async update(tenant, sagaId, version, update, event) {
      const entry = sagas.get(id(tenant, sagaId));
      if (!entry || entry.saga.version !== version) return undefined;
      const now = clock();
      entry.saga = applySagaUpdate(entry.saga, update, now);
      log(entry, event, now);
      return copy(entry.saga);
    },
    async renewLease(tenant, sagaId, owner, leaseMs) {
      const entry = sagas.get(id(tenant, sagaId));
      if (!entry || entry.saga.owner !== owner) return false;
      if (entry.saga.state !== "running" && entry.saga.state !== "compensating") return false;
      entry.saga = { ...entry.saga, leaseExpiresAt: clock() + leaseMs };
      return true;
    },
    async addStep(request, event): Promise<AddStepResult> {
      const entry = sagas.get(id(request.tenant, request.sagaId));
      const existing = entry?.steps.get(request.name);
      if (existing) return { outcome: "exists", step: copy(existing) };
      if (!entry || entry.saga.state !== "running") return { outcome: "saga_not_running", saga: entry && copy(entry.saga) };
      const now = clock();
      const step = newStep(request, entry.steps.size, now);
      entry.steps.set(request.name, step);
      log(entry, event, now);
      return { outcome: "added", step: copy(step) };
    },
    async getStep(tenant, sagaId, name) {
      const step = sagas.get(id(tenant, sagaId))?.steps.get(name);
      return step && copy(step);
    },
    async updateStep(tenant, sagaId, name, version, update, event) {
      const entry = sagas.get(id(tenant, sagaId));
      const step = entry?.steps.get(name);
      if (!entry || !step || step.version !== version) return undefined;
      const now = clock();
      const next = applyStepUpdate(step, update, now);
      entry.steps.set(name, next);
      log(entry, event, now);
      return copy(next);
    },
    async steps(tenant, sagaId) {
      const entry = sagas.get(id(tenant, sagaId));
      return entry ? [...entry.steps.values()].sort((a, b) => a.position - b.position).map(copy) : [];
    },
    async appendEvent(tenant, sagaId, event) {
      const entry = sagas.get(id(tenant, sagaId));
      if (entry) log(entry, event, clock());
    },
    async history(tenant, sagaId, options = {}) {
      return (sagas.get(id(tenant, sagaId))?.events ?? []).slice(0, options.limit ?? 1000).map(copy);
    },
    async list(query = {}) {
      const out: SagaRecord[] = [];
      for (const { saga } of sagas.values()) {
        if (query.tenant !== undefined && saga.tenant !== query.tenant) continue;
        if (query.state !== undefined && saga.state !== query.state) continue;
        if (query.id !== undefined && saga.id !== query.id) continue;
        out.push(copy(saga));
        if (out.length >= (query.limit ?? 100)) break;
      }
      return out;
    },
    async listActive(options = {}) {
      const out: SagaRecord[] = [];
      for (const { saga } of sagas.values()) {
        if (saga.state === "running" || saga.state === "compensating") out.push(copy(saga));
        if (out.length >= (options.limit ?? 100)) break;
      }
      return out;
    },
  };
}
