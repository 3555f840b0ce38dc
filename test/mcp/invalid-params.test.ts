/**
 * A request the gateway serves with params of the wrong shape (issue 24, FINDINGS.md F3): the SDK
 * answered `-32603 Internal error` with zod's raw issue list. Now it is `-32602 Invalid params`
 * with a sentence naming what is wrong and what to send, nothing is logged, and the session goes
 * on. Over stdio (the built `effectgate mcp`, a real child process, spoken to line by line) and in
 * an HTTP session of the listener (raw POSTs on 127.0.0.1, the gateway in this process).
 */
import { spawn } from "node:child_process";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { afterEach, describe, expect, it } from "vitest";
import { z } from "zod";
import type { McpGateway } from "../../src/mcp/gateway.js";
import { listenHttp, type Listening } from "../../src/mcp/http.js";
import { memoryLedger } from "../../src/stores/memory/index.js";
import { CLI } from "../cli/run-cli.js";
import { requireBuild } from "../support/processes.js";
import { inMemoryUpstream, startedGateway } from "./in-process.js";
import { UPSTREAM, workspace } from "./support.js";

requireBuild();
// Real processes on a shared 2-core machine: a slow start is load, not a failure (no assertion is on time).
const PROCESS_TEST_TIMEOUT_MS = 60_000;

interface Answer { id?: unknown; result?: { isError?: boolean; content?: { text: string }[] }; error?: { code: number; message: string } }

