/**
 * The gateway over Streamable HTTP: one MCP session per host connection, on 127.0.0.1 unless
 * told otherwise, and every request must carry `Authorization: Bearer <token>` (a loopback port
 * is reachable by every local process and, through DNS rebinding, by web pages).
 */
import { randomUUID, timingSafeEqual } from "node:crypto";
import { createServer, type IncomingMessage, type Server as HttpServer, type ServerResponse } from "node:http";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { isInitializeRequest } from "@modelcontextprotocol/sdk/types.js";
import { messageOf } from "../core/errors.js";
import type { McpGateway } from "./gateway.js";

export interface ListenOptions {
  readonly host: string;
  readonly port: number;
  readonly token: string;
  /** The path the MCP endpoint is served on (default /mcp). */
  readonly path?: string;
}

export interface Listening {
  readonly url: string;
  close(): Promise<void>;
}

export async function listenHttp(gateway: McpGateway, options: ListenOptions, log: (line: string) => void): Promise<Listening> {
  const path = options.path ?? "/mcp";
  const sessions = new Map<string, StreamableHTTPServerTransport>();
  const expected = Buffer.from(`Bearer ${options.token}`);

  const authorised = (req: IncomingMessage) => {
    const given = Buffer.from(req.headers.authorization ?? "");
    return given.length === expected.length && timingSafeEqual(given, expected);
  };
  const reply = (res: ServerResponse, status: number, message: string) => {
    res.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify({ jsonrpc: "2.0", error: { code: -32000, message }, id: null }));
  };

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? "/", "http://gateway");
    if (url.pathname !== path) return reply(res, 404, `not found: the MCP endpoint is ${path}`);
    if (!authorised(req)) {
      res.setHeader("www-authenticate", "Bearer");
      return reply(res, 401, "missing or wrong token: send Authorization: Bearer <the gateway's token>");
    }
    const sessionId = req.headers["mcp-session-id"];
    const existing = typeof sessionId === "string" ? sessions.get(sessionId) : undefined;
    if (existing) return existing.handleRequest(req, res);
    if (req.method !== "POST") return reply(res, 400, typeof sessionId === "string" ? `unknown MCP session ${sessionId}: initialize a new one` : "no MCP session: initialize first");
    const body = await readJson(req);
    if (typeof sessionId === "string" || !isInitializeRequest(body)) {
      return reply(res, typeof sessionId === "string" ? 404 : 400, typeof sessionId === "string" ? `unknown MCP session ${sessionId}: initialize a new one` : "no MCP session: the first request must be initialize");
    }
    const transport: StreamableHTTPServerTransport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      onsessioninitialized: (id) => void sessions.set(id, transport),
    });
    transport.onclose = () => {
      if (transport.sessionId) sessions.delete(transport.sessionId);
    };
    await gateway.connectHost(transport);
    await transport.handleRequest(req, res, body);
  }

  const server: HttpServer = createServer((req, res) => {
    handle(req, res).catch((err: unknown) => {
      log(`effectgate mcp http: ${messageOf(err)}`);
      if (!res.headersSent) reply(res, 500, "the gateway could not handle this request");
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port, options.host, () => resolve());
  });
  const address = server.address();
  const port = typeof address === "object" && address !== null ? address.port : options.port;
  const host = options.host.includes(":") ? `[${options.host}]` : options.host;
  return {
    url: `http://${host}:${port}${path}`,
    async close() {
      for (const transport of sessions.values()) await transport.close().catch(() => undefined);
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

async function readJson(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > 4 * 1024 * 1024) throw new Error("request body over 4 MiB");
    chunks.push(chunk as Buffer);
  }
  try {
    return JSON.parse(Buffer.concat(chunks).toString("utf8"));
  } catch {
    return undefined;
  }
}
