/**
 * Naming the database in messages (never its password) and telling driver errors apart:
 * "cannot reach the database" from "the database refused the statement" from "damaged data".
 */
import { messageOf } from "../../core/errors.js";

export interface Target {
  readonly user: string;
  readonly host: string;
  readonly port: number;
  readonly database: string;
}

interface ConnectionFields {
  readonly connectionString?: string | undefined;
  readonly user?: string | undefined;
  readonly host?: string | undefined;
  readonly port?: number | string | undefined;
  readonly database?: string | undefined;
}

/** Where a connection string or pool config points, with node-postgres's defaults (PG* variables, then localhost:5432). */
export function targetOf(fields: ConnectionFields): Target {
  let fromUrl: Partial<Record<keyof Target, string>> = {};
  if (fields.connectionString !== undefined) {
    try {
      const url = new URL(fields.connectionString);
      fromUrl = {
        ...(url.username ? { user: decodeURIComponent(url.username) } : {}),
        ...(url.hostname ? { host: url.hostname } : {}),
        ...(url.searchParams.get("host") ? { host: url.searchParams.get("host") as string } : {}),
        ...(url.port ? { port: url.port } : {}),
        ...(url.pathname.length > 1 ? { database: decodeURIComponent(url.pathname.slice(1)) } : {}),
      };
    } catch {
      // Not a URL (a bare socket path): the fields and defaults below still name something useful.
    }
  }
  const env = process.env;
  const user = fromUrl.user ?? fields.user ?? env.PGUSER ?? env.USER ?? "postgres";
  return {
    user,
    host: fromUrl.host ?? fields.host ?? env.PGHOST ?? "localhost",
    port: Number(fromUrl.port ?? fields.port ?? env.PGPORT ?? 5432),
    database: fromUrl.database ?? fields.database ?? env.PGDATABASE ?? user,
  };
}

export function describeTarget(target: Target): string {
  const host = target.host.includes(":") && !target.host.startsWith("/") ? `[${target.host}]` : target.host;
  return `postgres://${target.user}@${host}:${target.port}/${target.database}`;
}

const NETWORK_CODES = new Set([
  "ECONNREFUSED", "ECONNRESET", "ECONNABORTED", "ETIMEDOUT", "EPIPE", "ENOTFOUND", "EAI_AGAIN",
  "EHOSTUNREACH", "EHOSTDOWN", "ENETUNREACH", "ENETDOWN",
]);

/** SQLSTATEs that mean the server went away or would not take the connection. */
const GONE_STATES = new Set([
  "57P01", // admin_shutdown
  "57P02", // crash_shutdown
  "57P03", // cannot_connect_now (starting up, shutting down)
  "57P05", // idle_session_timeout
  "53300", // too_many_connections
]);

const GONE_MESSAGES = /connection terminated|connection timeout|timeout exceeded when trying to connect|connection error|Cannot use a pool after calling end|Client was closed|not queryable/i;

/** SQLSTATEs that say the server found its own data damaged. */
const DAMAGE_STATES = new Set(["XX001", "XX002"]); // data_corrupted, index_corrupted

/** True when PostgreSQL refused a value its text type cannot hold (U+0000): the input is at fault, not the database. */
export function isUnstorableText(err: unknown): boolean {
  return codeOf(err) === "22021" || codeOf(err) === "22P05"; // character_not_in_repertoire, untranslatable_character
}

function codeOf(err: unknown): string | undefined {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === "string" ? code : undefined;
}

/** True when the database could not be reached or dropped the connection (as opposed to refusing a statement). */
export function isConnectionError(err: unknown): boolean {
  const code = codeOf(err);
  if (code !== undefined && (NETWORK_CODES.has(code) || GONE_STATES.has(code) || code.startsWith("08"))) return true;
  if (err instanceof AggregateError && err.errors.some(isConnectionError)) return true;
  return err instanceof Error && GONE_MESSAGES.test(err.message);
}

export function isDamageError(err: unknown): boolean {
  const code = codeOf(err);
  return code !== undefined && DAMAGE_STATES.has(code);
}

/** A one-line reason: SQLSTATE or errno and the message (AggregateErrors, as Node's dual-stack connect gives, spelled out). */
export function reasonOf(err: unknown): string {
  if (err instanceof AggregateError) {
    const inner = [...new Set(err.errors.map(reasonOf))];
    return inner.length > 0 ? inner.join("; ") : messageOf(err);
  }
  const code = codeOf(err);
  const message = messageOf(err);
  return code !== undefined && !message.includes(code) ? `${code}: ${message}` : message;
}

/** "cached plan must not change result type": a prepared statement outlived a change of its table's column types. */
export function isStalePlan(err: unknown): boolean {
  return codeOf(err) === "0A000" && err instanceof Error && /cached plan/i.test(err.message);
}

/** A deadlock or a serialization failure: the server rolled the transaction back, and the same statements may simply be sent again. */
export function isTransient(err: unknown): boolean {
  return codeOf(err) === "40P01" || codeOf(err) === "40001";
}

/** node-postgres's pool waited connectTimeoutMs for a connection: the server is silent, or every pooled connection stayed busy. */
export function isPoolTimeout(err: unknown): boolean {
  return err instanceof Error && /timeout exceeded when trying to connect/i.test(err.message);
}
