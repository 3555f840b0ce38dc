/**
 * The MCP listener (listenHttp) against hostile and careless clients (issue 24, items 2–4): real
 * SDK clients over real HTTP on 127.0.0.1 that close without a DELETE, raw requests with a foreign
 * Host or Origin, an unparseable request-target, an oversized first body and slow headers. The
 * gateway runs in this process (test/mcp/in-process.ts), so its log is read directly.
 */
import { request } from "node:http";
import { connect } from "node:net";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { afterEach, describe, expect, it, vi } from "vitest";
import { z } from "zod";
import type { McpGateway } from "../../src/mcp/gateway.js";
import { listenHttp, type ListenOptions, type Listening } from "../../src/mcp/http.js";
import { memoryLedger } from "../../src/stores/memory/index.js";
import { inMemoryUpstream, startedGateway } from "./in-process.js";

const TOKEN = "listener-test-token";
const open: { gateway: McpGateway; listening?: Listening }[] = [];

afterEach(async () => {
  for (const { gateway, listening } of open.splice(0)) {
    await listening?.close();
    await gateway.close();
  }
});

async function listener(options: Partial<ListenOptions> = {}) {
  const server = new McpServer({ name: "echo", version: "1.0.0" });
  server.registerTool("echo", { inputSchema: { text: z.string() }, annotations: { readOnlyHint: true } }, ({ text }) => ({ content: [{ type: "text", text }] }));
  const gateway = await startedGateway(memoryLedger(), await inMemoryUpstream(server, "echo"));
  const log: string[] = [];
  const opened: (typeof open)[number] = { gateway };
  open.push(opened);
  const listening = await listenHttp(gateway, { host: "127.0.0.1", port: 0, token: TOKEN, ...options }, (line) => log.push(line));
  opened.listening = listening;
  const url = new URL(listening.url);
  return { listening, log, url, port: Number(url.port) };
}

async function sdkHost(url: URL): Promise<{ client: Client; sessionId: string }> {
  const client = new Client({ name: "http-host", version: "1.0.0" });
  const transport = new StreamableHTTPClientTransport(url, { requestInit: { headers: { authorization: `Bearer ${TOKEN}` } } });
  await client.connect(transport);
  await client.callTool({ name: "echo", arguments: { text: "hi" } });
  return { client, sessionId: transport.sessionId! };
}

/** The session's open requests as the listener counts them (a connected SDK host keeps its event stream open). */
const openOf = (listening: Listening, id: string) => listening.sessions().find((s) => s.id === id)?.open;

interface Raw { status: number; body: string; headers: Record<string, string | string[] | undefined> }

function raw(port: number, options: { method?: string; path?: string; headers?: Record<string, string>; body?: string | Buffer }): Promise<Raw> {
  return new Promise((resolve, reject) => {
    const req = request({ host: "127.0.0.1", port, method: options.method ?? "POST", path: options.path ?? "/mcp", headers: options.headers ?? {} }, (res) => {
      let body = "";
      res.setEncoding("utf8").on("data", (c: string) => (body += c)).on("end", () => resolve({ status: res.statusCode ?? 0, body, headers: res.headers }));
    });
    req.on("error", reject);
    req.end(options.body);
  });
}

const INIT = JSON.stringify({ jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: "2025-11-25", capabilities: {}, clientInfo: { name: "raw", version: "1" } } });
const JSON_HEADERS = { "content-type": "application/json", accept: "application/json, text/event-stream", authorization: `Bearer ${TOKEN}` };
const messageOf = (r: Raw) => (JSON.parse(r.body) as { error: { message: string } }).error.message;