/** Each malformed request, and what its answer's sentence must say. */
const MALFORMED: readonly { params: unknown; method: string; says: RegExp }[] = [
  { method: "tools/call", params: {}, says: /^invalid params for tools\/call: params\.name: .*\. Send params \{"name": "<a tool of tools\/list>", "arguments": \{…\}\}.*Nothing was done\.$/ },
  { method: "tools/call", params: { name: 1 }, says: /^invalid params for tools\/call: params\.name: .*string.*\. Send params \{"name"/ },
  { method: "tools/call", params: { name: "create_ticket", arguments: [] }, says: /^invalid params for tools\/call: params\.arguments: .*record|object/ },
  { method: "initialize", params: { capabilities: {}, clientInfo: { name: "x", version: "1" } }, says: /^invalid params for initialize: params\.protocolVersion: .*Send params \{"protocolVersion": one of "2025-11-25"/ },
  { method: "tools/list", params: { cursor: 1 }, says: /^invalid params for tools\/list: params\.cursor: .*Send params no params, or \{"cursor"/ },
];

function expectInvalidParams(answer: Answer | undefined, says: RegExp): void {
  expect(answer?.error?.code).toBe(-32602);
  expect(answer?.error?.message).toMatch(says);
  // A sentence, not zod's issue list as JSON.
  expect(answer?.error?.message).not.toMatch(/"code":|"expected":|^\[/);
}

describe("a request with params of the wrong shape over stdio", { timeout: PROCESS_TEST_TIMEOUT_MS }, () => {
  it("is answered -32602 with a sentence, nothing is logged, and the session goes on", async () => {
    const ws = workspace();
    const child = spawn(process.execPath, [CLI, "mcp", "--db", ws.db, "--config", ws.configFile, "--", process.execPath, UPSTREAM], {
      cwd: ws.dir, env: { ...process.env, ...ws.env() }, stdio: ["pipe", "pipe", "pipe"],
    });
    const answers = new Map<unknown, Answer>();
    const waiters = new Map<unknown, (a: Answer) => void>();
    let out = "";
    let err = "";
    child.stdout.setEncoding("utf8").on("data", (chunk: string) => {
      out += chunk;
      let nl: number;
      while ((nl = out.indexOf("\n")) >= 0) {
        const message = JSON.parse(out.slice(0, nl)) as Answer;
        out = out.slice(nl + 1);
        answers.set(message.id, message);
        waiters.get(message.id)?.(message);
      }
    });
    child.stderr.setEncoding("utf8").on("data", (chunk: string) => (err += chunk));
    const send = (message: object) => child.stdin.write(`${JSON.stringify({ jsonrpc: "2.0", ...message })}\n`);
    const answer = (id: unknown) => answers.get(id) ?? new Promise<Answer>((resolve) => waiters.set(id, resolve));
    try {
      send({ id: 0, method: "initialize", params: { protocolVersion: "2025-11-25", capabilities: {}, clientInfo: { name: "raw-host", version: "1" } } });
      await answer(0);
      send({ method: "notifications/initialized" });
      const logged = err;
      MALFORMED.forEach((m, i) => send({ id: i + 1, method: m.method, params: m.params }));
      // A served notification of the wrong shape has nobody to answer: dropped, not logged.
      send({ method: "notifications/cancelled", params: { requestId: {} } });
      for (const [i, m] of MALFORMED.entries()) expectInvalidParams(await answer(i + 1), m.says);
      send({ id: 99, method: "tools/call", params: { name: "create_ticket", arguments: { title: "after the bad ones" } } });
      const ok = await answer(99);
      expect(ok.result?.isError).toBeFalsy();
      expect(ok.result?.content?.[0]?.text).toMatch(/created ticket T-1: after the bad ones/);
      expect(err.slice(logged.length)).toBe("");
    } finally {
      child.kill("SIGKILL");
    }
  });
});

describe("a request with params of the wrong shape in an HTTP session", () => {
  const TOKEN = "invalid-params-token";
  const open: { gateway: McpGateway; listening: Listening }[] = [];
  afterEach(async () => {
    for (const { gateway, listening } of open.splice(0)) {
      await listening.close();
      await gateway.close();
    }
  });

  it("is answered -32602 with a sentence, nothing is logged, and the session goes on", async () => {
    const server = new McpServer({ name: "echo", version: "1.0.0" });
    server.registerTool("echo", { inputSchema: { text: z.string() }, annotations: { readOnlyHint: true } }, ({ text }) => ({ content: [{ type: "text", text }] }));
    const gateway = await startedGateway(memoryLedger(), await inMemoryUpstream(server, "echo"));
    const log: string[] = [];
    const listening = await listenHttp(gateway, { host: "127.0.0.1", port: 0, token: TOKEN }, (line) => log.push(line));
    open.push({ gateway, listening });
    const headers: Record<string, string> = { "content-type": "application/json", accept: "application/json, text/event-stream", authorization: `Bearer ${TOKEN}` };
    /** One JSON-RPC request, its answer read from the JSON or event-stream reply. */
    const post = async (message: object): Promise<Answer> => {
      const res = await fetch(listening.url, { method: "POST", headers, body: JSON.stringify({ jsonrpc: "2.0", ...message }) });
      const text = await res.text();
      expect(res.status, text).toBe(200);
      const sid = res.headers.get("mcp-session-id");
      if (sid) Object.assign(headers, { "mcp-session-id": sid, "mcp-protocol-version": "2025-11-25" });
      const data = /^data: (.*)$/m.exec(text)?.[1] ?? text;
      return JSON.parse(data) as Answer;
    };
    await post({ id: 0, method: "initialize", params: { protocolVersion: "2025-11-25", capabilities: {}, clientInfo: { name: "raw", version: "1" } } });
    await fetch(listening.url, { method: "POST", headers, body: JSON.stringify({ jsonrpc: "2.0", method: "notifications/initialized" }) });
    for (const [i, m] of MALFORMED.entries()) expectInvalidParams(await post({ id: i + 1, method: m.method, params: m.params }), m.says);
    const ok = await post({ id: 99, method: "tools/call", params: { name: "echo", arguments: { text: "still here" } } });
    expect(ok.result?.content?.[0]?.text).toBe("still here");
    expect(log).toEqual([]);
  });
});
