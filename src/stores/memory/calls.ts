/**
 * The memory store's calls: the same compare-and-set and lease semantics as the SQL stores
 * (otherwise the contract suite would prove nothing), with copies handed out, so a caller can
 * never mutate a stored record.
 */
import type { Answer, CallCount, CallCountQuery, CallRecord, CallStore, ClaimRequest, ClaimResult, Halted, ListQuery, RecordUpdate, RepeatQuery, Repeated, TakeOverRequest } from "../../contracts/calls.js";
import { assertKeyFits } from "../../core/keys.js";
import { assertTransition, isHeld } from "../../core/states.js";
import { answeredRecord, applyUpdate, isRepeatOf, isTakeable, listOrder, matchesList, newClaimToken, newRecord, repeatQueryOf, takeOverRecord } from "../../contracts/call-rules.js";
import { changeOrder, isAfter } from "../../contracts/change-order.js";
import { recordId } from "./ids.js";
import type { Json } from "../../core/json.js";

/** A deep copy of a JSON value (several times cheaper than structuredClone for the small values a ledger keeps). */
function copyJson(value: Json): Json {
  if (value === null || typeof value !== "object") return value;
  if (Array.isArray(value)) return value.map(copyJson);
  const out: { [key: string]: Json } = {};
  for (const key of Object.keys(value)) {
    // A "__proto__" key (JSON.parse makes it an own property) must stay data, never become the copy's prototype.
    if (key === "__proto__") Object.defineProperty(out, key, { value: copyJson(value[key] as Json), enumerable: true, writable: true, configurable: true });
    else out[key] = copyJson(value[key] as Json);
  }
  return out;
}

/** `halted`: whether the ledger's kill switches cover a call now (memoryLedger passes its governance store's). */
export function memoryCallStore(clock: () => number, halted?: (tenant: string, agent: string | undefined) => boolean): CallStore {
  const calls = new Map<string, CallRecord>();
  const id = (tenant: string, key: string) => recordId(tenant, key);
  // Only input and result are objects (JSON); every other field is a primitive.
  const copy = (record: CallRecord): CallRecord => ({ ...record, input: copyJson(record.input), result: record.result === null ? null : copyJson(record.result) });

  const claim = (request: ClaimRequest, agent?: string): ClaimResult | Halted => {
    assertKeyFits(request);
    const existing = calls.get(id(request.tenant, request.key));
    if (existing) return { claimed: false, record: copy(existing) };
    if (agent !== undefined && halted?.(request.tenant, agent) === true) return { claimed: false, halted: true };
    const record = newRecord(request, clock(), newClaimToken());
    calls.set(id(request.tenant, request.key), record);
    return { claimed: true, record: copy(record) };
  };

  /** The earliest record `query` says is repeated (a scan: the memory store is for tests and demos). */
  const findRepeat = (query: RepeatQuery): CallRecord | undefined => {
    const now = clock();
    let earliest: CallRecord | undefined;
    for (const record of calls.values()) {
      if (isRepeatOf(record, query, now) && (earliest === undefined || listOrder(record, earliest) < 0)) earliest = record;
    }
    return earliest;
  };

  return {
    location: "memory",
    async findRepeat(query: RepeatQuery) {
      const found = findRepeat(query);
      return found && copy(found);
    },
    async claimUnlessRepeated(request: ClaimRequest, windowMs: number): Promise<ClaimResult | Repeated> {
      assertKeyFits(request);
      const existing = calls.get(id(request.tenant, request.key));
      if (existing) return { claimed: false, record: copy(existing) };
      const repeated = findRepeat(repeatQueryOf(request, windowMs));
      if (repeated) return { claimed: false, repeats: copy(repeated) };
      return claim(request) as ClaimResult;
    },
    async claimAnswered(request: ClaimRequest, answer: Answer): Promise<ClaimResult> {
      assertKeyFits(request);
      const existing = calls.get(id(request.tenant, request.key));
      if (existing) return { claimed: false, record: copy(existing) };
      const record = answeredRecord(request, answer, clock(), newClaimToken());
      calls.set(id(request.tenant, request.key), record);
      return { claimed: true, record: copy(record) };
    },
    async claim(request: ClaimRequest): Promise<ClaimResult> {
      return claim(request) as ClaimResult;
    },
    ...(halted ? { claimUnlessHalted: async (request: ClaimRequest, agent: string | undefined) => claim(request, agent ?? "") } : {}),
    async get(tenant, key) {
      const record = calls.get(id(tenant, key));
      return record && copy(record);
    },
    async update(tenant: string, key: string, version: number, update: RecordUpdate) {
      const record = calls.get(id(tenant, key));
      if (!record || record.version !== version) return undefined;
      assertTransition(key, record.state, update.state);
      const next = applyUpdate(record, update, clock());
      calls.set(id(tenant, key), next);
      return copy(next);
    },
    async takeOver(request: TakeOverRequest) {
      const record = calls.get(id(request.tenant, request.key));
      const now = clock();
      if (!record || record.version !== request.version || !isTakeable(record, now, request.holderIsDead === true)) return undefined;
      const next = takeOverRecord(record, request, now);
      calls.set(id(request.tenant, request.key), next);
      return copy(next);
    },
    async renewLease(tenant, key, version, owner, leaseMs) {
      const record = calls.get(id(tenant, key));
      if (!record || record.version !== version || record.owner !== owner) return false;
      if (!isHeld(record.state)) return false;
      calls.set(id(tenant, key), { ...record, leaseExpiresAt: clock() + leaseMs });
      return true;
    },
    async remove(tenant, key, version, claimToken) {
      const record = calls.get(id(tenant, key));
      if (!record || record.version !== version || record.claimToken !== claimToken) return false;
      return calls.delete(id(tenant, key));
    },
    async list(query: ListQuery = {}) {
      const matching = [...calls.values()].filter((record) => matchesList(record, query));
      return matching.sort(listOrder).slice(0, query.limit ?? 100).map(copy);
    },
    async countByStateAndEffect(query: CallCountQuery = {}) {
      // Keyed by the pair, never by a tenant: a "__proto__" tenant is only a value compared.
      const counts = new Map<string, CallCount>();
      for (const record of calls.values()) {
        if (query.tenant !== undefined && record.tenant !== query.tenant) continue;
        const pair = `${record.state} ${record.effect}`;
        const seen = counts.get(pair);
        counts.set(pair, { state: record.state, effect: record.effect, count: (seen?.count ?? 0) + 1 });
      }
      return [...counts.values()];
    },
    async listUnsettled(options = {}) {
      const now = clock();
      const out: CallRecord[] = [];
      for (const record of calls.values()) {
        const stale = record.state === "uncertain" ||
          (record.state === "in_progress" && (options.includeLive === true || (record.leaseExpiresAt ?? 0) <= now));
        if (stale) out.push(copy(record));
        if (out.length >= (options.limit ?? 100)) break;
      }
      return out;
    },
    async listChangedSince(query) {
      const changed = [...calls.values()].filter((r) =>
        r.tool === query.tool && r.state !== "in_progress" && (query.until === undefined || r.updatedAt <= query.until) &&
        (query.after === undefined || isAfter(r, query.after)));
      return changed.sort(changeOrder).slice(0, query.limit ?? 100).map(copy);
    },
    async now() {
      return clock();
    },
  };
}
