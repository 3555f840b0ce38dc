/**
 * The gateway's core, with real processes: the built `effectgate mcp` started by the SDK's own
 * client as a host does, in front of a real upstream MCP server that counts its effects in a file.
 */
import { ToolListChangedNotificationSchema } from "@modelcontextprotocol/sdk/types.js";
import { describe, expect, it } from "vitest";
import { requireBuild } from "../support/processes.js";
import { startGateway, text, workspace } from "./support.js";

requireBuild();
// Real processes on a shared 2-core machine: a slow start is load, not a failure (no assertion is on time).
const PROCESS_TEST_TIMEOUT_MS = 120_000;

describe("effectgate mcp over stdio", { timeout: PROCESS_TEST_TIMEOUT_MS }, () => {
  it("re-exposes the upstream's tools as they are and forwards the key and fence in _meta", async () => {
    const ws = workspace();
    const host = await startGateway(ws);
    try {
      const { tools } = await host.client.listTools();
      expect(tools.map((t) => t.name).sort()).toEqual(["add_tool", "count_effects", "create_ticket", "delete_account", "find_ticket_by_key", "send_email"]);
      expect(tools.find((t) => t.name === "create_ticket")?.annotations).toEqual({ destructiveHint: false });
      const result = await host.call("create_ticket", { title: "printer on fire" }, { "claudecode/toolUseId": "toolu_01" });
      expect(result.isError).toBeFalsy();
      expect(result.structuredContent).toEqual({ status: "found", id: "T-1", title: "printer on fire" });
      expect(ws.effects()).toEqual([{ n: 1, tool: "create_ticket", args: { title: "printer on fire" }, key: "toolu_01", fence: 1 }]);
    } finally {
      await host.close();
    }
  });

  it("answers a repeated tool-use id from the ledger, even from a new gateway process (a host that reconnects): one effect", async () => {
    const ws = workspace();
    const first = await startGateway(ws);
    const a = await first.call("create_ticket", { title: "one" }, { toolUseId: "toolu_rep" });
    const b = await first.call("create_ticket", { title: "one" }, { toolUseId: "toolu_rep" });
    await first.close();
    const second = await startGateway(ws);
    try {
      const c = await second.call("create_ticket", { title: "one" }, { toolUseId: "toolu_rep" });
      expect([b, c]).toEqual([a, a]);
      expect(ws.effects("create_ticket")).toHaveLength(1);
      // A new tool-use id is a new call.
      await second.call("create_ticket", { title: "one" }, { toolUseId: "toolu_new" });
      expect(ws.effects("create_ticket")).toHaveLength(2);
    } finally {
      await second.close();
    }
  });

  it("keys a call without a tool-use id by its arguments: the host's repeat is one effect, other arguments another", async () => {
    const ws = workspace();
    const host = await startGateway(ws);
    try {
      const a = await host.call("create_ticket", { title: "same" });
      const b = await host.call("create_ticket", { title: "same" }, { progressToken: 7 });
      await host.call("create_ticket", { title: "other" });
      expect(b).toEqual(a);
      const keys = ws.effects("create_ticket").map((e) => e.key);
      expect(keys).toHaveLength(2);
      expect(keys[0]).toMatch(/^mcp:[0-9a-f]{16}:default:mcp:create_ticket:[0-9a-f]{64}$/);
      expect(keys[1]).not.toBe(keys[0]);
    } finally {
      await host.close();
    }
  });

  it("a dedupe window of 0 makes an identical call after the first settled a new call, under a new generation of the key", async () => {
    const ws = workspace({ keys: { dedupeWindowMs: 0 } });
    const host = await startGateway(ws);
    try {
      await host.call("send_email", { to: "a@example.com", subject: "hi" });
      await host.call("send_email", { to: "a@example.com", subject: "hi" });
      const keys = ws.effects("send_email").map((e) => e.key ?? "");
      expect(keys).toHaveLength(2);
      expect(keys[1]).toBe(`${keys[0]}~1`);
    } finally {
      await host.close();
    }
  });

  it("a host that times out and retries the call gets the one result: one effect", async () => {
    const ws = workspace();
    ws.control({ create_ticket: "slow" });
    const host = await startGateway(ws);
    try {
      // The host gives up long before the upstream answers (it sends notifications/cancelled), then retries.
      await expect(host.call("create_ticket", { title: "slow one" }, { toolUseId: "toolu_slow" }, { timeout: 100 })).rejects.toThrow(/timed out/i);
      const retried = await host.call("create_ticket", { title: "slow one" }, { toolUseId: "toolu_slow" });
      expect(retried.structuredContent).toEqual({ status: "found", id: "T-1", title: "slow one" });
      // Without a tool-use id too: the derived key makes the retry the same call.
      await expect(host.call("create_ticket", { title: "slow two" }, undefined, { timeout: 100 })).rejects.toThrow(/timed out/i);
      const again = await host.call("create_ticket", { title: "slow two" });
      expect(again.structuredContent).toEqual({ status: "found", id: "T-2", title: "slow two" });
      expect(ws.effects("create_ticket")).toHaveLength(2);
    } finally {
      await host.close();
    }
  });

  it("an unknown tool and malformed arguments are clear errors, and nothing reaches the upstream", async () => {
    const ws = workspace();
    const host = await startGateway(ws);
    try {
      const unknown = await host.call("create_tickets", { title: "x" }, { toolUseId: "toolu_u" });
      expect(unknown.isError).toBe(true);
      expect(text(unknown)).toMatch(/^EG_UNKNOWN_TOOL: .*no tool named "create_tickets"\. Its tools: create_ticket, .*Nothing was executed\.$/);
      const malformed = await host.call("create_ticket", { title: 42 }, { toolUseId: "toolu_m" });
      expect(malformed.isError).toBe(true);
      expect(text(malformed)).toMatch(/^EG_INVALID_INPUT: the input for create_ticket does not match its schema: .*title.*Nothing was executed/);
      expect(ws.effects()).toEqual([]);
      // The same id with valid arguments afterwards still runs: the refusal recorded nothing.
      const fixed = await host.call("create_ticket", { title: "ok" }, { toolUseId: "toolu_m" });
      expect(fixed.isError).toBeFalsy();
      expect(ws.effects()).toHaveLength(1);
    } finally {
      await host.close();
    }
  });

  it("the same tool-use id with other arguments is refused as a key mismatch, not answered from the first call", async () => {
    const ws = workspace();
    const host = await startGateway(ws);
    try {
      await host.call("create_ticket", { title: "first" }, { toolUseId: "toolu_k" });
      const other = await host.call("create_ticket", { title: "second" }, { toolUseId: "toolu_k" });
      expect(other.isError).toBe(true);
      expect(text(other)).toMatch(/^EG_KEY_MISMATCH: /);
      expect(ws.effects()).toHaveLength(1);
    } finally {
      await host.close();
    }
  });

  it("reads run straight through, every time", async () => {
    const ws = workspace();
    const host = await startGateway(ws);
    try {
      await host.call("create_ticket", { title: "x" }, { toolUseId: "toolu_r" });
      const a = await host.call("count_effects", {}, { toolUseId: "toolu_read" });
      await host.call("create_ticket", { title: "y" }, { toolUseId: "toolu_r2" });
      const b = await host.call("count_effects", {}, { toolUseId: "toolu_read" });
      expect([text(a), text(b)]).toEqual(["1", "2"]);
    } finally {
      await host.close();
    }
  });

  it("passes the upstream's tools/list_changed on to the host, and serves the new tool", async () => {
    const ws = workspace();
    let changed!: () => void;
    const notified = new Promise<void>((resolve) => (changed = resolve));
    const host = await startGateway(ws, {
      setup: (client) => client.setNotificationHandler(ToolListChangedNotificationSchema, () => changed()),
    });
    try {
      await host.call("add_tool", { name: "late_tool" });
      await notified;
      const { tools } = await host.client.listTools();
      expect(tools.map((t) => t.name)).toContain("late_tool");
      expect(text(await host.call("late_tool", {}))).toBe("late_tool");
    } finally {
      await host.close();
    }
  });
});
