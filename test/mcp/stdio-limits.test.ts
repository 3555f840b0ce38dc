/**
 * One stdio message over 10 MiB (issue 24 #6): the SDK's own transport closed itself and the
 * gateway answered nothing more, silently. Now an oversized request is answered with a JSON-RPC
 * error and the session goes on; an oversized message with no id to answer ends the gateway with
 * status 1 and the reason on stderr, so the host starts it again. The built `effectgate mcp`, a
 * real child process, spoken to line by line as a host's SDK does.
 */
import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import { describe, expect, it } from "vitest";
import { idFromEdges } from "../../src/mcp/stdio.js";
import { CLI } from "../cli/run-cli.js";
import { requireBuild } from "../support/processes.js";
import { UPSTREAM, workspace } from "./support.js";

requireBuild();
// Real processes on a shared 2-core machine: a slow start is load, not a failure (no assertion is on time).
const PROCESS_TEST_TIMEOUT_MS = 120_000;
const OVER = 10 * 1024 * 1024 + 1;

interface Gateway {
  readonly child: ChildProcessWithoutNullStreams;
  send(message: unknown): void;
  sendText(text: string): void;
  /** The next message on stdout with this id. */
  answer(id: number): Promise<{ result?: { isError?: boolean; content: { text: string }[] }; error?: { code: number; message: string } }>;
  stderr(): string;
  exited: Promise<number | null>;
}

function gateway(): Gateway {
  const ws = workspace();
  const child = spawn(process.execPath, [CLI, "mcp", "--db", ws.db, "--config", ws.configFile, "--", process.execPath, UPSTREAM], {
    cwd: ws.dir, env: { ...process.env, ...ws.env() }, stdio: ["pipe", "pipe", "pipe"],
  });
  let out = "";
  let err = "";
  const waiters: { id: number; resolve: (m: never) => void }[] = [];
  const messages: { id?: number }[] = [];
  const deliver = () => {
    for (const w of [...waiters]) {
      const found = messages.find((m) => m.id === w.id);
      if (found) {
        waiters.splice(waiters.indexOf(w), 1);
        w.resolve(found as never);
      }
    }
  };
  child.stdout.setEncoding("utf8").on("data", (chunk: string) => {
    out += chunk;
    let nl: number;
    while ((nl = out.indexOf("\n")) >= 0) {
      messages.push(JSON.parse(out.slice(0, nl)) as { id?: number });
      out = out.slice(nl + 1);
    }
    deliver();
  });
  child.stderr.setEncoding("utf8").on("data", (chunk: string) => (err += chunk));
  const exited = new Promise<number | null>((resolve) => child.once("close", (code) => resolve(code)));
  return {
    child,
    send: (message) => child.stdin.write(`${JSON.stringify(message)}\n`),
    sendText: (text) => child.stdin.write(text),
    answer: (id) => new Promise((resolve) => {
      waiters.push({ id, resolve });
      deliver();
    }),
    stderr: () => err,
    exited,
  };
}

async function initialized(gw: Gateway): Promise<void> {
  gw.send({ jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: "2025-11-25", capabilities: {}, clientInfo: { name: "raw-host", version: "1" } } });
  await gw.answer(1);
  gw.send({ jsonrpc: "2.0", method: "notifications/initialized" });
}

/** A tools/call as the SDK's client writes it: method and params first, the id last. */
const call = (id: number, title: string) => `{"method":"tools/call","params":{"name":"create_ticket","arguments":{"title":${JSON.stringify(title)}}},"jsonrpc":"2.0","id":${id}}\n`;

describe("effectgate mcp over stdio: one message over 10 MiB", { timeout: PROCESS_TEST_TIMEOUT_MS }, () => {
  it("an oversized request gets a JSON-RPC error naming the limit, and the session goes on", async () => {
    const gw = gateway();
    try {
      await initialized(gw);
      gw.sendText(call(2, "x".repeat(OVER)));
      const refused = await gw.answer(2);
      expect(refused.error).toEqual({ code: -32600, message: expect.stringMatching(/^a stdio message from the host of \d+ bytes, over the gateway's limit of 10485760 bytes for one message: nothing was done\. Send smaller arguments/) });
      gw.sendText(call(3, "printer on fire"));
      const ok = await gw.answer(3);
      expect(ok.result?.isError).toBeFalsy();
      expect(ok.result?.content[0]?.text).toMatch(/created ticket T-1: printer on fire/);
      expect(gw.stderr()).toMatch(/refused a stdio message from the host of \d+ bytes.*\(request id 2\)/);
    } finally {
      gw.child.kill("SIGKILL");
      await gw.exited;
    }
  });

  it("an oversized message with no id to answer ends the gateway with status 1 and the reason on stderr", async () => {
    const gw = gateway();
    await initialized(gw);
    gw.sendText(`{"jsonrpc":"2.0","method":"notifications/message","params":{"data":${JSON.stringify("y".repeat(OVER))}}}\n`);
    expect(await gw.exited).toBe(1);
    expect(gw.stderr()).toMatch(/effectgate: a stdio message from the host of \d+ bytes, over the gateway's limit of 10485760 bytes for one message, with no request id to answer: the session cannot go on; exiting so the host starts the gateway again/);
  });
});

describe("idFromEdges", () => {
  it("reads a top-level id at the start or at the end of a message, and nothing else", () => {
    expect(idFromEdges('{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"a', "")).toBe(7);
    expect(idFromEdges('{"id":"req-1","jsonrpc":"2.0"', "")).toBe("req-1");
    expect(idFromEdges('{"method":"tools/call","params":{"x', 'xx"}},"jsonrpc":"2.0","id":12}')).toBe(12);
    expect(idFromEdges('{"method":"tools/call","params":{"x', 'xx","id":12}}')).toBeUndefined();
    expect(idFromEdges('{"method":"notifications/message","params":{"d', 'ata":"yy"}}')).toBeUndefined();
  });
});
