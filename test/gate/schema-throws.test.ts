/**
 * A tool's input schema is the caller's code: one whose validate throws, or returns a rejected
 * promise, answers that call with EG_INVALID_INPUT and runs nothing. runToolUses never throws
 * for it, and the other calls of the same message are answered as usual.
 */
import { describe, expect, it } from "vitest";
import { defineTool } from "../../src/core/tool.js";
import type { StandardSchemaV1 } from "../../src/core/standard-schema.js";
import type { EffectClass } from "../../src/core/effect-class.js";
import { createGate } from "../../src/root/create-gate.js";
import { memoryLedger } from "../../src/stores/memory/index.js";
import { chargeTool, counter, toolUse } from "../support/tools.js";

const scope = { tenant: "acme", task: "t-1" };

const throwing: StandardSchemaV1<unknown, { n: number }> = {
  "~standard": { version: 1, vendor: "test", validate: () => { throw new Error("schema blew up"); } },
};
const rejecting: StandardSchemaV1<unknown, { n: number }> = {
  "~standard": { version: 1, vendor: "test", validate: () => Promise.reject(new TypeError("async schema blew up")) },
};

describe("an input schema whose validate throws", () => {
  for (const [how, schema, why] of [["throws", throwing, "schema blew up"], ["returns a rejected promise", rejecting, "async schema blew up"]] as const) {
    for (const effect of ["write", "read"] as EffectClass[]) {
      it(`${how} (${effect} tool): the call is answered EG_INVALID_INPUT, nothing runs, the other calls are answered`, async () => {
        const ran: unknown[] = [];
        const fragile = defineTool({ name: "fragile", effect, input: schema, execute: (input) => { ran.push(input); return { ok: true }; } });
        const c = counter();
        const ledger = memoryLedger();
        const gate = createGate({ tools: [fragile, chargeTool(c)], ledger });
        const results = await gate.runToolUses([
          toolUse("toolu_fragile", "fragile", { n: 1 }),
          toolUse("toolu_charge", "charge_card", { customer: "cus_1", amount: 10 }),
        ], scope);
        expect(results[0]).toEqual({
          type: "tool_result", tool_use_id: "toolu_fragile", is_error: true,
          content: `EG_INVALID_INPUT: the input schema of fragile threw while validating (${why}). Nothing was executed.`,
        });
        expect(results[1]!.is_error).toBe(false);
        expect(ran).toEqual([]);
        expect(c.total).toBe(1);
        expect((await ledger.calls.list()).map((r) => r.key)).toEqual(["toolu_charge"]);
        expect(gate.stats.executed).toBe(1);
      });
    }
  }
});

describe("an input schema whose validate throws, in a saga", () => {
  it("a tool_use tagged with scope.saga is answered EG_INVALID_INPUT, no step is logged, the saga goes on", async () => {
    const ran: unknown[] = [];
    const fragile = defineTool({ name: "fragile", effect: "write", input: throwing, execute: (input) => { ran.push(input); return { ok: true }; } });
    const c = counter();
    const ledger = memoryLedger();
    const refundable = { ...chargeTool(c), compensate: () => Promise.resolve({ refunded: true }) };
    const gate = createGate({ tools: [fragile, refundable], ledger });
    const results = await gate.runToolUses([
      toolUse("toolu_fragile", "fragile", { n: 1 }),
      toolUse("toolu_charge", "charge_card", { customer: "cus_1", amount: 10 }),
    ], { ...scope, saga: "order-1" });
    expect(results[0]).toMatchObject({ tool_use_id: "toolu_fragile", is_error: true });
    expect(results[0]!.content).toBe("EG_INVALID_INPUT: the input schema of fragile threw while validating (schema blew up). Nothing was executed.");
    expect(results[1], results[1]!.content).toMatchObject({ is_error: false });
    expect(ran).toEqual([]);
    expect(c.total).toBe(1);
    expect((await ledger.sagas!.steps("acme", "order-1")).map((s) => s.name)).toEqual(["toolu_charge"]);
  });

  it("saga.step with such a tool rejects EG_INVALID_INPUT naming the throw, and logs no step", async () => {
    const fragile = defineTool({ name: "fragile", effect: "write", input: throwing, execute: () => ({ ok: true }) });
    const ledger = memoryLedger();
    const gate = createGate({ tools: [fragile], ledger });
    const saga = gate.saga("order-2", scope);
    await expect(saga.step("first", fragile, { n: 1 })).rejects.toThrow(/^EG_INVALID_INPUT: .*the schema threw while validating \(schema blew up\)/);
    expect(await ledger.sagas!.steps("acme", "order-2")).toEqual([]);
  });
});
