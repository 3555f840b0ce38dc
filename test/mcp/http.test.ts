/**
 * The gateway over Streamable HTTP (--listen), with real processes: token required, a call over
 * HTTP, a host that reconnects (a new session) and repeats the call → one effect; and a gateway
 * whose upstream is reached over HTTP (upstream.url), here another gateway.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ElicitRequestSchema, type ClientCapabilities } from "@modelcontextprotocol/sdk/types.js";
import { afterAll, describe, expect, it } from "vitest";
import { CLI } from "../cli/run-cli.js";
import { requireBuild } from "../support/processes.js";
import { hostOf, text, UPSTREAM, workspace, type Host, type Workspace } from "./support.js";

requireBuild();
// Real processes on a shared 2-core machine: a slow start is load, not a failure (no assertion is on time).
const PROCESS_TEST_TIMEOUT_MS = 120_000;

const TOKEN = "test-token-4f1c";
const running: ChildProcess[] = [];
afterAll(async () => {
  for (const child of running) {
    if (child.exitCode !== null || child.signalCode !== null) continue;
    const gone = new Promise((resolve) => child.once("close", resolve));
    child.kill("SIGTERM");
    await gone;
  }
});

/** Starts `effectgate mcp --listen 127.0.0.1:0` and resolves with its URL once it listens. */
async function listening(ws: Workspace): Promise<{ url: string; child: ChildProcess; stderr: () => string }> {
  const child = spawn(process.execPath, [CLI, "mcp", "--listen", "127.0.0.1:0", "--token", TOKEN, "--db", ws.db, "--config", ws.configFile, "--", process.execPath, UPSTREAM], {
    cwd: ws.dir, env: { ...process.env, ...ws.env() }, stdio: ["ignore", "ignore", "pipe"],
  });
  running.push(child);
  let stderr = "";
  const url = await new Promise<string>((resolve, reject) => {
    child.stderr?.setEncoding("utf8").on("data", (chunk: string) => {
      stderr += chunk;
      const m = /listening on (http:\/\/\S+)/.exec(stderr);
      if (m?.[1]) resolve(m[1]);
    });
    child.once("close", (code) => reject(new Error(`the gateway exited (${code}) before listening:\n${stderr}`)));
  });
  return { url, child, stderr: () => stderr };
}

async function httpHost(url: string, setup?: (client: Client) => void, capabilities: ClientCapabilities = {}): Promise<Host> {
  const client = new Client({ name: "http-host", version: "1.0.0" }, { capabilities });
  setup?.(client);
  await client.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: { authorization: `Bearer ${TOKEN}` } } }));
  return hostOf(client, -1, () => "", () => client.close());
}

