/**
 * The gateway over Streamable HTTP: one MCP session per host connection, on 127.0.0.1 unless
 * told otherwise, and every request must carry `Authorization: Bearer <token>` (a loopback port
 * is reachable by every local process and, through DNS rebinding, by web pages).
 */
import { randomUUID, timingSafeEqual } from "node:crypto";
import { createServer, type IncomingMessage, type Server as HttpServer, type ServerResponse } from "node:http";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { isInitializeRequest } from "@modelcontextprotocol/sdk/types.js";
import { EffectgateError, messageOf } from "../core/errors.js";
import { applyServerLimits, foreignRequest, isLoopback, requestTargetUrl, serverLimitsOf, type ServerLimits } from "../core/local-server.js";
import type { McpGateway } from "./gateway.js";
import { sessionTable } from "./http-sessions.js";
import { DEFAULT_MAX_SESSIONS, DEFAULT_SESSION_IDLE_MS, MAX_HTTP_BODY_BYTES } from "./limits.js";

/** The listener's own limits beside the server limits every server of the package has (header and request timeouts, a connection cap). */
export interface ListenOptions extends ServerLimits {
  readonly host: string;
  readonly port: number;
  readonly token: string;
  /** The path the MCP endpoint is served on (default /mcp). */
  readonly path?: string;
  /** A session without an open request for this long is closed (default 30 minutes): hosts close without a DELETE. */
  readonly sessionIdleMs?: number;
  /** Sessions open at once (default 256); one more replaces the one idle longest, or is refused with 503 when none is idle. */
  readonly maxSessions?: number;
}

export interface Listening {
  readonly url: string;
  /** The sessions open now, each with its requests being answered (a connected host's event stream is one; 0 is idle). */
  sessions(): { readonly id: string; readonly open: number }[];
  close(): Promise<void>;
}

/** A request refused for what the client sent: answered with its status, never logged as the listener's failure. */
class Refused extends Error {
  constructor(readonly status: number, message: string, readonly headers: Record<string, string> = {}) {
    super(message);
  }
}

function positive(name: string, value: number | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  if (!Number.isInteger(value) || value <= 0) throw new EffectgateError("EG_BAD_OPTION", `${name} must be a positive integer, not ${String(value)}`);
  return value;
}