describe("MCP HTTP sessions are freed (issue 24 #2)", () => {
  it("a session whose SDK client closed without a DELETE is closed once idle; a connected host's session stays", async () => {
    const { listening, log, url, port } = await listener({ sessionIdleMs: 200 });
    const stays = await sdkHost(url);
    const leaves = await sdkHost(url);
    try {
      // Both hosts' event streams are open: neither is idle, however long they stay quiet.
      await vi.waitFor(() => expect([openOf(listening, stays.sessionId), openOf(listening, leaves.sessionId)]).toEqual([1, 1]));
      await leaves.client.close();
      await vi.waitFor(() => expect(log).toContain(`effectgate mcp http: session ${leaves.sessionId} closed (idle for 200 ms)`), { timeout: 10_000 });
      expect(listening.sessions().map((s) => s.id)).toEqual([stays.sessionId]);
      const stale = await raw(port, { headers: { ...JSON_HEADERS, "mcp-session-id": leaves.sessionId, "mcp-protocol-version": "2025-11-25" }, body: JSON.stringify({ jsonrpc: "2.0", id: 2, method: "tools/list" }) });
      expect([stale.status, messageOf(stale)]).toEqual([404, expect.stringMatching(/unknown MCP session .*initialize a new one/)]);
      expect(await stays.client.callTool({ name: "echo", arguments: { text: "still here" } })).toMatchObject({ content: [{ text: "still here" }] });
    } finally {
      await stays.client.close();
    }
  });

  it("at the cap, a new session replaces the one idle longest; with none idle it is refused with 503", async () => {
    const { listening, log, url, port } = await listener({ maxSessions: 2 });
    const gone = await sdkHost(url);
    await gone.client.close();
    await vi.waitFor(() => expect(openOf(listening, gone.sessionId)).toBe(0));
    const first = await sdkHost(url);
    await vi.waitFor(() => expect(openOf(listening, first.sessionId)).toBe(1));
    const second = await sdkHost(url);
    try {
      expect(log).toContainEqual(expect.stringMatching(new RegExp(`session ${gone.sessionId} closed \\(the listener's 2 sessions were open and this one was idle longest\\)`)));
      await vi.waitFor(() => expect(openOf(listening, second.sessionId)).toBe(1));
      expect(listening.sessions().map((s) => s.id).sort()).toEqual([first.sessionId, second.sessionId].sort());
      const refused = await raw(port, { headers: JSON_HEADERS, body: INIT });
      expect([refused.status, refused.headers["retry-after"], messageOf(refused)]).toEqual([503, "5", expect.stringMatching(/all 2 MCP sessions of this gateway are in use \(maxSessions, --max-sessions\)/)]);
      // Both connected hosts still work.
      for (const host of [first, second]) expect(await host.client.callTool({ name: "echo", arguments: { text: "ok" } })).toMatchObject({ content: [{ text: "ok" }] });
    } finally {
      await first.client.close();
      await second.client.close();
    }
  });

  it("forty hosts that initialize and close without a DELETE leave at most maxSessions sessions behind", async () => {
    const { listening, url } = await listener({ maxSessions: 8 });
    for (let i = 0; i < 40; i++) {
      const host = await sdkHost(url);
      await host.client.close();
      await vi.waitFor(() => expect(openOf(listening, host.sessionId)).toBe(0));
    }
    expect(listening.sessions().length).toBeLessThanOrEqual(8);
  });
});

describe("a refused initialize leaves nothing behind (F10)", () => {
  it("initializes the transport refuses (wrong Accept, wrong Content-Type, a second initialize in a batch) keep no session object", async () => {
    const { listening, port } = await listener();
    const gateway = open.at(-1)!.gateway;
    const refusals: Raw[] = [];
    for (let i = 0; i < 10; i++) {
      refusals.push(await raw(port, { headers: { ...JSON_HEADERS, accept: "application/json" }, body: INIT }));
      refusals.push(await raw(port, { headers: { ...JSON_HEADERS, "content-type": "text/plain" }, body: INIT }));
      refusals.push(await raw(port, { headers: JSON_HEADERS, body: `[${INIT},${INIT}]` }));
    }
    expect(new Set(refusals.map((r) => r.status))).toEqual(new Set([406, 415, 400]));
    expect(listening.sessions()).toEqual([]);
    // Each was connected to the gateway as a host before the transport refused it: it must be closed, not kept.
    expect(gateway.hostCount()).toBe(0);
    const ok = await raw(port, { headers: JSON_HEADERS, body: INIT });
    expect(ok.status).toBe(200);
    expect(listening.sessions()).toHaveLength(1);
    expect(gateway.hostCount()).toBe(1);
  });
});

