/**
 * Resolving a call whose holder is gone (lease expired, process dead, or released while
 * `uncertain`). This is the only path by which a key's tool runs again after its holder
 * vanished, and it never re-runs a write blindly: `read` tools re-run; `write`/`destructive`
 * tools are asked their probe: done → completed with the probed result; absent when the request
 * can no longer land (the downstream honours the key, or the settle horizon has passed since the
 * last send) → re-execute with the same key, or, where the caller forbids a new effect (a saga
 * being compensated), recorded failed; absent before the horizon, running, or no answer → left
 * uncertain for later; absent from a tool that declares no horizon → a person. Without a probe
 * the call goes to a person.
 */
import { renderResult, resultBlock, type ToolResultBlock } from "../core/blocks.js";
import { toJson } from "../core/json.js";
import type { CallRecord } from "../contracts/calls.js";
import { leaseRanOut } from "../contracts/call-rules.js";
import { MAX_TOOL_STARTS } from "../core/policies.js";
import { executeHeld, sendToHuman, startsSpent } from "./execute.js";
import { keepLease } from "./lease.js";
import { probeUntilKnown, type ProbeVerdict } from "./probe-loop.js";
import { inProgressResult, needsHumanResult, type Call, type Runtime } from "./runtime.js";

export type Resolution =
  | "reexecuted"
  | "probed_done"
  | "probed_unknown"
  /** The probe said absent and the caller forbade a re-run: the call is recorded failed (no effect). */
  | "absent_failed"
  | "needs_human"
  | "deferred"
  /** Another worker moved the record first; the caller should read it again. */
  | "moved";

export interface Resolved {
  readonly resolution: Resolution;
  readonly block?: ToolResultBlock;
  /** The record as this resolution left it (absent when it moved). */
  readonly record?: CallRecord;
}

export interface ResolveOptions {
  /** How many times to ask the probe now (a replay waits its budget; a recovery pass asks once). */
  readonly probeRounds: number;
  /**
   * When the probe says the effect did not happen: "rerun" (the default) runs the call again with
   * the same key; `{ fail }` records it failed with that error (an `EG_…: ` message) and runs nothing.
   */
  readonly onAbsent?: "rerun" | { readonly fail: string };
  /** Why a call without a probe goes to a person (default: it cannot be known whether its effect happened). */
  readonly noProbeReason?: string;
}

