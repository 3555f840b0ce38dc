/** create_ticket against the demo's real ticket service on 127.0.0.1: the service counts every ticket it creates. */
import { z } from "zod";
import { defineTool } from "../../src/core/tool.js";
import type { Ticket } from "../../demo/ticket-service.js";

export const ticketInput = z.object({ customer: z.string(), title: z.string() });

/** POSTs a ticket with the call's idempotency key (the service ignores it: every POST creates one). */
export async function postTicket(url: string, input: { customer: string; title: string }, key: string | null): Promise<Ticket> {
  const res = await fetch(`${url}/tickets`, {
    method: "POST",
    headers: { "content-type": "application/json", ...(key === null ? {} : { "idempotency-key": key }) },
    body: JSON.stringify(input),
  });
  if (!res.ok) throw new Error(`ticket service answered ${res.status}`);
  return (await res.json()) as Ticket;
}

export function ticketTool(url: string) {
  return defineTool({
    name: "create_ticket",
    description: "Open a support ticket",
    effect: "write",
    input: ticketInput,
    execute: (input, ctx) => postTicket(url, input, ctx.idempotencyKey),
    async probe(_input, ctx) {
      const res = await fetch(`${url}/tickets?key=${encodeURIComponent(ctx.idempotencyKey)}`);
      const { tickets } = (await res.json()) as { tickets: Ticket[] };
      return tickets[0] ? { status: "done", result: tickets[0] } : { status: "absent" };
    },
  });
}
