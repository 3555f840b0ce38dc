/**
 * What every HTTP server the package starts (the console, the MCP listener) shares: the limits
 * that keep one slow or greedy client from holding it (Node's own defaults wait 60 s for headers
 * and 300 s for a request, with no cap on connections), and the Host / Origin check that keeps a
 * web page from reaching a loopback server through DNS rebinding; and reading a request-target
 * without letting `new URL` throw (every HTTP entry, the Idempotency-Key middleware too).
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

/** Just the limits of a larger options object (one that extends ServerLimits), for applyServerLimits. */
export function serverLimitsOf(options: ServerLimits): ServerLimits {
  const picked: { -readonly [K in keyof ServerLimits]: number } = {};
  for (const name of Object.keys(DEFAULT_SERVER_LIMITS) as (keyof ServerLimits)[]) {
    const value = options[name];
    if (value !== undefined) picked[name] = value;
  }
  return picked;
}

/**
 * Sets the limits on a server before it listens; returns them as applied. Node looks for
 * connections past their header or request timeout only every `connectionsCheckingInterval`
 * (30 s by default, read when the server starts listening), so that is set to a quarter of the
 * shorter timeout (at most 1 s): a timeout is then enforced within a quarter of itself.
 */
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
  (server as { connectionsCheckingInterval?: number }).connectionsCheckingInterval = checkingInterval(server.headersTimeout);
  return applied;
}

/** How often Node checks header and request timeouts: a quarter of the shorter one (headersTimeout is never the longer), 10 ms to 1 s. */
function checkingInterval(shorterTimeoutMs: number): number {
  return Math.max(10, Math.min(1000, Math.floor(shorterTimeoutMs / 4)));
}

function definedOnly(limits: ServerLimits): ServerLimits {
  return Object.fromEntries(Object.entries(limits).filter(([, v]) => v !== undefined));
}

/**
 * The URL of a request-target as node:http hands it over (`req.url`), or undefined when it names
 * none: origin-form (`/a/b?c`; `//x/y` too, which is a path here, never a host) or absolute-form
 * (`http://host/a`). Anything else (`http://[`, `*`, `a`) is a request to answer with 400.
 * `new URL(req.url, base)` would throw on `//[` (here the path `//[`) and resolve `//x/y` to the host `x`.
 */
export function requestTargetUrl(target: string | undefined): URL | undefined {
  const text = target === undefined || target === "" ? "/" : target;
  try {
    if (text.startsWith("/")) return new URL(`http://request-target.invalid${text}`);
    if (/^https?:\/\//i.test(text)) return new URL(text);
  } catch {
    // not a URL: undefined below
  }
  return undefined;
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