export async function resolveStale(rt: Runtime, call: Call, record: CallRecord, options: ResolveOptions): Promise<Resolved> {
  const storeNow = await rt.calls.now();
  const confirmedAt = rt.time.monotonic();
  const held = await rt.calls.takeOver({
    tenant: record.tenant, key: record.key, version: record.version, owner: rt.owner, leaseMs: rt.leaseMs,
    holderIsDead: !leaseRanOut(record, storeNow),
  });
  if (!held) return { resolution: "moved" };

  if (call.tool.effect === "read") return reexecute(rt, call, held, confirmedAt);
  if (!call.tool.probe) {
    const parked = await sendToHuman(rt, held, options.noProbeReason ??
      `the call was interrupted before its outcome was recorded and ${held.tool} has no probe, so effectgate cannot tell whether its effect happened`);
    return { resolution: "needs_human", block: needsHumanResult(call.toolUseId, parked.record), record: parked.record };
  }
  // The settle horizon on the store's clock (the last send + settleMs), as a time of this process's.
  const horizon = held.startedAt + (call.tool.settleMs ?? 0);
  const absentFrom = call.tool.downstreamIdempotent === true ? -Infinity
    : call.tool.settleMs === undefined ? "never" as const : confirmedAt + (horizon - storeNow);
  // Probing may take longer than the lease: keep it, or another worker takes the call over meanwhile
  // and the two keep taking it from each other.
  const lease = keepLease(rt, held, confirmedAt);
  let verdict: ProbeVerdict;
  try {
    verdict = await probeUntilKnown(call, held, {
      policy: { ...rt.policyFor(call.tool).probe, attempts: options.probeRounds }, time: rt.time, absentFrom,
      waitForHorizon: options.probeRounds > 1, signal: lease.lost,
    });
  } finally {
    lease.stop();
  }
  // Lost meanwhile: the record is the new holder's; the caller reads it again.
  if (lease.lost.aborted) return { resolution: "moved" };
  switch (verdict.kind) {
    case "done": {
      const result = toJson(verdict.result);
      const done = await rt.calls.update(held.tenant, held.key, held.version, { state: "completed", result, owner: null, error: null });
      if (!done) return { resolution: "moved" };
      if (call.note) call.note.probed = true;
      return { resolution: "probed_done", block: resultBlock(call.toolUseId, renderResult(result), false), record: done };
    }
    case "absent":
      // "Absent" from a downstream that honours keys holds no horizon: the earlier send may still land.
      if (options.onAbsent === undefined || options.onAbsent === "rerun") return reexecute(rt, call, held, confirmedAt, absentFrom === -Infinity);
      return failAbsent(rt, call, held, options.onAbsent.fail);
    case "not_yet": {
      if (absentFrom === "never") {
        const parked = await sendToHuman(rt, held, `the call was interrupted before its outcome was recorded; ${verdict.reason}`);
        return { resolution: "needs_human", block: needsHumanResult(call.toolUseId, parked.record), record: parked.record };
      }
      const why = `the probe says absent so far, but the request sent at ${new Date(held.startedAt).toISOString()} may still land until ${new Date(horizon).toISOString()} (settleMs); asked again later`;
      const parked = await park(rt, held, why);
      return { resolution: "probed_unknown", block: inProgressResult(call.toolUseId, parked, `being checked (${why})`), record: parked };
    }
    case "running":
    case "unknown": {
      const parked = await park(rt, held, verdict.reason);
      return { resolution: "probed_unknown", block: inProgressResult(call.toolUseId, parked, `being checked (${verdict.reason})`), record: parked };
    }
  }
}

/** Runs the call again with the same key, counting the attempt durably before the tool starts. */
async function reexecute(rt: Runtime, call: Call, held: CallRecord, confirmedAt: number, earlierSendMayLand = false): Promise<Resolved> {
  if (!call.hasInput) {
    const parked = await park(rt, held, "the effect did not happen, but its stored input is redacted; replay the same tool_use to run it");
    return { resolution: "deferred", block: inProgressResult(call.toolUseId, parked, "waiting to be replayed with its full input"), record: parked };
  }
  if (held.attempts >= MAX_TOOL_STARTS) {
    const parked = await sendToHuman(rt, held, startsSpent(held));
    return { resolution: "needs_human", block: needsHumanResult(call.toolUseId, parked.record), record: parked.record };
  }
  const restarted = await rt.calls.update(held.tenant, held.key, held.version, {
    state: "in_progress", owner: rt.owner, leaseMs: rt.leaseMs, countAttempt: true, error: null,
  });
  if (!restarted) return { resolution: "moved" };
  return { resolution: "reexecuted", block: await executeHeld(rt, call, restarted, confirmedAt, { earlierSendMayLand }) };
}

/** Records a call the probe found never happened as failed, without running it (uncertain moves through in_progress). */
async function failAbsent(rt: Runtime, call: Call, held: CallRecord, error: string): Promise<Resolved> {
  let current: CallRecord | undefined = held;
  if (current.state === "uncertain") {
    current = await rt.calls.update(held.tenant, held.key, current.version, { state: "in_progress", owner: rt.owner, leaseMs: rt.leaseMs });
  }
  const failed = current && await rt.calls.update(held.tenant, held.key, current.version, { state: "failed", owner: null, error });
  if (!failed) return { resolution: "moved" };
  return { resolution: "absent_failed", block: resultBlock(call.toolUseId, error, true), record: failed };
}

/** Leaves the call uncertain, released, with the reason; a lost race keeps the newer record. */
async function park(rt: Runtime, held: CallRecord, reason: string): Promise<CallRecord> {
  const parked = await rt.calls.update(held.tenant, held.key, held.version, { state: "uncertain", error: reason, owner: null });
  return parked ?? (await rt.calls.get(held.tenant, held.key)) ?? held;
}
