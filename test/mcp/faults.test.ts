/**
 * Faults with real processes: the gateway SIGKILLed after the upstream applied the effect and
 * restarted; the upstream crashing, hanging or printing garbage mid-call; an upstream that cannot
 * start. Every effect is counted by the upstream itself, in its file.
 */
import { describe, expect, it } from "vitest";
import { runCli } from "../cli/run-cli.js";
import { requireBuild } from "../support/processes.js";
import { startGateway, text, workspace, type Host, type Workspace } from "./support.js";

requireBuild();
// Real processes on a shared 2-core machine: a slow start is load, not a failure (no assertion is on time).
const PROCESS_TEST_TIMEOUT_MS = 120_000;

const PROBE = { tool: "find_ticket_by_key", arguments: { key: "${key}" }, status: "structuredContent.status", done: ["found"], absent: ["missing"] };

/** Waits until the upstream has applied `count` effects (a synchronisation on the upstream's own file, not a timing). */
async function effectsReach(ws: Workspace, count: number): Promise<void> {
  for (let i = 0; i < 2400 && ws.effects().length < count; i++) await new Promise((r) => setTimeout(r, 25));
  if (ws.effects().length < count) throw new Error(`the upstream applied ${ws.effects().length} effects, expected ${count}`);
}

/** SIGKILLs the gateway and waits until it is gone (reaped, so its pid is certainly free). */
async function killGateway(host: Host): Promise<void> {
  const gone = new Promise<void>((resolve) => (host.client.onclose = () => resolve()));
  process.kill(host.pid, "SIGKILL");
  await gone;
}

describe("the gateway killed mid-call", { timeout: PROCESS_TEST_TIMEOUT_MS }, () => {
  for (const keyed of ["a tool-use id", "a derived key"] as const) {
    it(`with ${keyed}: SIGKILLed after the upstream applied the effect, restarted, the host repeats the call → the probe settles it: one effect, the real result`, async () => {
      const ws = workspace({ tools: { create_ticket: { probe: PROBE } } });
      ws.control({ create_ticket: "hang_after_effect" });
      const meta = keyed === "a tool-use id" ? { toolUseId: "toolu_kill" } : undefined;
      const first = await startGateway(ws);
      const pending = first.call("create_ticket", { title: "kill me" }, meta).then(() => "answered", (err: unknown) => String(err));
      await effectsReach(ws, 1);
      await killGateway(first);
      expect(await pending).toMatch(/closed/i);

      ws.control({});
      const second = await startGateway(ws);
      try {
        const result = await second.call("create_ticket", { title: "kill me" }, meta);
        expect(result.isError).toBeFalsy();
        expect(result.structuredContent).toEqual({ status: "found", id: "T-1", title: "kill me" });
        expect(ws.effects("create_ticket")).toHaveLength(1);
        // And again: now answered from the ledger.
        expect(await second.call("create_ticket", { title: "kill me" }, meta)).toEqual(result);
        expect(ws.effects("create_ticket")).toHaveLength(1);
      } finally {
        await second.close();
      }
    });
  }

  it("without a probe, the restarted gateway never re-sends the call: it goes to a person", async () => {
    const ws = workspace();
    ws.control({ create_ticket: "hang_after_effect" });
    const first = await startGateway(ws);
    const pending = first.call("create_ticket", { title: "no probe" }, { toolUseId: "toolu_np" }).catch((err: unknown) => String(err));
    await effectsReach(ws, 1);
    await killGateway(first);
    await pending;
    ws.control({});
    const second = await startGateway(ws);
    try {
      const result = await second.call("create_ticket", { title: "no probe" }, { toolUseId: "toolu_np" });
      expect(result.isError).toBe(true);
      expect(text(result)).toMatch(/^EG_NEEDS_HUMAN: /);
      expect(text(result)).not.toMatch(/nothing was executed/i);
      expect(ws.effects()).toHaveLength(1);
    } finally {
      await second.close();
    }
  });
});

describe("the upstream failing mid-call", { timeout: PROCESS_TEST_TIMEOUT_MS }, () => {
  it("crashes after applying the effect: with a probe the call is settled with the real result, the upstream restarted", async () => {
    const ws = workspace({ tools: { create_ticket: { probe: PROBE } } });
    ws.control({ create_ticket: "crash_after_effect" });
    const host = await startGateway(ws);
    try {
      const pending = host.call("create_ticket", { title: "crash" }, { toolUseId: "toolu_crash" });
      await effectsReach(ws, 1);
      ws.control({});
      const result = await pending;
      expect(result.structuredContent).toEqual({ status: "found", id: "T-1", title: "crash" });
      expect(ws.effects()).toHaveLength(1);
      expect(host.stderr()).toMatch(/closed the connection/);
    } finally {
      await host.close();
    }
  });

  it("crashes after applying the effect, without a probe: a clear error that does not say nothing happened; never re-sent; the next call works", async () => {
    const ws = workspace();
    ws.control({ create_ticket: "crash_after_effect" });
    const host = await startGateway(ws);
    try {
      const result = await host.call("create_ticket", { title: "crash" }, { toolUseId: "toolu_c2" });
      expect(result.isError).toBe(true);
      expect(text(result)).toMatch(/^EG_NEEDS_HUMAN: .*closed the connection while create_ticket was running/);
      ws.control({});
      const again = await host.call("create_ticket", { title: "crash" }, { toolUseId: "toolu_c2" });
      expect(text(again)).toMatch(/^EG_NEEDS_HUMAN: /);
      expect(ws.effects()).toHaveLength(1);
      const next = await host.call("create_ticket", { title: "after" }, { toolUseId: "toolu_c3" });
      expect(next.structuredContent).toMatchObject({ id: "T-2" });
    } finally {
      await host.close();
    }
  });

  it("hangs after applying the effect: the gateway's timeout makes the outcome unknown and the probe settles it", async () => {
    const ws = workspace({ tools: { create_ticket: { probe: PROBE, timeoutMs: 500 } } });
    ws.control({ create_ticket: "hang_after_effect" });
    const host = await startGateway(ws);
    try {
      const result = await host.call("create_ticket", { title: "hang" }, { toolUseId: "toolu_hang" });
      expect(result.structuredContent).toEqual({ status: "found", id: "T-1", title: "hang" });
      expect(ws.effects()).toHaveLength(1);
    } finally {
      await host.close();
    }
  });

  it("answers garbage: a clear error saying the outcome is unknown, and the gateway goes on serving", async () => {
    const ws = workspace({ tools: { create_ticket: { timeoutMs: 500 } } });
    ws.control({ create_ticket: "garbage" });
    const host = await startGateway(ws);
    try {
      const result = await host.call("create_ticket", { title: "junk" }, { toolUseId: "toolu_junk" });
      expect(result.isError).toBe(true);
      expect(text(result)).toMatch(/^EG_NEEDS_HUMAN: /);
      expect(host.stderr()).toMatch(/upstream .*(JSON|Unexpected token)/i);
      ws.control({});
      expect(text(await host.call("count_effects", {}))).toBe("0");
      expect((await host.call("send_email", { to: "a@example.com", subject: "s" }, { toolUseId: "toolu_after" })).isError).toBeFalsy();
    } finally {
      await host.close();
    }
  });

  it("an upstream that cannot start: the gateway refuses to start and says why (exit 1)", async () => {
    const ws = workspace();
    const run = await runCli(["mcp", "--db", ws.db, "--", process.execPath, "-e", "process.exit(3)"], { cwd: ws.dir });
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(/effectgate: the gateway could not start: .*could not be started or reached/);
  });
});
