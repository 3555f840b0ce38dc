/**
 * Two gateways on one ledger, in front of two different upstream servers that each offer a tool of
 * the same name (issue 23, defect 3): neither is ever answered with the other's result, and a
 * repeats window never takes one upstream's call for a repeat of the other's. The upstream's
 * identity is part of the derived key, the fingerprint and the intent.
 */
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import type { Stores } from "../../src/contracts/stores.js";
import { defaultUpstreamId } from "../../src/mcp/keys.js";
import { memoryLedger } from "../../src/stores/memory/index.js";
import { inMemoryUpstream, inProcessGateway, textOf, type InProcessHost } from "./in-process.js";

/** An upstream named `name` with a write tool `charge` and a destructive tool `wipe`, each answering with the server's name. */
function server(name: string) {
  const runs: string[] = [];
  const mcp = new McpServer({ name, version: "1.0.0" });
  mcp.registerTool("charge", { inputSchema: { ref: z.string() }, annotations: { destructiveHint: false } }, ({ ref }) => {
    runs.push(`charge ${ref}`);
    return { content: [{ type: "text", text: `${name} charged ${ref}` }] };
  });
  mcp.registerTool("wipe", { inputSchema: { target: z.string() } }, ({ target }) => {
    runs.push(`wipe ${target}`);
    return { content: [{ type: "text", text: `${name} wiped ${target}` }] };
  });
  return { mcp, runs };
}

async function twoGateways(ledger: Stores, ids: { a?: string; b?: string } = {}) {
  const a = server("server-a");
  const b = server("server-b");
  const hostA = await inProcessGateway(ledger, await inMemoryUpstream(a.mcp, "node a.js"), ids.a ? { upstreamId: ids.a } : {}, { approveAll: true });
  const hostB = await inProcessGateway(ledger, await inMemoryUpstream(b.mcp, "node b.js"), ids.b ? { upstreamId: ids.b } : {}, { approveAll: true });
  return { a, b, hostA, hostB, close: async () => Promise.all([hostA.close(), hostB.close()] satisfies Promise<void>[]) };
}

const call = (host: InProcessHost, tool: string, args: Record<string, unknown>, meta?: Record<string, unknown>) => host.call(tool, args, meta).then(textOf);

describe("two MCP gateways on one ledger, in front of different upstreams", () => {
  it("a derived key names the upstream: the same tool and arguments through gateway B run on B and answer B's result", async () => {
    const ledger = memoryLedger();
    const { a, b, hostA, hostB, close } = await twoGateways(ledger);
    try {
      expect(await call(hostA, "charge", { ref: "r1" })).toBe("server-a charged r1");
      expect(await call(hostB, "charge", { ref: "r1" })).toBe("server-b charged r1");
      // Each gateway's own repeat is still answered from the ledger.
      expect(await call(hostA, "charge", { ref: "r1" })).toBe("server-a charged r1");
      expect(await call(hostB, "charge", { ref: "r1" })).toBe("server-b charged r1");
      expect([a.runs, b.runs]).toEqual([["charge r1"], ["charge r1"]]);
      const keys = (await ledger.calls.list()).map((r) => r.key);
      expect(new Set(keys).size).toBe(2);
    } finally {
      await close();
    }
  });

  it("the fingerprint names the upstream: a tool-use id already used through A is a key mismatch through B, never A's answer", async () => {
    const ledger = memoryLedger();
    const { a, b, hostA, hostB, close } = await twoGateways(ledger);
    try {
      expect(await call(hostA, "charge", { ref: "r2" }, { toolUseId: "toolu_shared" })).toBe("server-a charged r2");
      const fromB = await call(hostB, "charge", { ref: "r2" }, { toolUseId: "toolu_shared" });
      expect(fromB).toMatch(/^EG_KEY_MISMATCH/);
      expect(fromB).not.toContain("server-a");
      expect([a.runs, b.runs]).toEqual([["charge r2"], []]);
    } finally {
      await close();
    }
  });

  it("the intent names the upstream: B's destructive call is not refused as a repeat of A's (EG_REPEATED_CALL)", async () => {
    const ledger = memoryLedger();
    const { a, b, hostA, hostB, close } = await twoGateways(ledger);
    try {
      expect(await call(hostA, "wipe", { target: "db" }, { toolUseId: "toolu_a1" })).toBe("server-a wiped db");
      expect(await call(hostB, "wipe", { target: "db" }, { toolUseId: "toolu_b1" })).toBe("server-b wiped db");
      // Through one gateway, a re-plan under a new id is still refused as a repeat.
      expect(await call(hostA, "wipe", { target: "db" }, { toolUseId: "toolu_a2" })).toMatch(/^EG_REPEATED_CALL/);
      expect([a.runs, b.runs]).toEqual([["wipe db"], ["wipe db"]]);
    } finally {
      await close();
    }
  });

  it("`upstreamId` names the upstream when set: two gateways given one id are one upstream to the ledger", async () => {
    const ledger = memoryLedger();
    const { a, b, hostA, hostB, close } = await twoGateways(ledger, { a: "tickets", b: "tickets" });
    try {
      expect(await call(hostA, "charge", { ref: "r3" })).toBe("server-a charged r3");
      expect(await call(hostB, "charge", { ref: "r3" })).toBe("server-a charged r3");
      expect([a.runs, b.runs]).toEqual([["charge r3"], []]);
      expect((await ledger.calls.list())[0]?.key).toMatch(/^mcp:tickets:default:mcp:charge:[0-9a-f]{64}$/);
    } finally {
      await close();
    }
  });

  it("the default identity is stable for one command line or URL and differs between two", () => {
    const cmd = defaultUpstreamId({ command: "node", args: ["server.js"] });
    expect(cmd).toMatch(/^[0-9a-f]{16}$/);
    expect(defaultUpstreamId({ command: "node", args: ["server.js"] })).toBe(cmd);
    expect(defaultUpstreamId({ command: "node", args: ["other.js"] })).not.toBe(cmd);
    expect(defaultUpstreamId({ command: "node server.js" })).not.toBe(cmd);
    expect(defaultUpstreamId({ url: "http://127.0.0.1:9000/mcp" })).toBe(defaultUpstreamId({ url: "HTTP://127.0.0.1:9000/mcp" }));
    expect(defaultUpstreamId({ url: "http://127.0.0.1:9001/mcp" })).not.toBe(defaultUpstreamId({ url: "http://127.0.0.1:9000/mcp" }));
  });
});
