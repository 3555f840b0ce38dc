/**
 * A stdio upstream that stops reading its stdin (FINDINGS F9, F8): the built `effectgate mcp` in
 * front of the fixture upstream (a real child process, an SDK server), which after one call
 * pauses its stdin for good, as an SDK server does after a line over its 10 MiB read cap. The
 * gateway used to queue every later call to it in memory (and died of it), adding a 'drain'
 * listener per write (MaxListenersExceededWarning). Now a call is refused, NOT sent, when the
 * bytes waiting would pass the bound or the message is over the upstream's read cap, and an
 * upstream that has read nothing for `upstreamLimits.stallMs` is closed and started again.
 * Effects are counted by the upstream itself.
 */
import { spawn } from "node:child_process";
import { describe, expect, it } from "vitest";
import { heapProbeEnv, removeHeapProbeDirs, retained } from "../../bench/fuzz/heap.js";
import { CLI } from "../cli/run-cli.js";
import { requireBuild } from "../support/processes.js";
import { startGateway, text, UPSTREAM, workspace, type Workspace } from "./support.js";

requireBuild();
const PROCESS_TEST_TIMEOUT_MS = 180_000;
const MIB = 1024 * 1024;
const ROOT = new URL("../../", import.meta.url).pathname;

/** The workspace with the bench's heap probe preloaded in the gateway (SIGUSR2: two full GCs, then its memory). */
function probed(ws: Workspace) {
  const heap = heapProbeEnv(ROOT);
  return { ws: { ...ws, env: () => ({ ...ws.env(), ...heap.env }) }, dir: heap.dir };
}

const notSent = (t: string) => /was NOT sent to the upstream/.test(t) && /never reached the downstream; nothing happened/.test(t);

