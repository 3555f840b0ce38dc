/** Tools and helpers for governance tests: every tool counts its real executions. */
import { z } from "zod";
import { defineTool } from "../../src/core/tool.js";
import type { Alert } from "../../src/gate/alerts.js";

export interface Effects {
  /** Executions, in order, as "tool:key". */
  readonly log: string[];
  count(tool?: string): number;
}

export function effects(): Effects {
  const log: string[] = [];
  return { log, count: (tool) => (tool === undefined ? log.length : log.filter((l) => l.startsWith(`${tool}:`)).length) };
}

export function deleteAccountTool(fx: Effects) {
  return defineTool({
    name: "delete_account",
    effect: "destructive",
    input: z.object({ account: z.string() }),
    async execute(input, ctx) {
      fx.log.push(`delete_account:${ctx.idempotencyKey}`);
      return { deleted: input.account };
    },
    dryRun: (input) => ({ effect: "would_delete", would_affect: { account: input.account }, reversible: false }),
  });
}

export function chargeTool(fx: Effects) {
  return defineTool({
    name: "charge_card",
    effect: "write",
    input: z.object({ customer: z.string(), amount: z.number().positive() }),
    async execute(input, ctx) {
      fx.log.push(`charge_card:${ctx.idempotencyKey}`);
      return { charged: input.amount, customer: input.customer };
    },
    dryRun: (input) => ({ effect: "would_charge", would_affect: { customer: input.customer, amount: input.amount }, reversible: true }),
  });
}

export function emailTool(fx: Effects) {
  return defineTool({
    name: "send_email",
    effect: "write",
    input: z.object({ to: z.string() }),
    async execute(input, ctx) {
      fx.log.push(`send_email:${ctx.idempotencyKey}`);
      return { sent: input.to };
    },
  });
}

export function lookupTool(fx: Effects) {
  return defineTool({
    name: "lookup_customer",
    effect: "read",
    input: z.object({ customer: z.string() }),
    async execute(input) {
      fx.log.push(`lookup_customer:-`);
      return { customer: input.customer, plan: "pro" };
    },
  });
}

export const use = (id: string, name: string, input: unknown) => ({ type: "tool_use", id, name, input }) as const;

/** A clock the test moves by hand. */
export function manualClock(start = 1_800_000_000_000) {
  let now = start;
  return { now: () => now, advance: (ms: number) => void (now += ms), set: (ms: number) => void (now = ms) };
}

export function alerts() {
  const list: Alert[] = [];
  return { list, onAlert: (a: Alert) => void list.push(a) };
}
