/**
 * A call the ledger holds is answered from its record even after the upstream stopped listing its
 * tool (issue 23, defect 5, at the MCP gateway's seam): the gateway restarted in front of a release
 * of the server that renamed `charge` must not tell the host "no tool named charge … Nothing was
 * executed" for a charge that ran. A call the ledger does not hold still gets EG_UNKNOWN_TOOL.
 */
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { memoryLedger } from "../../src/stores/memory/index.js";
import { inMemoryUpstream, inProcessGateway, textOf } from "./in-process.js";

/** A release of the upstream: `tool` is its charge tool's name. */
function release(tool: string) {
  const runs: string[] = [];
  const mcp = new McpServer({ name: "payments", version: "1.0.0" });
  mcp.registerTool(tool, { inputSchema: { ref: z.string() }, annotations: { destructiveHint: false } }, ({ ref }) => {
    runs.push(ref);
    return { content: [{ type: "text", text: `charged ${ref}` }] };
  });
  return { mcp, runs };
}

describe("a tool the upstream no longer lists", () => {
  for (const [how, meta] of [["the host's tool-use id", { toolUseId: "toolu_1" }], ["a derived key", undefined]] as const) {
    it(`by ${how}: a charge that ran is answered from its record; a new one is an unknown tool`, async () => {
      const ledger = memoryLedger();
      const first = release("charge");
      const before = await inProcessGateway(ledger, await inMemoryUpstream(first.mcp, "node payments.js"));
      expect(textOf(await before.call("charge", { ref: "r1" }, meta))).toBe("charged r1");
      await before.close();

      // Restarted in front of the next release, which renamed the tool.
      const next = release("create_charge");
      const after = await inProcessGateway(ledger, await inMemoryUpstream(next.mcp, "node payments.js"));
      try {
        const replay = await after.call("charge", { ref: "r1" }, meta);
        expect(textOf(replay)).toBe("charged r1");
        expect(replay.isError).toBeFalsy();
        // Another call of the old name, or the same name with other arguments, was never run: that is the truth.
        const other = await after.call("charge", { ref: "r2" }, meta ? { toolUseId: "toolu_2" } : undefined);
        expect(other.isError).toBe(true);
        expect(textOf(other)).toMatch(/^EG_UNKNOWN_TOOL: .*no tool named "charge".*Nothing was executed/);
        expect([first.runs, next.runs]).toEqual([["r1"], []]);
      } finally {
        await after.close();
      }
    });
  }
});
