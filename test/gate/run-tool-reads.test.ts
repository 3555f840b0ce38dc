/**
 * gate.runTool (the path every SDK adapter takes) answers a write with the value the ledger
 * recorded, and takes it from the record the pipeline wrote or answered from: a successful call
 * is one claim and one outcome write, with no read of the ledger after it (issue 25: the wire
 * count showed a third round trip per call, a SELECT of the record just written).
 */
import { z } from "zod";
import { describe, expect, it } from "vitest";
import { defineTool } from "../../src/core/tool.js";
import type { Stores } from "../../src/contracts/stores.js";
import { createGate } from "../../src/root/create-gate.js";
import { memoryLedger } from "../../src/stores/memory/index.js";
import { sqliteLedger } from "../../src/stores/sqlite/index.js";
import { tempDir } from "../support/tmp.js";

/** `stores` with every call-store method counted by name. */
function counted(stores: Stores): { stores: Stores; counts: Record<string, number> } {
  const counts: Record<string, number> = {};
  const calls = new Proxy(stores.calls, {
    get(target, name, receiver) {
      const member: unknown = Reflect.get(target, name, receiver);
      if (typeof name !== "string" || typeof member !== "function") return member;
      return (...args: unknown[]) => {
        counts[name] = (counts[name] ?? 0) + 1;
        return (member as (...a: unknown[]) => unknown).apply(target, args);
      };
    },
  });
  return { stores: { ...stores, calls, close: () => stores.close() }, counts };
}

const ticket = defineTool({
  name: "create_ticket",
  effect: "write",
  input: z.object({ title: z.string() }),
  // The value holds a Date: the answer must be the recorded JSON, not this object.
  execute: ({ title }) => ({ title, id: "T-1", at: new Date(0) }),
});
// With a repeats policy the claim reads first (repeats.ts): only the value is checked there.
const label = defineTool({
  name: "label",
  effect: "write",
  input: z.object({ text: z.string() }),
  execute: ({ text }) => ({ text, id: "L-1" }),
  repeats: { windowMs: 60_000, action: "collapse" },
});
const scope = { tenant: "acme", task: "t1" };

for (const [name, open] of [
  ["memory", () => memoryLedger()],
  ["SQLite", () => sqliteLedger(`${tempDir()}/ledger.db`)],
] as const) {
  describe(`gate.runTool on the ${name} ledger`, () => {
    it("a first run, its replay and a collapsed repeat: the recorded value each time, and no read of the record after the call", async () => {
      const { stores, counts } = counted(open());
      const gate = createGate({ ledger: stores, tools: [ticket, label] });
      try {
        const first = await gate.runTool({ id: "c1", name: "create_ticket", input: { title: "printer" } }, scope);
        expect(first).toMatchObject({ ok: true, result: { title: "printer", id: "T-1", at: "1970-01-01T00:00:00.000Z" } });
        expect(counts.get ?? 0).toBe(0);
        const again = await gate.runTool({ id: "c1", name: "create_ticket", input: { title: "printer" } }, scope);
        expect(again).toMatchObject({ ok: true, result: { title: "printer", id: "T-1", at: "1970-01-01T00:00:00.000Z" } });
        // The replay's claim meets the record and answers from it; nothing reads it again to give the value.
        expect(counts.get ?? 0).toBe(0);
        await gate.runTool({ id: "l1", name: "label", input: { text: "urgent" } }, scope);
        const repeat = await gate.runTool({ id: "l2", name: "label", input: { text: "urgent" } }, scope);
        expect(repeat).toMatchObject({ ok: true, result: { text: "urgent", id: "L-1" }, collapsed: expect.stringContaining("repeats call l1") });
        const own = (await stores.calls.list({ tenant: "acme" })).find((r) => r.toolUseId === "l2");
        expect(own).toMatchObject({ state: "completed", result: { text: "urgent", id: "L-1" } });
      } finally {
        await gate.close();
        await stores.close();
      }
    });
  });
}