describe("the MCP listener refuses a foreign Host or Origin (issue 24 #3)", () => {
  it("a Host that is not a loopback name is refused with 403 before the token is looked at", async () => {
    const { port, log } = await listener();
    const r = await raw(port, { headers: { ...JSON_HEADERS, host: `evil.example:${port}` }, body: INIT });
    expect([r.status, messageOf(r)]).toEqual([403, `the MCP gateway answers only to its loopback address, not to "evil.example:${port}"`]);
    expect(log).toEqual([]);
  });

  it("an Origin other than the listener's own is refused with 403; its own origin and none are let through", async () => {
    const { port, log } = await listener();
    const foreign = await raw(port, { headers: { ...JSON_HEADERS, origin: "http://evil.example" }, body: INIT });
    expect([foreign.status, messageOf(foreign)]).toEqual([403, expect.stringMatching(/requests from "http:\/\/evil\.example" are refused: the MCP gateway takes requests from its own origin only/)]);
    const own = await raw(port, { headers: { ...JSON_HEADERS, origin: `http://127.0.0.1:${port}` }, body: INIT });
    expect(own.status).toBe(200);
    const localhost = await raw(port, { headers: { ...JSON_HEADERS, host: `localhost:${port}` }, body: INIT });
    expect(localhost.status).toBe(200);
    expect(log).toEqual([]);
  });
});

describe("client mistakes are 4xx with a clear message, never a 500 or a log line (issue 24 #4)", () => {
  it("an odd request-target is a 4xx: //[ is a path (404), http://[ is no URL (400)", async () => {
    const { port, log } = await listener();
    const path = await raw(port, { path: "//[", headers: JSON_HEADERS, body: INIT });
    expect([path.status, messageOf(path)]).toEqual([404, "not found: the MCP endpoint is /mcp"]);
    const absolute = await raw(port, { path: "http://[", headers: JSON_HEADERS, body: INIT });
    expect([absolute.status, messageOf(absolute)]).toEqual([400, "the request-target is not a path: the MCP endpoint is /mcp"]);
    expect(log).toEqual([]);
  });

  it("a first body over 4 MiB is a 413, declared or streamed", async () => {
    const { port, log } = await listener();
    const big = Buffer.alloc(4 * 1024 * 1024 + 1, 0x20);
    const declared = await raw(port, { headers: JSON_HEADERS, body: big });
    expect([declared.status, messageOf(declared)]).toEqual([413, expect.stringMatching(/^the request body is over 4194304 bytes \(4 MiB\), the most the MCP gateway reads/)]);
    const streamed = await new Promise<Raw>((resolve, reject) => {
      const req = request({ host: "127.0.0.1", port, method: "POST", path: "/mcp", headers: { ...JSON_HEADERS, "transfer-encoding": "chunked" } }, (res) => {
        let body = "";
        res.setEncoding("utf8").on("data", (c: string) => (body += c)).on("end", () => resolve({ status: res.statusCode ?? 0, body, headers: res.headers }));
      });
      req.on("error", reject);
      req.write(big.subarray(0, 3 * 1024 * 1024));
      req.end(big.subarray(3 * 1024 * 1024));
    });
    expect(streamed.status).toBe(413);
    const notJson = await raw(port, { headers: JSON_HEADERS, body: "{" });
    expect([notJson.status, messageOf(notJson)]).toEqual([400, expect.stringMatching(/^the request body is not JSON/)]);
    expect(log).toEqual([]);
  });
});

describe("the MCP listener has the server limits every server of the package has", () => {
  it("a client slower than headersTimeoutMs with its headers is answered 408 and disconnected", async () => {
    const { port } = await listener({ headersTimeoutMs: 200, requestTimeoutMs: 1_000 });
    const answer = await new Promise<string>((resolve, reject) => {
      const socket = connect(port, "127.0.0.1", () => socket.write("POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n"));
      let got = "";
      socket.setEncoding("utf8").on("data", (c: string) => (got += c)).on("close", () => resolve(got)).on("error", reject);
    });
    expect(answer).toMatch(/^HTTP\/1\.1 408/);
  });

  it("refuses a limit that is not a positive integer, by name", async () => {
    await expect(listener({ maxConnections: 0 })).rejects.toThrow(/EG_BAD_OPTION.*maxConnections must be a positive integer/);
    await expect(listener({ maxSessions: -1 })).rejects.toThrow(/EG_BAD_OPTION.*maxSessions must be a positive integer/);
  });
});
