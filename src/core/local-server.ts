/**
 * What every HTTP server the package starts (the console, the MCP listener) shares: the limits
 * that keep one slow or greedy client from holding it (Node's own defaults wait 60 s for headers
 * and 300 s for a request, with no cap on connections), and the Host / Origin check that keeps a
 * web page from reaching a loopback server through DNS rebinding.
 */
import type { IncomingMessage, Server } from "node:http";
import { isIP } from "node:net";

export interface ServerLimits {
  /** How long a client may take to send a request's headers (default 10 s). */
  readonly headersTimeoutMs?: number;
  /** How long a client may take to send a whole request, headers and body (default 30 s). A response stream is not bound by it. */
  readonly requestTimeoutMs?: number;
  /** How long an idle kept-alive connection stays open (default 5 s). */
  readonly keepAliveTimeoutMs?: number;
  /** Connections open at once; a connection past it is closed at once (default 256). */
  readonly maxConnections?: number;
}

export const DEFAULT_SERVER_LIMITS: Required<ServerLimits> = {
  headersTimeoutMs: 10_000,
  requestTimeoutMs: 30_000,
  keepAliveTimeoutMs: 5_000,
  maxConnections: 256,
};

/** Sets the limits on a server before it listens; returns them as applied. */
export function applyServerLimits(server: Server, limits: ServerLimits = {}): Required<ServerLimits> {
  const applied = { ...DEFAULT_SERVER_LIMITS, ...definedOnly(limits) };
  for (const [name, value] of Object.entries(applied)) {
    if (!Number.isInteger(value) || value <= 0) throw new RangeError(`server limit ${name} must be a positive integer (milliseconds or a count), not ${String(value)}`);
  }
  // Node requires headersTimeout <= requestTimeout; a smaller request timeout lowers both.
  server.requestTimeout = applied.requestTimeoutMs;
  server.headersTimeout = Math.min(applied.headersTimeoutMs, applied.requestTimeoutMs);
  server.keepAliveTimeout = applied.keepAliveTimeoutMs;
  server.maxConnections = applied.maxConnections;
  return applied;
}

function definedOnly(limits: ServerLimits): ServerLimits {
  return Object.fromEntries(Object.entries(limits).filter(([, v]) => v !== undefined));
}

const LOOPBACK_NAMES = new Set(["localhost", "127.0.0.1", "[::1]", "::1"]);

export function isLoopback(host: string): boolean {
  if (LOOPBACK_NAMES.has(host.toLowerCase())) return true;
  return isIP(host) === 4 && host.startsWith("127.");
}

/** The hostname of a Host header value (`127.0.0.1:4820`, `[::1]:4820`, `localhost`). */
export function hostnameOf(hostHeader: string): string {
  if (hostHeader.startsWith("[")) return hostHeader.slice(0, hostHeader.indexOf("]") + 1);
  const colon = hostHeader.lastIndexOf(":");
  return colon < 0 ? hostHeader : hostHeader.slice(0, colon);
}

export type ForeignRequest =
  | { readonly kind: "wrong_host"; readonly message: string }
  | { readonly kind: "cross_origin"; readonly message: string };

/**
 * Why a request must be refused before anything else is read (`what` names the server in the
 * message), or undefined: a Host that is not a loopback name (unless the server was allowed to
 * bind a non-loopback address), or an Origin other than the server's own.
 */
export function foreignRequest(req: IncomingMessage, options: { readonly allowRemote: boolean; readonly what: string }): ForeignRequest | undefined {
  const host = req.headers.host ?? "";
  if (!options.allowRemote && !isLoopback(hostnameOf(host))) {
    return { kind: "wrong_host", message: `${options.what} answers only to its loopback address, not to ${JSON.stringify(host)}` };
  }
  const origin = req.headers.origin;
  if (origin !== undefined && origin !== `http://${host}` && origin !== `https://${host}`) {
    return { kind: "cross_origin", message: `requests from ${JSON.stringify(origin)} are refused: ${options.what} takes requests from its own origin only` };
  }
  return undefined;
}