describe("effectgate mcp: a stdio upstream that stops reading its stdin", { timeout: PROCESS_TEST_TIMEOUT_MS }, () => {
  it("a flood of 9 MiB calls leaves the gateway's memory bounded; every refused call is answered NOT sent and none reaches the upstream", async () => {
    // No stall restart here (stallMs long): the bound alone must hold.
    const { ws, dir } = probed(workspace({ timeoutMs: 8_000, upstreamLimits: { stallMs: 600_000 } }));
    const host = await startGateway(ws);
    try {
      ws.control({ send_email: "stop_reading_after_effect" });
      expect(text(await host.call("send_email", { to: "a@example.com", subject: "first" }, { toolUseId: "first" }))).toMatch(/sent e-mail #1/);
      ws.control({});
      const before = await retained(host.pid, dir);
      const pad = "p".repeat(9 * MIB);
      const flood = 20;
      const results = await Promise.all(Array.from({ length: flood }, (_, i) =>
        host.call("send_email", { to: `x${i}@example.com`, subject: pad }, { toolUseId: `flood-${i}` }, { timeout: 120_000 })));
      const after = await retained(host.pid, dir);
      const texts = results.map(text);
      // One was taken (its writing started, the upstream never read it): outcome unknown, never "not sent". The rest: NOT sent.
      expect(texts.filter(notSent)).toHaveLength(flood - 1);
      const taken = texts.filter((t) => !notSent(t));
      expect(taken).toHaveLength(1);
      expect(taken[0]).toMatch(/^EG_NEEDS_HUMAN: the outcome of this send_email call is unknown/);
      expect(taken[0]).not.toMatch(/NOT sent/);
      expect(results.every((r) => r.isError === true)).toBe(true);
      expect(ws.effects("send_email").map((e) => e.args.subject)).toEqual(["first"]);
      // 20 × 9 MiB were sent to it: what it keeps after a GC is the one message being written, not the flood.
      expect(before).toBeDefined();
      expect(after).toBeDefined();
      expect(after!.retainedMiB - before!.retainedMiB).toBeLessThan(48);
      // F8: no listener per write, so no MaxListenersExceededWarning.
      expect(host.stderr()).not.toMatch(/MaxListenersExceeded/);
    } finally {
      await host.close();
      removeHeapProbeDirs();
    }
  });

  it("a call over the upstream's read cap is refused, NOT sent, and the upstream keeps answering", async () => {
    const ws = workspace({ timeoutMs: 8_000 });
    const host = await startGateway(ws);
    try {
      // Within the host's 10 MiB per line, but what the gateway would write (with the key and fence in _meta) is over the
      // SDK server's 10 MiB cap: such a line made the upstream close its transport and stop reading, silently.
      const overhead = JSON.stringify({ method: "tools/call", params: { name: "create_ticket", arguments: { title: "" }, _meta: { toolUseId: "big" } }, jsonrpc: "2.0", id: 99 }).length;
      const title = "t".repeat(10 * MIB - overhead - 8);
      const refused = text(await host.call("create_ticket", { title }, { toolUseId: "big" }, { timeout: 120_000 }));
      expect(notSent(refused)).toBe(true);
      expect(refused).toMatch(/over the 10420224 bytes \(9\.9 MiB\) the gateway writes to an upstream in one message/);
      expect(text(await host.call("create_ticket", { title: "small" }, { toolUseId: "small" }))).toMatch(/created ticket T-1: small/);
      expect(ws.effects("create_ticket").map((e) => e.args.title)).toEqual(["small"]);
    } finally {
      await host.close();
    }
  });

  it("an upstream that read nothing for stallMs is closed and started again: the call it held is of unknown outcome, the next one runs", async () => {
    const ws = workspace({ timeoutMs: 10_000, upstreamLimits: { stallMs: 1_500 } });
    const host = await startGateway(ws);
    try {
      ws.control({ create_ticket: "stop_reading_after_effect" });
      expect(text(await host.call("create_ticket", { title: "first" }, { toolUseId: "first" }))).toMatch(/created ticket T-1: first/);
      ws.control({});
      // 9 MiB fill the pipe: the write waits, and nothing of it is read.
      const stuck = text(await host.call("send_email", { to: "b@example.com", subject: "s".repeat(9 * MIB) }, { toolUseId: "stuck" }, { timeout: 120_000 }));
      expect(stuck).toMatch(/^EG_NEEDS_HUMAN: the outcome of this send_email call is unknown \(the upstream .* went while send_email was being written to it/);
      expect(stuck).not.toMatch(/NOT sent/);
      expect(host.stderr()).toMatch(/is stalled: the upstream read nothing of its stdin for 1500 ms with [\d.]+ MiB waiting \(upstreamLimits\.stallMs\); it is closed and started again on the next call/);
      expect(text(await host.call("create_ticket", { title: "after" }, { toolUseId: "after" }))).toMatch(/created ticket T-2: after/);
      expect(ws.effects().map((e) => `${e.tool}:${JSON.stringify(e.args.title)}`)).toEqual(['create_ticket:"first"', 'create_ticket:"after"']);
    } finally {
      await host.close();
    }
  });
});

describe("effectgate mcp: a host slow to read its answers", { timeout: PROCESS_TEST_TIMEOUT_MS }, () => {
  it("gets every answer once it reads, and the gateway warns of no listener leak (F8)", async () => {
    const ws = workspace();
    const child = spawn(process.execPath, [CLI, "mcp", "--db", ws.db, "--config", ws.configFile, "--", process.execPath, UPSTREAM], {
      cwd: ws.dir, env: { ...process.env, ...ws.env() }, stdio: ["pipe", "pipe", "pipe"],
    });
    let stderr = "";
    child.stderr.setEncoding("utf8").on("data", (c: string) => (stderr += c));
    let out = "";
    const ids = new Set<unknown>();
    child.stdout.setEncoding("utf8").on("data", (c: string) => {
      out += c;
      let nl: number;
      while ((nl = out.indexOf("\n")) >= 0) {
        ids.add((JSON.parse(out.slice(0, nl)) as { id?: unknown }).id);
        out = out.slice(nl + 1);
      }
    });
    const send = (m: unknown) => child.stdin.write(`${JSON.stringify(m)}\n`);
    const until = async (done: () => boolean) => {
      while (!done()) await new Promise((r) => setTimeout(r, 50));
    };
    try {
      send({ jsonrpc: "2.0", id: 0, method: "initialize", params: { protocolVersion: "2025-11-25", capabilities: {}, clientInfo: { name: "slow-host", version: "1" } } });
      await until(() => ids.has(0));
      send({ jsonrpc: "2.0", method: "notifications/initialized" });
      // The host stops reading: some 300 answers of a few KiB each fill the pipe, and most wait in the gateway.
      child.stdout.pause();
      for (let id = 1; id <= 300; id++) send({ jsonrpc: "2.0", id, method: "tools/list" });
      await new Promise((r) => setTimeout(r, 3_000));
      child.stdout.resume();
      await until(() => ids.size === 301);
      expect(stderr).not.toMatch(/MaxListenersExceeded/);
    } finally {
      child.kill("SIGKILL");
    }
  });
});
