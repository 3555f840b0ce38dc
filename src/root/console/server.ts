/**
 * The operator console's HTTP server: the JSON API (routes.ts), its live-update stream, the web
 * console's three static files, and optionally `/metrics`. It binds 127.0.0.1 unless told
 * otherwise, and a non-loopback address only with `allowRemote`. Every response carries a strict
 * Content-Security-Policy; every API request needs the bearer token (guard.ts).
 */
import { readFileSync } from "node:fs";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { EffectgateError, messageOf } from "../../core/errors.js";
import { jsonNestsDeeperThan, MAX_JSON_DEPTH } from "../../core/json-depth.js";
import { stderrLogger, type Logger } from "../../core/logger.js";
import type { Stores } from "../../contracts/stores.js";
import { discardBody, readBodyLimited } from "../../http/body.js";
import { ApiError, toApiError } from "./api-error.js";
import { applyServerLimits, isLoopback, requestTargetUrl, serverLimitsOf, type ServerLimits } from "../../core/local-server.js";
import { checkRequest } from "./guard.js";
import { liveFeed } from "./live.js";
import { CONSOLE_HTML } from "./ui/page.js";
import { CONSOLE_SCRIPT } from "./ui/script.js";
import { CONSOLE_STYLE } from "./ui/style.js";
import { checkParams } from "./params.js";
import { matchRoute } from "./routes.js";

export const DEFAULT_CONSOLE_PORT = 4820;
const MAX_BODY = 64 * 1024;
/** Live-update streams open at once (each console tab holds one); one more is refused with 503. */
export const DEFAULT_MAX_EVENT_STREAMS = 32;
/** What a refused stream is told to wait before it tries again (the console page retries every 2 s by itself). */
const STREAMS_RETRY_AFTER_SEC = 5;

/** Routes the server answers itself, besides the API table (the OpenAPI file lists these too). */
export const SERVER_ROUTES = [
  { method: "GET", path: "/api/events" },
  { method: "GET", path: "/api/openapi.json" },
] as const;

export const CONTENT_SECURITY_POLICY = [
  "default-src 'none'", "script-src 'self'", "style-src 'self'", "img-src 'self'", "connect-src 'self'",
  "base-uri 'none'", "form-action 'none'", "frame-ancestors 'none'",
].join("; ");

/**
 * `headersTimeoutMs` (default 10 s), `requestTimeoutMs` (30 s), `keepAliveTimeoutMs` (5 s) and
 * `maxConnections` (256) are the server's limits (core/local-server.ts): a client that sends its
 * headers or its request too slowly gets 408 and is disconnected; a connection past the cap is closed at once.
 */
export interface ConsoleOptions extends ServerLimits {
  readonly ledger: Stores;
  /** The bearer token every API request must carry. */
  readonly token: string;
  /** Default 127.0.0.1. */
  readonly host?: string;
  /** Default 4820; 0 picks a free port. */
  readonly port?: number;
  /** Needed to bind anything but a loopback address. */
  readonly allowRemote?: boolean;
  /** How often the ledger is looked at for live updates while a browser listens (default 1000 ms). */
  readonly pollMs?: number;
  /** Who changes are recorded as made by when a request names nobody (default "console"). */
  readonly operator?: string;
  readonly logger?: Logger;
  /** Serves `GET /metrics` (token required) with what this returns, e.g. a prom-client registry's text. */
  readonly metrics?: () => Promise<{ readonly contentType: string; readonly body: string }>;
  /** Live-update streams (`GET /api/events`) open at once (default 32); one more gets 503 with Retry-After. */
  readonly maxEventStreams?: number;
}

export interface ConsoleServer {
  /** `http://host:port/` */
  readonly url: string;
  readonly port: number;
  /** Stops listening and ends the live streams. The ledger stays open (it is the caller's). */
  close(): Promise<void>;
}

const STATIC: Readonly<Record<string, { type: string; body: string }>> = {
  "/": { type: "text/html; charset=utf-8", body: CONSOLE_HTML },
  "/console.js": { type: "text/javascript; charset=utf-8", body: CONSOLE_SCRIPT },
  "/console.css": { type: "text/css; charset=utf-8", body: CONSOLE_STYLE },
};

let openapi: string | undefined;
function openapiText(): string {
  openapi ??= readFileSync(new URL("../../../docs/openapi.json", import.meta.url), "utf8");
  return openapi;
}

