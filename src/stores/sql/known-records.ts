/**
 * The records a SQL call store last wrote, so that the next update or take-over of one of them is
 * answered with the record computed from what was written (contracts/call-rules.ts `applyUpdate`,
 * `takeOverRecord`) instead of reading the whole row back and decoding its JSON.
 *
 * Why a computed record is the stored one: within one claim (one claim token) every write but a
 * lease renewal is compare-and-set on the version and bumps it, so the row at (claim token,
 * version) is exactly the record that write produced, except for its lease. The statements for a
 * known record (call-statements.ts `updateKnown`, `takeOverKnown`) therefore also match the claim
 * token, and return what the store cannot compute: the clock, the lease and the take-over's
 * start. A record removed and claimed again has another token and is written the ordinary way.
 *
 * - Only what a COMMITTED write produced is remembered (never inside a batch that may still fail).
 * - JSON fields are kept as the text written and parsed afresh for every record handed out, so a
 *   caller changing its record changes nothing here.
 * - Settled records are forgotten (nothing usually writes them again), and at most LIMIT are kept
 *   (the oldest go first): a record not known is written and read back as before.
 */
import type { Json } from "../../core/json.js";
import { isSettled } from "../../core/states.js";
import { applyUpdate, takeOverRecord } from "../../contracts/call-rules.js";
import type { CallRecord, RecordUpdate, TakeOverRequest } from "../../contracts/calls.js";

const LIMIT = 10_000;

/** A record as written, its JSON fields as text. */
export interface Known {
  readonly record: CallRecord;
  readonly input: string;
  readonly result: string | null;
}

/** What a write of a known record returns (call-statements.ts UNKNOWABLE). */
export interface Unknowable {
  readonly leaseExpiresAt: number | null;
  readonly startedAt: number;
  readonly updatedAt: number;
}

export interface KnownRecords {
  /** The record as of `version`, if it was the last this store wrote of (tenant, key). */
  at(tenant: string, key: string, version: number): Known | undefined;
  /** A record a committed write produced (handed out next: its JSON fields are copied now). */
  remember(record: CallRecord): void;
  /** Forgets (tenant, key); with `version`, only if that is the version known (a newer one stays). */
  forget(tenant: string, key: string, version?: number): void;
  /** The record an update of `known` wrote (`resultText`: the result as sent, when the update sets one). */
  updated(known: Known, update: RecordUpdate, resultText: string | null, returned: Unknowable): CallRecord;
  /** The record a take-over of `known` wrote. */
  takenOver(known: Known, request: TakeOverRequest, returned: Unknowable): CallRecord;
}

export function knownRecords(): KnownRecords {
  // Keyed by tenant and key; a NUL in either could make two pairs one string, so `at` checks both.
  const known = new Map<string, Known>();
  const id = (tenant: string, key: string) => `${tenant}\u0000${key}`;
  const handOut = (k: Known, record: CallRecord): CallRecord => ({
    ...record,
    input: JSON.parse(k.input) as Json,
    result: k.result === null ? null : (JSON.parse(k.result) as Json),
  });
  const keep = (record: CallRecord, input: string, result: string | null) => {
    const at = id(record.tenant, record.key);
    known.delete(at);
    if (isSettled(record.state)) return;
    // The JSON fields live as text only: nothing here refers to an object a caller holds.
    known.set(at, { record: { ...record, input: null, result: null }, input, result });
    if (known.size > LIMIT) known.delete(known.keys().next().value as string);
  };
  return {
    at(tenant, key, version) {
      const k = known.get(id(tenant, key));
      return k && k.record.tenant === tenant && k.record.key === key && k.record.version === version ? k : undefined;
    },
    remember(record) {
      keep(record, JSON.stringify(record.input), record.result === null ? null : JSON.stringify(record.result));
    },
    forget(tenant, key, version) {
      const at = id(tenant, key);
      if (version === undefined || known.get(at)?.record.version === version) known.delete(at);
    },
    updated(k, update, resultText, returned) {
      const result = update.result === undefined ? k.result : resultText;
      const record = { ...applyUpdate(k.record, update, returned.updatedAt), leaseExpiresAt: returned.leaseExpiresAt, startedAt: returned.startedAt };
      const out = handOut({ ...k, result }, record);
      keep(record, k.input, result);
      return out;
    },
    takenOver(k, request, returned) {
      const record = { ...takeOverRecord(k.record, request, returned.updatedAt), leaseExpiresAt: returned.leaseExpiresAt, startedAt: returned.startedAt };
      const out = handOut(k, record);
      keep(record, k.input, k.result);
      return out;
    },
  };
}