describe("effectgate mcp --listen (Streamable HTTP)", { timeout: PROCESS_TEST_TIMEOUT_MS }, () => {
  it("refuses a request without the token, and one with a wrong token", async () => {
    const ws = workspace();
    const { url } = await listening(ws);
    const init = { jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: "2025-11-25", capabilities: {}, clientInfo: { name: "x", version: "1" } } };
    const headers = { "content-type": "application/json", accept: "application/json, text/event-stream" };
    const none = await fetch(url, { method: "POST", headers, body: JSON.stringify(init) });
    expect(none.status).toBe(401);
    const wrong = await fetch(url, { method: "POST", headers: { ...headers, authorization: "Bearer nope" }, body: JSON.stringify(init) });
    expect(wrong.status).toBe(401);
    expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/mcp$/);
  });

  it("serves the upstream's tools over HTTP; a host that reconnects and repeats the call gets the first result: one effect", async () => {
    const ws = workspace();
    const { url } = await listening(ws);
    const first = await httpHost(url);
    const a = await first.call("create_ticket", { title: "over http" }, { toolUseId: "toolu_http" });
    expect(a.structuredContent).toEqual({ status: "found", id: "T-1", title: "over http" });
    await first.close();
    const second = await httpHost(url);
    try {
      expect((await second.client.listTools()).tools.map((t) => t.name)).toContain("create_ticket");
      expect(await second.call("create_ticket", { title: "over http" }, { toolUseId: "toolu_http" })).toEqual(a);
      // Without a tool-use id the derived key is the gateway's (tenant, task), not the session's: the reconnect changes nothing.
      const b = await second.call("create_ticket", { title: "derived" });
      const third = await httpHost(url);
      try {
        expect(await third.call("create_ticket", { title: "derived" })).toEqual(b);
      } finally {
        await third.close();
      }
      expect(ws.effects("create_ticket")).toHaveLength(2);
    } finally {
      await second.close();
    }
  });

  it("two hosts on two sessions make the same call at once: one effect, both get its result", async () => {
    const ws = workspace();
    ws.control({ create_ticket: "slow" });
    const { url } = await listening(ws);
    const [a, b] = await Promise.all([httpHost(url), httpHost(url)]);
    try {
      const [ra, rb] = await Promise.all([
        a.call("create_ticket", { title: "twins" }, { toolUseId: "toolu_twin" }),
        b.call("create_ticket", { title: "twins" }, { toolUseId: "toolu_twin" }),
      ]);
      expect(rb).toEqual(ra);
      expect(ra.structuredContent).toEqual({ status: "found", id: "T-1", title: "twins" });
      expect(ws.effects()).toHaveLength(1);
    } finally {
      await a.close();
      await b.close();
    }
  });

  it("asks for approval through the elicitation of the session the call came on, not another", async () => {
    const ws = workspace();
    const { url } = await listening(ws);
    const asked: string[] = [];
    const answering = (name: string) => (client: Client) =>
      client.setRequestHandler(ElicitRequestSchema, () => {
        asked.push(name);
        return { action: "accept", content: { approve: true } };
      });
    const bystander = await httpHost(url, answering("bystander"), { elicitation: { form: {} } });
    const caller = await httpHost(url, answering("caller"), { elicitation: { form: {} } });
    const blind = await httpHost(url);
    try {
      expect(text(await caller.call("delete_account", { account: "acc_h" }, { toolUseId: "toolu_h" }))).toBe("deleted acc_h (#1)");
      expect(asked).toEqual(["caller"]);
      // A session without elicitation is never answered by another session's user.
      expect(text(await blind.call("delete_account", { account: "acc_b" }, { toolUseId: "toolu_b" }))).toMatch(/^EG_AWAITING_APPROVAL: /);
      expect(asked).toEqual(["caller"]);
      expect(ws.effects()).toHaveLength(1);
    } finally {
      await bystander.close();
      await caller.close();
      await blind.close();
    }
  });

  it("a gateway can reach its upstream over HTTP (upstream.url with headers), the key going through as io.effectgate/idempotency-key", async () => {
    const front = workspace();
    const { url } = await listening(front);
    const ws = workspace({ upstream: { url, headers: { authorization: `Bearer ${TOKEN}` } } });
    const host = await startGatewayWithoutCommand(ws);
    try {
      const result = await host.call("send_email", { to: "b@example.com", subject: "chained" }, { toolUseId: "toolu_chain" });
      expect(text(result)).toBe("sent e-mail #1 to b@example.com");
      expect(await host.call("send_email", { to: "b@example.com", subject: "chained" }, { toolUseId: "toolu_chain" })).toEqual(result);
      expect(front.effects()).toEqual([expect.objectContaining({ tool: "send_email", key: "toolu_chain" })]);
    } finally {
      await host.close();
    }
  });
});

/** A stdio gateway whose upstream comes from its config (no command after --). */
async function startGatewayWithoutCommand(ws: Workspace): Promise<Host> {
  const { StdioClientTransport } = await import("@modelcontextprotocol/sdk/client/stdio.js");
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) if (v !== undefined) env[k] = v;
  const transport = new StdioClientTransport({ command: process.execPath, args: [CLI, "mcp", "--config", ws.configFile, "--db", ws.db], env, cwd: ws.dir, stderr: "pipe" });
  const client = new Client({ name: "test-host", version: "1.0.0" });
  await client.connect(transport);
  return hostOf(client, transport.pid ?? -1, () => "", () => client.close());
}