function securityHeaders(res: ServerResponse): void {
  res.setHeader("Content-Security-Policy", CONTENT_SECURITY_POLICY);
  res.setHeader("X-Content-Type-Options", "nosniff");
  res.setHeader("Referrer-Policy", "no-referrer");
  res.setHeader("X-Frame-Options", "DENY");
  res.setHeader("Cross-Origin-Resource-Policy", "same-origin");
  res.setHeader("Cache-Control", "no-store");
}

function send(res: ServerResponse, status: number, type: string, body: string): void {
  res.statusCode = status;
  res.setHeader("Content-Type", type);
  res.end(body);
}

function sendJson(res: ServerResponse, status: number, value: unknown): void {
  send(res, status, "application/json; charset=utf-8", JSON.stringify(value));
}

/** Thrown when the client left mid-body: nobody to answer, nothing to log. */
class ClientGone extends Error {}

async function readBody(req: IncomingMessage): Promise<unknown> {
  const read = await readBodyLimited(req, MAX_BODY);
  if (read.kind === "gone") throw new ClientGone("the client closed the connection before sending its whole body");
  if (read.kind === "too_large") throw new ApiError(413, "too_large", `the request body is over ${MAX_BODY} bytes`, { close: read.close });
  const text = read.bytes.toString("utf8");
  if (text.trim() === "") return undefined;
  // Before parsing: the operator layer and the stores walk (and JSON.stringify) what is sent, recursively.
  if (jsonNestsDeeperThan(text)) throw new ApiError(400, "json_too_deep", `the request body nests arrays and objects deeper than ${MAX_JSON_DEPTH} levels; send it flatter`);
  try {
    return JSON.parse(text) as unknown;
  } catch (err) {
    throw new ApiError(400, "bad_json", `the request body is not JSON: ${messageOf(err)}`);
  }
}

/**
 * A message without where the ledger is (a file path, a database address): an error from a store
 * or the operator layer may name it, and the console's answers do not.
 */
function withoutLocation(message: string, location: string): string {
  if (location === "memory" || location === "") return message;
  const names = [location, location.replace(/^sqlite:/, ""), location.replace(/ schema \S+$/, "")].filter((n) => n.length > 0);
  let out = message;
  for (const name of [...new Set(names)].sort((a, b) => b.length - a.length)) {
    out = out.split(`the ledger ${name}`).join("the ledger").split(` of ${name}`).join("").split(name).join("the ledger");
  }
  return out;
}