export async function listenHttp(gateway: McpGateway, options: ListenOptions, log: (line: string) => void): Promise<Listening> {
  const path = options.path ?? "/mcp";
  const sessions = sessionTable({
    idleMs: positive("sessionIdleMs", options.sessionIdleMs, DEFAULT_SESSION_IDLE_MS),
    max: positive("maxSessions", options.maxSessions, DEFAULT_MAX_SESSIONS),
    log,
  });
  const expected = Buffer.from(`Bearer ${options.token}`);
  // Bound to a loopback address, the listener answers only to loopback names (DNS rebinding); bound to another, to any (the token still guards it).
  const allowRemote = !isLoopback(options.host.replace(/^\[(.*)\]$/, "$1"));

  const authorised = (req: IncomingMessage) => {
    const given = Buffer.from(req.headers.authorization ?? "");
    return given.length === expected.length && timingSafeEqual(given, expected);
  };
  const reply = (res: ServerResponse, status: number, message: string, headers: Record<string, string> = {}) => {
    // An error answer closes the connection: whatever is left of the request's body is never read.
    res.writeHead(status, { "content-type": "application/json", connection: "close", ...headers })
      .end(JSON.stringify({ jsonrpc: "2.0", error: { code: -32000, message }, id: null }));
  };

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = requestTargetUrl(req.url);
    if (url === undefined) throw new Refused(400, `the request-target is not a path: the MCP endpoint is ${path}`);
    const foreign = foreignRequest(req, { allowRemote, what: "the MCP gateway" });
    if (foreign) throw new Refused(403, foreign.message);
    if (url.pathname !== path) throw new Refused(404, `not found: the MCP endpoint is ${path}`);
    if (!authorised(req)) throw new Refused(401, "missing or wrong token: send Authorization: Bearer <the gateway's token>", { "www-authenticate": "Bearer" });
    const sessionId = req.headers["mcp-session-id"];
    const existing = typeof sessionId === "string" ? sessions.get(sessionId) : undefined;
    if (existing && typeof sessionId === "string") {
      sessions.track(sessionId, res);
      return existing.handleRequest(req, res);
    }
    if (typeof sessionId === "string") throw new Refused(404, `unknown MCP session ${sessionId} (it ended, or was closed idle): initialize a new one`);
    if (req.method !== "POST") throw new Refused(400, "no MCP session: initialize first");
    const body = await readJson(req);
    if (!isInitializeRequest(body)) throw new Refused(400, "no MCP session: the first request must be initialize");
    if (!(await sessions.makeRoom())) {
      throw new Refused(503, `all ${options.maxSessions ?? DEFAULT_MAX_SESSIONS} MCP sessions of this gateway are in use (maxSessions, --max-sessions); try again later`, { "retry-after": "5" });
    }
    const transport: StreamableHTTPServerTransport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      onsessioninitialized: (id) => sessions.add(id, transport),
    });
    transport.onclose = () => {
      if (transport.sessionId) sessions.delete(transport.sessionId);
    };
    await gateway.connectHost(transport, { transportErrors: "quiet" });
    try {
      await transport.handleRequest(req, res, body);
    } finally {
      // The transport refused the initialize (a 4xx: a wrong Accept or Content-Type): no session began, so nothing
      // would ever close it, and the gateway would keep it as a host for good (F10).
      if (transport.sessionId === undefined) await transport.close().catch(() => undefined);
    }
  }

  const server: HttpServer = createServer((req, res) => {
    handle(req, res).catch((err: unknown) => {
      if (err instanceof Refused) {
        if (!res.headersSent) reply(res, err.status, err.message, err.headers);
        return;
      }
      log(`effectgate mcp http: ${messageOf(err)}`);
      if (!res.headersSent) reply(res, 500, "the gateway could not handle this request");
    });
  });
  try {
    applyServerLimits(server, serverLimitsOf(options));
  } catch (err) {
    throw new EffectgateError("EG_BAD_OPTION", messageOf(err));
  }
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port, options.host, () => resolve());
  });
  const address = server.address();
  const port = typeof address === "object" && address !== null ? address.port : options.port;
  const host = options.host.includes(":") ? `[${options.host}]` : options.host;
  return {
    url: `http://${host}:${port}${path}`,
    sessions: () => sessions.list(),
    async close() {
      await sessions.closeAll();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** Most bytes of a refused body read and dropped, so the 413 reaches a client still sending; past it the connection is destroyed. */
const MAX_DRAIN_BYTES = 1024 * 1024;

/**
 * The first request's body as JSON; a body over the bound is a 413, one that is not JSON a 400.
 * Read by listeners, never `for await`: leaving that loop destroys the request and with it the
 * socket the 413 must go out on.
 */
function readJson(req: IncomingMessage): Promise<unknown> {
  const tooLarge = () => new Refused(413, `the request body is over ${MAX_HTTP_BODY_BYTES} bytes (4 MiB), the most the MCP gateway reads; nothing was done`);
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let done = false;
    const finish = (settle: () => void) => {
      if (done) return;
      done = true;
      req.off("data", onData);
      settle();
    };
    const refuse = () => {
      finish(() => reject(tooLarge()));
      drain(req);
    };
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > MAX_HTTP_BODY_BYTES) return refuse();
      chunks.push(chunk);
    };
    if (Number(req.headers["content-length"]) > MAX_HTTP_BODY_BYTES) return refuse();
    req.on("data", onData);
    req.once("end", () => finish(() => {
      try {
        resolve(JSON.parse(Buffer.concat(chunks, size).toString("utf8")));
      } catch (err) {
        reject(new Refused(400, `the request body is not JSON (${messageOf(err)}): send a JSON-RPC initialize request`));
      }
    }));
    // The client left mid-body: nobody is left to answer, and it is no failure of the listener's.
    req.on("error", () => finish(() => reject(new Refused(400, "the request ended before its body did"))));
  });
}

function drain(req: IncomingMessage): void {
  let dropped = 0;
  req.on("data", (chunk: Buffer) => {
    dropped += chunk.length;
    if (dropped > MAX_DRAIN_BYTES) req.socket.destroy();
  });
  req.on("error", () => undefined);
  req.resume();
}
