/**
 * The `create_ticket` tool used by the crash demo and tests: a write tool that forwards its
 * idempotency key downstream and whose probe asks the service for tickets made with that key.
 */
import { z } from "zod";
import { defineTool, type ProbeResult } from "effectgate";
import type { Ticket } from "./ticket-service.js";

/**
 * `settleMs`: how long a request may take to land at the ticket service (it is local and answers
 * at once; 300 ms leaves room for a loaded machine).
 */
export function createTicketTool(serviceUrl: string, options: { probe?: boolean; settleMs?: number } = {}) {
  const input = z.object({ customer: z.string().min(1), title: z.string().min(1) });
  return defineTool({
    name: "create_ticket",
    description: "Open a support ticket for a customer's fault report.",
    effect: "write",
    input,
    settleMs: options.settleMs ?? 300,
    async execute(args, ctx): Promise<Ticket> {
      const res = await fetch(`${serviceUrl}/tickets`, {
        method: "POST",
        headers: { "content-type": "application/json", "idempotency-key": ctx.idempotencyKey },
        body: JSON.stringify(args),
        signal: ctx.signal,
      });
      if (!res.ok) throw new Error(`ticket service answered ${res.status}: ${await res.text()}`);
      return (await res.json()) as Ticket;
    },
    ...(options.probe === false
      ? {}
      : {
          async probe(_args: z.infer<typeof input>, ctx: { idempotencyKey: string }): Promise<ProbeResult<Ticket>> {
            const res = await fetch(`${serviceUrl}/tickets?key=${encodeURIComponent(ctx.idempotencyKey)}`);
            if (!res.ok) throw new Error(`ticket service answered ${res.status}`);
            const { tickets } = (await res.json()) as { tickets: Ticket[] };
            return tickets[0] ? { status: "done", result: tickets[0] } : { status: "absent" };
          },
        }),
  });
}
