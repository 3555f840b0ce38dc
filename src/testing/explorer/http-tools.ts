/**
 * The tool of the explorer's real-kill mode, as a child process and the recovering parent both
 * define it: POST /charges on the HTTP downstream with the call's key and fence, and a probe that
 * looks the key up there.
 */
import type { ProbeResult } from "../../core/hooks.js";
import { FENCE_HEADER, ToolRejected } from "../../core/outcome.js";
import type { StandardSchemaV1 } from "../../core/standard-schema.js";
import { defineTool, type AnyTool, type ToolContext } from "../../core/tool.js";
import { SENT_AT_HEADER } from "./http-downstream.js";

export interface ChargeToolOptions {
  /** Whether the tool has a probe (without one, an interrupted call goes to a person). */
  readonly probe: boolean;
  /** The downstream honours Idempotency-Key (the tool says downstreamIdempotent). */
  readonly honoursKeys: boolean;
  /** The longest the downstream takes to apply a request (its delay), plus a margin: the tool's settleMs. */
  readonly settleMs: number;
}

const input: StandardSchemaV1<unknown, { ref: string; amount: number }> = {
  "~standard": {
    version: 1, vendor: "effectgate-explorer",
    validate: (value) => {
      const v = value as { ref?: unknown; amount?: unknown } | null;
      return typeof v === "object" && v !== null && typeof v.ref === "string" && typeof v.amount === "number"
        ? { value: { ref: v.ref, amount: v.amount } }
        : { issues: [{ message: "expected { ref: string, amount: number }" }] };
    },
  },
};

export function chargeTool(url: string, options: ChargeToolOptions, onStart?: (ctx: ToolContext) => void): AnyTool {
  const tool = defineTool({
    name: "charge",
    effect: "write",
    input,
    timeoutMs: 5_000,
    settleMs: options.settleMs,
    ...(options.honoursKeys ? { downstreamIdempotent: true } : {}),
    async execute(args, ctx) {
      onStart?.(ctx);
      const res = await fetch(`${url}/charges`, {
        method: "POST",
        headers: { "content-type": "application/json", "idempotency-key": ctx.idempotencyKey, [FENCE_HEADER]: String(ctx.fence), [SENT_AT_HEADER]: String(Date.now()) },
        body: JSON.stringify(args),
        signal: ctx.signal,
      });
      const body = (await res.json());
      if (res.status >= 400 && res.status < 500) throw new ToolRejected(`charge refused: ${res.status} ${JSON.stringify(body)}`);
      if (!res.ok) throw Object.assign(new Error(`charge failed: ${res.status}`), { status: res.status });
      return body;
    },
    ...(options.probe
      ? {
          async probe(_args: { ref: string; amount: number }, ctx: ToolContext): Promise<ProbeResult<unknown>> {
            const res = await fetch(`${url}/charges?key=${encodeURIComponent(ctx.idempotencyKey)}`, { signal: ctx.signal });
            const body = (await res.json()) as { status: string; charge?: unknown };
            return body.status === "done" ? { status: "done", result: body.charge } : { status: "absent" };
          },
        }
      : {}),
  });
  return tool as unknown as AnyTool;
}
