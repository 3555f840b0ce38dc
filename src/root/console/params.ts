/** Reading query parameters and JSON bodies of API requests: a bad value is a 400 that names it. */
import { CALL_STATES, type CallState } from "../../core/states.js";
import { badRequest } from "./api-error.js";

export type Query = URLSearchParams;

export function text(query: Query, name: string): string | undefined {
  const value = query.get(name);
  return value === null || value === "" ? undefined : value;
}

/** The longest filter value the API takes: far above any tenant, tool, task or key the gate records. */
export const MAX_FILTER_LENGTH = 4096;

/** A filter matched against what the ledger records (a tenant, tool, task or key): text without NUL, of a sane length. */
export function filterText(query: Query, name: string): string | undefined {
  const value = text(query, name);
  if (value !== undefined) checkRecordedText(name, name, "a filter", value);
  return value;
}

/** A route's path parameters (a tenant, key or id) follow the filters' rule. */
export function checkParams(params: Readonly<Record<string, string>>): void {
  for (const [name, value] of Object.entries(params)) checkRecordedText(`the path's ${name}`, name, "a path parameter", value);
}

/** Text the ledger could hold: no NUL (PostgreSQL text cannot), at most MAX_FILTER_LENGTH characters. `label` and `kind` name it in the 400. */
function checkRecordedText(label: string, name: string, kind: string, value: string): void {
  if (value.length > MAX_FILTER_LENGTH) throw badRequest(`${label} is ${value.length} characters long; ${kind} is at most ${MAX_FILTER_LENGTH}`);
  const nul = value.indexOf("\u0000");
  if (nul >= 0) throw badRequest(`${label} contains the NUL character (U+0000) at index ${nul}: no ${name} the ledger keeps can contain it; remove it`);
}

export function choice<T extends string>(query: Query, name: string, allowed: readonly T[]): T | undefined {
  const value = text(query, name);
  if (value === undefined) return undefined;
  if (!(allowed as readonly string[]).includes(value)) throw badRequest(`${name} must be one of ${allowed.join(", ")}; got ${JSON.stringify(value)}`);
  return value as T;
}

export const callState = (query: Query): CallState | undefined => choice(query, "state", CALL_STATES);

export function count(query: Query, name: string, fallback: number, max = 1000): number {
  const value = text(query, name);
  if (value === undefined) return fallback;
  const n = Number(value);
  if (!/^\d+$/.test(value) || n < 1 || n > max) throw badRequest(`${name} must be a whole number from 1 to ${max}; got ${JSON.stringify(value)}`);
  return n;
}

/** A time as epoch milliseconds or an ISO-8601 date. */
export function time(query: Query, name: string): number | undefined {
  const value = text(query, name);
  if (value === undefined) return undefined;
  const n = /^\d+$/.test(value) ? Number(value) : Date.parse(value);
  if (!Number.isSafeInteger(n)) throw badRequest(`${name} must be epoch milliseconds or an ISO-8601 time, e.g. 2026-12-01T12:00:00Z; got ${JSON.stringify(value)}`);
  return n;
}

export function flag(query: Query, name: string): boolean {
  const value = text(query, name);
  return value === "true" || value === "1";
}

/** A JSON body's fields: an object, or a 400. */
export function fields(body: unknown): Record<string, unknown> {
  if (body === undefined || body === null) return {};
  if (typeof body !== "object" || Array.isArray(body)) throw badRequest("the request body must be a JSON object");
  return body as Record<string, unknown>;
}

export function optionalString(body: Record<string, unknown>, name: string): string | undefined {
  const value = body[name];
  if (value === undefined || value === null) return undefined;
  if (typeof value !== "string") throw badRequest(`${name} must be a string`);
  return value;
}

export function requiredString(body: Record<string, unknown>, name: string): string {
  const value = optionalString(body, name);
  if (value === undefined || value.trim() === "") throw badRequest(`${name} is required: a non-empty string`);
  return value;
}
