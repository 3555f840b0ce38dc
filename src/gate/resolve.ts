/**
 * Resolving a call whose holder is gone (lease expired or process dead) or whose outcome is
 * `uncertain`. This is the only path to a second execution of a key, and it never re-runs a
 * write blindly: `read` tools re-run; `write`/`destructive` tools are asked their probe
 * (done → completed with the probed result; absent → re-execute with the same key;
 * running → left for later); without a probe the call goes to a human.
 */
import { messageOf } from "../core/errors.js";
import type { ToolContext } from "../core/tool.js";
import type { CallRecord } from "../ledger/contract.js";
import type { ToolResultBlock } from "./blocks.js";
import { executeHeld } from "./execute.js";
import { isHolderDead } from "./owner.js";
import { inProgressResult, needsHumanResult, renderResult, type Call, type Runtime } from "./runtime.js";
import { resultBlock } from "./blocks.js";

export type Resolution =
  | "reexecuted"
  | "probed_done"
  | "probed_running"
  | "probe_failed"
  | "needs_human"
  | "deferred"
  /** Another worker moved the record first; the caller should read it again. */
  | "moved";

export interface Resolved {
  readonly resolution: Resolution;
  readonly block?: ToolResultBlock;
}

export function isStaleHolder(rt: Runtime, record: CallRecord, now: number): boolean {
  if (record.state === "uncertain") return true;
  if (record.state !== "in_progress") return false;
  if (record.leaseExpiresAt === null || record.leaseExpiresAt <= now) return true;
  // This gate holds it but is not running it: a run whose outcome could not be recorded.
  if (record.owner === rt.owner) return !rt.inflight.has(`${record.tenant}\u0000${record.key}`);
  return isHolderDead(record.owner);
}

export async function resolveStale(rt: Runtime, call: Call, record: CallRecord): Promise<Resolved> {
  const now = await rt.ledger.now();
  const leaseRanOut = record.leaseExpiresAt === null || record.leaseExpiresAt <= now;
  const held = await rt.ledger.takeOver({
    tenant: record.tenant, key: record.key, version: record.version, owner: rt.owner, leaseMs: rt.leaseMs,
    holderIsDead: !leaseRanOut && record.state === "in_progress",
  });
  if (!held) return { resolution: "moved" };

  if (call.tool.effect === "read") return reexecute(rt, call, held);

  const probe = call.tool.probe;
  if (!probe) {
    const parked = await park(rt, held, "needs_human",
      `the call was interrupted before its outcome was recorded and ${held.tool} has no probe, so effectgate cannot tell whether its effect happened`);
    return { resolution: "needs_human", block: needsHumanResult(call.toolUseId, parked) };
  }

  const ctx: ToolContext = {
    idempotencyKey: held.key, toolUseId: call.toolUseId, scope: call.scope,
    signal: new AbortController().signal, attempt: held.attempts,
  };
  let answer: Awaited<ReturnType<typeof probe>>;
  try {
    answer = await probe(call.hasInput ? call.input : held.input, ctx);
  } catch (err) {
    const parked = await park(rt, held, "uncertain", `probe failed: ${messageOf(err)}`);
    return { resolution: "probe_failed", block: inProgressResult(call.toolUseId, parked, "being checked: its probe failed") };
  }
  switch (answer.status) {
    case "done": {
      const result = JSON.parse(JSON.stringify(answer.result ?? null)) as CallRecord["result"];
      const done = await rt.ledger.update(held.tenant, held.key, held.version, { state: "completed", result, owner: null, error: null });
      if (!done) return { resolution: "moved" };
      return { resolution: "probed_done", block: resultBlock(call.toolUseId, renderResult(result), false) };
    }
    case "running": {
      const parked = await park(rt, held, "uncertain", "the probe says the downstream is still working on it");
      return { resolution: "probed_running", block: inProgressResult(call.toolUseId, parked, "still running downstream") };
    }
    case "absent":
      if (!call.hasInput) {
        const parked = await park(rt, held, "uncertain",
          "the probe says the effect did not happen, but the stored input is redacted; replay the same tool_use to re-run it");
        return { resolution: "deferred", block: inProgressResult(call.toolUseId, parked, "waiting to be replayed with its full input") };
      }
      return reexecute(rt, call, held);
    default: {
      const parked = await park(rt, held, "uncertain", `probe gave an unknown answer ${JSON.stringify(answer)}`);
      return { resolution: "probe_failed", block: inProgressResult(call.toolUseId, parked, "being checked: its probe answered nonsense") };
    }
  }
}

/** Runs the call again with the same key, counting the attempt durably before the tool starts. */
async function reexecute(rt: Runtime, call: Call, held: CallRecord): Promise<Resolved> {
  if (!call.hasInput) {
    const parked = await park(rt, held, "uncertain", "its stored input is redacted; replay the same tool_use to re-run it");
    return { resolution: "deferred", block: inProgressResult(call.toolUseId, parked, "waiting to be replayed with its full input") };
  }
  const restarted = await rt.ledger.update(held.tenant, held.key, held.version, {
    state: "in_progress", owner: rt.owner, leaseMs: rt.leaseMs, countAttempt: true, error: null,
  });
  if (!restarted) return { resolution: "moved" };
  return { resolution: "reexecuted", block: await executeHeld(rt, call, restarted) };
}

/** Leaves the call in `state`, released, with the reason; a lost race keeps the newer record. */
async function park(rt: Runtime, held: CallRecord, state: "uncertain" | "needs_human", reason: string): Promise<CallRecord> {
  const parked = await rt.ledger.update(held.tenant, held.key, held.version, { state, error: reason, owner: null });
  return parked ?? (await rt.ledger.get(held.tenant, held.key)) ?? held;
}
