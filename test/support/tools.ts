/** In-process tools that count their executions, for gate tests. */
import { z } from "zod";
import { defineTool } from "../../src/core/tool.js";
import { type ProbeResult } from "../../src/core/hooks.js";

export interface Counter {
  /** Executions per idempotency key. */
  readonly byKey: Map<string, number>;
  total: number;
}

export function counter(): Counter {
  return { byKey: new Map(), total: 0 };
}

function count(c: Counter, key: string): number {
  c.total++;
  const n = (c.byKey.get(key) ?? 0) + 1;
  c.byKey.set(key, n);
  return n;
}

export const chargeInput = z.object({ customer: z.string(), amount: z.number().positive() });

/** A write tool whose result names the charge it made. */
export function chargeTool(c: Counter, options: { key?: "tool_use_id" | "derived"; probe?: (key: string) => ProbeResult<unknown> } = {}) {
  return defineTool({
    name: "charge_card",
    effect: "write",
    input: chargeInput,
    key: options.key ?? "tool_use_id",
    async execute(input, ctx) {
      const n = count(c, ctx.idempotencyKey);
      return { chargeId: `ch_${c.total}`, customer: input.customer, amount: input.amount, run: n, attempt: ctx.attempt };
    },
    ...(options.probe ? { probe: async (_input: unknown, ctx: { idempotencyKey: string }) => options.probe!(ctx.idempotencyKey) } : {}),
  });
}

export function toolUse(id: string, name: string, input: unknown) {
  return { type: "tool_use", id, name, input } as const;
}