export async function startConsole(options: ConsoleOptions): Promise<ConsoleServer> {
  const host = options.host ?? "127.0.0.1";
  const allowRemote = options.allowRemote === true;
  if (!isLoopback(host) && !allowRemote) {
    throw new EffectgateError("EG_BAD_OPTION",
      `refusing to serve the console on ${host}: it would be reachable from other machines. Bind 127.0.0.1 (the default), or pass --allow-remote (allowRemote) if that is what you want, behind TLS`);
  }
  if (typeof options.token !== "string" || options.token.length < 16) throw new EffectgateError("EG_BAD_OPTION", "the console needs a bearer token of at least 16 characters");
  const maxEventStreams = options.maxEventStreams ?? DEFAULT_MAX_EVENT_STREAMS;
  if (!Number.isInteger(maxEventStreams) || maxEventStreams <= 0) throw new EffectgateError("EG_BAD_OPTION", `maxEventStreams must be a positive integer, not ${String(maxEventStreams)}`);
  const logger = options.logger ?? stderrLogger;
  const live = liveFeed(options.ledger, { pollMs: options.pollMs ?? 1000, logger });
  const streams = new Set<ServerResponse>();
  const guard = { token: options.token, allowRemote };

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    securityHeaders(res);
    const url = requestTargetUrl(req.url);
    if (url === undefined) throw new ApiError(400, "bad_request_target", "the request-target is not a path (such as /api/overview); nothing was done");
    const asset = STATIC[url.pathname];
    const isApi = url.pathname.startsWith("/api/") || url.pathname === "/metrics";
    checkRequest(req, guard, isApi);
    if (asset && (req.method === "GET" || req.method === "HEAD")) return send(res, 200, asset.type, asset.body);
    if (url.pathname === "/favicon.ico") {
      res.statusCode = 204; // no icon, and no 404 in the browser's console
      return void res.end();
    }
    if (url.pathname === "/api/events" && req.method === "GET") {
      if (streams.size >= maxEventStreams) {
        throw new ApiError(503, "too_many_streams",
          `${maxEventStreams} live-update streams are open already (the console's maxEventStreams, --max-event-streams); close a console tab, or try again later`,
          { retryAfterSec: STREAMS_RETRY_AFTER_SEC });
      }
      return stream(res);
    }
    if (url.pathname === "/api/openapi.json" && req.method === "GET") return send(res, 200, "application/json; charset=utf-8", openapiText());
    if (url.pathname === "/metrics" && req.method === "GET" && options.metrics) {
      const metrics = await options.metrics();
      return send(res, 200, metrics.contentType, metrics.body);
    }
    const matched = matchRoute(req.method ?? "GET", url.pathname);
    if (matched === "wrong_method") throw new ApiError(405, "method_not_allowed", `${req.method ?? "?"} is not allowed on ${url.pathname}`);
    if (!matched) throw new ApiError(404, "not_found", `there is no ${url.pathname} here; the API is described at /api/openapi.json`);
    checkParams(matched.params);
    const body = req.method === "POST" ? await readBody(req) : undefined;
    const result = await matched.route.handle({
      ledger: options.ledger, params: matched.params, query: url.searchParams, body, operator: options.operator ?? "console",
    });
    if (matched.route.changes) {
      logger.info({ event: "console_change", method: req.method, path: url.pathname }, "an operator changed the ledger through the console");
      live.poke();
    }
    sendJson(res, 200, result);
  }

  /** Counted from its first byte to its close, so the cap holds however fast streams open. */
  async function stream(res: ServerResponse): Promise<void> {
    res.statusCode = 200;
    res.setHeader("Content-Type", "text/event-stream; charset=utf-8");
    res.setHeader("Connection", "keep-alive");
    res.flushHeaders();
    res.write("retry: 2000\n\n");
    streams.add(res);
    const beat = setInterval(() => res.write(": ping\n\n"), 15_000);
    beat.unref();
    let closed = false;
    res.once("close", () => {
      closed = true;
      clearInterval(beat);
      streams.delete(res);
    });
    const unsubscribe = await live.subscribe((event) => res.write(`event: change\ndata: ${JSON.stringify(event)}\n\n`));
    if (closed || res.destroyed) return unsubscribe();
    res.once("close", unsubscribe);
    res.write("event: ready\ndata: {}\n\n");
  }

  const server = createServer((req, res) => {
    handle(req, res).catch((err: unknown) => {
      if (err instanceof ClientGone) {
        res.destroy();
        return;
      }
      const known = toApiError(err);
      const apiError = new ApiError(known.status, known.code, withoutLocation(known.message, options.ledger.location), known.extras);
      // Only the server's own failures: a client's mistake (4xx), or a refusal such as a full stream cap, is answered, never logged as an error.
      if (apiError.status >= 500 && !(err instanceof ApiError)) {
        logger.error({ event: "console_request_failed", path: req.url, code: apiError.code, error: apiError.message }, "a console request failed");
      }
      if (res.headersSent) {
        res.end();
        return;
      }
      // Refused before its body was read (a 401, a 404): what is left of it is read, within a bound.
      discardBody(req);
      if (apiError.status === 401) res.setHeader("WWW-Authenticate", 'Bearer realm="effectgate"');
      if (apiError.extras.retryAfterSec !== undefined) res.setHeader("Retry-After", String(apiError.extras.retryAfterSec));
      if (apiError.extras.close === true) res.setHeader("Connection", "close");
      sendJson(res, apiError.status, { error: { code: apiError.code, message: apiError.message } });
    });
  });
  try {
    applyServerLimits(server, serverLimitsOf(options));
  } catch (err) {
    throw new EffectgateError("EG_BAD_OPTION", messageOf(err));
  }
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port ?? DEFAULT_CONSOLE_PORT, host, () => {
      server.off("error", reject);
      resolve();
    });
  });
  const port = (server.address() as AddressInfo).port;
  const shown = host.includes(":") ? `[${host}]` : host;
  return {
    url: `http://${shown}:${port}/`,
    port,
    async close() {
      live.close();
      for (const res of streams) res.end();
      streams.clear();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
