/**
 * The order in which `listChangedSince` lists records: (updatedAt, tenant, key), tenant and key
 * compared byte by byte as UTF-8 (what SQLite's BINARY and PostgreSQL's "C" collation do), so a
 * cursor means the same thing in every store.
 */
import type { CallRecord, ChangeCursor } from "./calls.js";

/** Byte order of UTF-8, as SQLite's BINARY and PostgreSQL's "C" collation compare. */
export function compareBytes(a: string, b: string): number {
  return Buffer.compare(Buffer.from(a, "utf8"), Buffer.from(b, "utf8"));
}

export function compareChange(a: ChangeCursor, b: ChangeCursor): number {
  return a.at - b.at || compareBytes(a.tenant, b.tenant) || compareBytes(a.key, b.key);
}

export const cursorOf = (record: Pick<CallRecord, "updatedAt" | "tenant" | "key">): ChangeCursor =>
  ({ at: record.updatedAt, tenant: record.tenant, key: record.key });

export function isAfter(record: CallRecord, cursor: ChangeCursor): boolean {
  return compareChange(cursorOf(record), cursor) > 0;
}

export function changeOrder(a: CallRecord, b: CallRecord): number {
  return compareChange(cursorOf(a), cursorOf(b));
}
