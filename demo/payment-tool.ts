/**
 * `charge_card` against the simulated payments service: a write tool that forwards its
 * idempotency key, maps the service's answers onto effectgate's outcome kinds, probes by key,
 * and lists the service's charges in a time window for reconciliation (comparing amount and
 * customer).
 */
import { z } from "zod";
import { defineTool, type DownstreamRecord, type LookupContext, type LookupWindow, OutcomeUnknown, type ProbeResult } from "effectgate";
import type { Charge } from "./payment-service.js";

/** `settleMs` (default 500): how long a charge may take to land; the service's slow charges must take less. */
export function chargeCardTool(serviceUrl: string, options: { name?: string; downstreamIdempotent?: boolean; probe?: boolean; settleMs?: number } = {}) {
  const input = z.object({ customer: z.string().min(1), amount: z.number().positive() });
  return defineTool({
    name: options.name ?? "charge_card",
    description: "Charge a customer's card on file.",
    effect: "write",
    input,
    downstreamIdempotent: options.downstreamIdempotent ?? false,
    settleMs: options.settleMs ?? 500,
    reconcileFields: ["amount", "customer"],
    async lookup(window: LookupWindow, ctx: LookupContext): Promise<DownstreamRecord[]> {
      const res = await fetch(`${serviceUrl}/charges?since=${window.since}&until=${window.until}`, { signal: ctx.signal });
      if (!res.ok) throw new Error(`payments listing answered ${res.status}`);
      const { charges } = (await res.json()) as { charges: (Charge & { at: number })[] };
      return charges.map((c) => ({ ref: c.id, key: c.key, at: c.at, fields: { amount: c.amount, customer: c.customer } }));
    },
    async execute(args, ctx): Promise<Charge> {
      const res = await fetch(`${serviceUrl}/charges`, {
        method: "POST",
        headers: { "content-type": "application/json", "idempotency-key": ctx.idempotencyKey },
        body: JSON.stringify(args),
        signal: ctx.signal,
      });
      const text = await res.text();
      // 409 from an Idempotency-Key service: the first request with this key is still running.
      if (res.status === 409) throw new OutcomeUnknown(`the payments service is still processing key ${ctx.idempotencyKey}`);
      if (!res.ok) throw Object.assign(new Error(`payments service answered ${res.status}: ${text}`), { status: res.status });
      return JSON.parse(text) as Charge;
    },
    ...(options.probe === false
      ? {}
      : {
          async probe(_args: z.infer<typeof input>, ctx: { idempotencyKey: string }): Promise<ProbeResult<Charge>> {
            const res = await fetch(`${serviceUrl}/charges?key=${encodeURIComponent(ctx.idempotencyKey)}`);
            if (!res.ok) throw new Error(`payments lookup answered ${res.status}`);
            const found = (await res.json()) as { status: "done"; charge: Charge } | { status: "running" } | { status: "absent" };
            return found.status === "done" ? { status: "done", result: found.charge } : found;
          },
        }),
  });
}
