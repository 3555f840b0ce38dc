/**
 * Resolving a call whose holder is gone (lease expired, process dead, or released while
 * `uncertain`). This is the only path by which a key's tool runs again after its holder
 * vanished, and it never re-runs a write blindly: `read` tools re-run; `write`/`destructive`
 * tools are asked their probe (done → completed with the probed result; absent → re-execute
 * with the same key; running or no answer → left uncertain for later); without a probe the
 * call goes to a human.
 */
import type { CallRecord } from "../contracts/calls.js";
import { resultBlock, type ToolResultBlock } from "../core/blocks.js";
import { executeHeld, sendToHuman, toJson } from "./execute.js";
import { isHolderDead } from "./owner.js";
import { probeUntilKnown } from "./probe-loop.js";
import { inProgressResult, needsHumanResult, renderResult, type Call, type Runtime } from "./runtime.js";

export type Resolution =
  | "reexecuted"
  | "probed_done"
  | "probed_unknown"
  | "needs_human"
  | "deferred"
  /** Another worker moved the record first; the caller should read it again. */
  | "moved";

export interface Resolved {
  readonly resolution: Resolution;
  readonly block?: ToolResultBlock;
}

/** Whether the call's holder is gone, so this gate may take the call over. */
export function isStaleHolder(rt: Runtime, record: CallRecord, now: number): boolean {
  if (record.state !== "in_progress" && record.state !== "uncertain") return false;
  if (record.owner === null || record.leaseExpiresAt === null || record.leaseExpiresAt <= now) return true;
  // The caller holds this key's single flight, so a record held by this gate is not being
  // worked on by it: a run whose outcome could not be recorded.
  if (record.owner === rt.owner) return true;
  return isHolderDead(record.owner);
}

/** `probeRounds`: how many times to ask the probe now (a replay waits its budget; a recovery pass asks once). */
export async function resolveStale(rt: Runtime, call: Call, record: CallRecord, probeRounds: number): Promise<Resolved> {
  const now = await rt.ledger.now();
  const leaseRanOut = record.owner === null || record.leaseExpiresAt === null || record.leaseExpiresAt <= now;
  const held = await rt.ledger.takeOver({
    tenant: record.tenant, key: record.key, version: record.version, owner: rt.owner, leaseMs: rt.leaseMs,
    holderIsDead: !leaseRanOut,
  });
  if (!held) return { resolution: "moved" };

  if (call.tool.effect === "read") return reexecute(rt, call, held);
  if (!call.tool.probe) {
    const parked = await sendToHuman(rt, held,
      `the call was interrupted before its outcome was recorded and ${held.tool} has no probe, so effectgate cannot tell whether its effect happened`);
    return { resolution: "needs_human", block: needsHumanResult(call.toolUseId, parked) };
  }
  const verdict = await probeUntilKnown(call, held, { ...rt.policyFor(call.tool).probe, attempts: probeRounds });
  switch (verdict.kind) {
    case "done": {
      const result = toJson(verdict.result);
      const done = await rt.ledger.update(held.tenant, held.key, held.version, { state: "completed", result, owner: null, error: null });
      if (!done) return { resolution: "moved" };
      return { resolution: "probed_done", block: resultBlock(call.toolUseId, renderResult(result), false) };
    }
    case "absent":
      return reexecute(rt, call, held);
    case "unknown": {
      const parked = await park(rt, held, "uncertain", verdict.reason);
      return { resolution: "probed_unknown", block: inProgressResult(call.toolUseId, parked, `being checked (${verdict.reason})`) };
    }
  }
}

/** Runs the call again with the same key, counting the attempt durably before the tool starts. */
async function reexecute(rt: Runtime, call: Call, held: CallRecord): Promise<Resolved> {
  if (!call.hasInput) {
    const parked = await park(rt, held, "uncertain", "the effect did not happen, but its stored input is redacted; replay the same tool_use to run it");
    return { resolution: "deferred", block: inProgressResult(call.toolUseId, parked, "waiting to be replayed with its full input") };
  }
  const restarted = await rt.ledger.update(held.tenant, held.key, held.version, {
    state: "in_progress", owner: rt.owner, leaseMs: rt.leaseMs, countAttempt: true, error: null,
  });
  if (!restarted) return { resolution: "moved" };
  return { resolution: "reexecuted", block: await executeHeld(rt, call, restarted) };
}

/** Leaves the call uncertain, released, with the reason; a lost race keeps the newer record. */
async function park(rt: Runtime, held: CallRecord, state: "uncertain", reason: string): Promise<CallRecord> {
  const parked = await rt.ledger.update(held.tenant, held.key, held.version, { state, error: reason, owner: null });
  return parked ?? (await rt.ledger.get(held.tenant, held.key)) ?? held;
}
