/** An in-process downstream (an e-mail service) with a clock the test moves, and the tool in front of it. */
import { z } from "zod";
import { defineTool } from "../../src/core/tool.js";
import type { DownstreamRecord, LookupWindow } from "../../src/core/hooks.js";

export interface ManualClock {
  readonly now: () => number;
  readonly advance: (ms: number) => void;
}

export function manualClock(start = 1_700_000_000_000): ManualClock {
  let t = start;
  return { now: () => t, advance: (ms) => void (t += ms) };
}

export interface FakeDownstream {
  /** The service's own records (tests add, change and remove them to make drift). */
  readonly records: DownstreamRecord[];
  /** Every window `lookup` was asked for. */
  readonly windows: LookupWindow[];
}

export function fakeDownstream(): FakeDownstream {
  return { records: [], windows: [] };
}

/** `send_email`: each call adds one record keyed by the idempotency key; `lookup` lists a window; `to` is compared. */
export function emailTool(downstream: FakeDownstream, clock: ManualClock, options: { name?: string; lookup?: boolean } = {}) {
  let n = 0;
  const spec = {
    name: options.name ?? "send_email",
    effect: "write" as const,
    input: z.object({ to: z.string(), subject: z.string() }),
    reconcileFields: ["to"],
    async execute(input: { to: string; subject: string }, ctx: { idempotencyKey: string; scope: { tenant: string } }) {
      const ref = `msg_${++n}`;
      downstream.records.push({ ref, key: ctx.idempotencyKey, at: clock.now(), fields: { to: input.to } });
      return { id: ref, to: input.to };
    },
  };
  if (options.lookup === false) return defineTool(spec);
  return defineTool({
    ...spec,
    async lookup(window: LookupWindow) {
      downstream.windows.push(window);
      return downstream.records.filter((r) => (r.at ?? 0) >= window.since && (r.at ?? 0) <= window.until);
    },
  });
}

export const emailUse = (id: string, to = "ann@example.com") => ({ type: "tool_use", id, name: "send_email", input: { to, subject: "hello" } });
