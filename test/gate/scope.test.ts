/**
 * Tenant and key are never run together: a scope naming a tenant or task with a control
 * character is refused up front, and the gate's in-process single flight keeps (tenant, key)
 * pairs apart that a NUL-joined id would have confused.
 */
import { describe, expect, it } from "vitest";
import { createGate } from "../../src/root/create-gate.js";
import { singleFlight, type Runtime } from "../../src/gate/runtime.js";
import { memoryLedger } from "../../src/stores/memory/index.js";
import { chargeTool, counter, toolUse } from "../support/tools.js";

describe("the scope of a call", () => {
  const call = [toolUse("toolu_1", "charge_card", { customer: "cus_1", amount: 10 })];

  it.each([
    ["tenant", "U+0000 at index 1", { tenant: "a\u0000b", task: "t" }],
    ["tenant", "U+000A at index 4", { tenant: "acme\n", task: "t" }],
    ["task", "U+001F at index 6", { tenant: "acme", task: "refund\u001f42" }],
    ["task", "U+007F at index 0", { tenant: "acme", task: "\u007f" }],
  ])("a %s with a control character (%s) is refused with EG_BAD_CONTENT naming the field and why; nothing runs", async (field, where, scope) => {
    const c = counter();
    const ledger = memoryLedger();
    const gate = createGate({ tools: [chargeTool(c)], ledger });
    const refused = gate.runToolUses(call, scope);
    await expect(refused).rejects.toThrow(`EG_BAD_CONTENT: the scope's ${field} `);
    await expect(refused).rejects.toThrow(`contains a control character (${where}): a tenant or task must not contain control characters (U+0000–U+001F, U+007F)`);
    await expect(refused).rejects.toThrow(/Nothing was executed\.$/);
    expect(() => gate.saga("order-1", scope)).toThrow(`EG_BAD_CONTENT: the scope's ${field} `);
    expect(c.total).toBe(0);
    expect(await ledger.calls.list()).toEqual([]);
  });

  it("other characters are fine: unicode, spaces, slashes, colons", async () => {
    const c = counter();
    const gate = createGate({ tools: [chargeTool(c)], ledger: memoryLedger() });
    const [result] = await gate.runToolUses(call, { tenant: "ünï cødé/acme:eu", task: "refund 42 ✓" });
    expect(result!.is_error).toBe(false);
    expect(c.total).toBe(1);
  });
});

describe("single flight (one call per tenant and key at a time in a gate)", () => {
  it("(tenant a\\u0000b, key c) and (tenant a, key b\\u0000c) are two keys: neither waits for the other", async () => {
    const rt = { inflight: new Map<string, Promise<void>>() } as unknown as Runtime;
    let releaseFirst!: () => void;
    const firstHeld = new Promise<void>((resolve) => (releaseFirst = resolve));
    const first = singleFlight(rt, "a\u0000b", "c", () => firstHeld.then(() => "first"));
    // The second would wait behind the first if the two shared an id; it must finish while the first still runs.
    const second = await Promise.race([
      singleFlight(rt, "a", "b\u0000c", async () => "second"),
      new Promise((resolve) => setTimeout(() => resolve("waited for the first"), 100)),
    ]);
    expect(second).toBe("second");
    releaseFirst();
    expect(await first).toBe("first");
    expect(rt.inflight.size).toBe(0);
  });

  it("the same tenant and key still wait for each other", async () => {
    const rt = { inflight: new Map<string, Promise<void>>() } as unknown as Runtime;
    const order: string[] = [];
    let releaseFirst!: () => void;
    const firstHeld = new Promise<void>((resolve) => (releaseFirst = resolve));
    const first = singleFlight(rt, "a\u0000b", "c", async () => {
      await firstHeld;
      order.push("first");
    });
    const second = singleFlight(rt, "a\u0000b", "c", async () => {
      order.push("second");
    });
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(order).toEqual([]);
    releaseFirst();
    await Promise.all([first, second]);
    expect(order).toEqual(["first", "second"]);
  });
});
