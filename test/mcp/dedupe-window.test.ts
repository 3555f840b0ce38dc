/**
 * The dedupe window of derived keys (docs/mcp.md, "Keys"): two identical calls without a tool-use
 * id are one call while the first is unsettled or settled less than `keys.dedupeWindowMs` ago,
 * counted from its settlement on the ledger's clock (issue 23, defect 2). Both clocks are the
 * test's: the ledger's (memoryLedger's `clock`) and the gateway's machine clock (Date.now).
 */
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { afterEach, describe, expect, it, vi } from "vitest";
import { z } from "zod";
import { resolveCall } from "../../src/reconcile/queue.js";
import { memoryLedger } from "../../src/stores/memory/index.js";
import { inMemoryUpstream, inProcessGateway, textOf } from "./in-process.js";

const WINDOW_MS = 2_000;

/** An upstream with one write tool, `charge`, that counts its runs and can be held mid-call until released. */
function chargeServer() {
  const runs: string[] = [];
  let hold: Promise<void> | undefined;
  let release = () => undefined as void;
  const server = new McpServer({ name: "charges", version: "1.0.0" });
  server.registerTool("charge", { inputSchema: { ref: z.string() }, annotations: { destructiveHint: false } }, async ({ ref }) => {
    runs.push(ref);
    if (hold) await hold;
    return { content: [{ type: "text", text: `charged ${ref} (run ${runs.length})` }] };
  });
  return {
    server, runs,
    holdNext() {
      hold = new Promise<void>((resolve) => (release = () => { hold = undefined; resolve(); }));
    },
    release: () => release(),
  };
}

/** The ledger's clock and the gateway's, each set by the test. */
function clocks(start: number) {
  const at = { store: start, machine: start };
  vi.spyOn(Date, "now").mockImplementation(() => at.machine);
  return at;
}

afterEach(() => {
  vi.restoreAllMocks();
});

describe("the MCP dedupe window counts from settlement, on the ledger's clock", () => {
  it("a slow call repeated just after it completed is answered from the ledger, though it was created longer than the window ago", async () => {
    const at = clocks(1_000_000);
    const ledger = memoryLedger({ clock: () => at.store });
    const up = chargeServer();
    const host = await inProcessGateway(ledger, await inMemoryUpstream(up.server, "charges"), { keys: { dedupeWindowMs: WINDOW_MS } });
    try {
      up.holdNext();
      const first = host.call("charge", { ref: "r1" });
      await vi.waitFor(() => expect(up.runs).toEqual(["r1"]));
      // The call takes 2.5 s (on both clocks), then completes; the host repeats it 0.2 s later.
      at.store += 2_500;
      at.machine += 2_500;
      up.release();
      const answer = await first;
      at.store += 200;
      at.machine += 200;
      const repeat = await host.call("charge", { ref: "r1" });
      expect(textOf(repeat)).toBe(textOf(answer));
      expect(up.runs).toEqual(["r1"]);
    } finally {
      await host.close();
    }
  });

  it("judges the window on the ledger's clock, not the gateway's (a gateway whose clock runs 5 s ahead)", async () => {
    const at = clocks(1_000_000);
    at.machine += 5_000;
    const ledger = memoryLedger({ clock: () => at.store });
    const up = chargeServer();
    const host = await inProcessGateway(ledger, await inMemoryUpstream(up.server, "charges"), { keys: { dedupeWindowMs: WINDOW_MS } });
    try {
      const answer = await host.call("charge", { ref: "r2" });
      at.store += 100;
      at.machine += 100;
      expect(textOf(await host.call("charge", { ref: "r2" }))).toBe(textOf(answer));
      expect(up.runs).toEqual(["r2"]);
      // Past the window on the ledger's clock: an identical call is a new one.
      at.store += WINDOW_MS;
      at.machine += WINDOW_MS;
      expect(textOf(await host.call("charge", { ref: "r2" }))).toBe("charged r2 (run 2)");
      expect(up.runs).toEqual(["r2", "r2"]);
    } finally {
      await host.close();
    }
  });

  it("a call a person settles after the window is answered from the ledger when the host repeats it, as it was told to", async () => {
    const at = clocks(1_000_000);
    const ledger = memoryLedger({ clock: () => at.store });
    const up = chargeServer();
    const host = await inProcessGateway(ledger, await inMemoryUpstream(up.server, "charges"), { timeoutMs: 200, keys: { dedupeWindowMs: WINDOW_MS } });
    try {
      // The upstream does not answer within the gateway's timeout and the gateway has no probe: the call goes to a person.
      up.holdNext();
      expect(textOf(await host.call("charge", { ref: "r3" }))).toMatch(/^EG_NEEDS_HUMAN/);
      const [record] = await ledger.calls.list({ state: "needs_human" });
      expect(record).toBeDefined();
      // Still unsettled long after the window: a repeat is the same call, never a new key.
      at.store += 10 * WINDOW_MS;
      at.machine += 10 * WINDOW_MS;
      expect(textOf(await host.call("charge", { ref: "r3" }))).toMatch(/^EG_NEEDS_HUMAN/);
      // A person settles it (it did happen); the host repeats it at once, as EG_NEEDS_HUMAN told it to.
      await resolveCall(ledger, record!.tenant, record!.key, { completedWith: { content: [{ type: "text", text: "charged r3 (checked)" }] }, by: "test" });
      at.store += 100;
      at.machine += 100;
      expect(textOf(await host.call("charge", { ref: "r3" }))).toBe("charged r3 (checked)");
      expect(up.runs).toEqual(["r3"]);
    } finally {
      up.release();
      await host.close();
    }
  });
});
