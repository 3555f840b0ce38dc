/**
 * Asking a tool's probe whether a call with an unknown outcome happened, with backoff and a
 * budget. A late reply from the original run, if one comes meanwhile, is taken as the answer.
 *
 * The settle horizon: after a timeout, a lost reply or a crash, the request may still be on its
 * way, so the probe's "absent" means only "not yet" until the horizon (the send + the tool's
 * `settleMs`). Before it, the probe is asked again (waiting for the horizon if the caller lets
 * it); only an "absent" at or after it is an answer that lets the call run again. A tool without
 * a horizon (and whose downstream does not honour keys) never gets that answer.
 */
import { messageOf } from "../core/errors.js";
import type { ToolContext } from "../core/tool.js";
import type { CallRecord } from "../contracts/calls.js";
import { probeDelayMs, type ProbePolicy } from "../core/policies.js";
import { sleepUnless, type TimeSource } from "../core/time.js";
import type { Call } from "./runtime.js";

/** The original run of a timed-out call, which may still answer. */
export interface LateRun {
  /** Set once the run settles with a value. */
  value?: { readonly result: unknown };
  /** Set once the run settled, either way. */
  done?: boolean;
  /** Resolves when the run settles, either way. */
  readonly settled: Promise<void>;
}

export type ProbeVerdict =
  | { readonly kind: "done"; readonly result: unknown; readonly from: "probe" | "late_reply" }
  /** The probe said absent when the request could no longer land: the call may run again, with the same key. */
  | { readonly kind: "absent" }
  /** The probe said absent while the request could still land (before the horizon), or the tool declares no horizon. */
  | { readonly kind: "not_yet"; readonly reason: string }
  /** The downstream says it is still working on it. */
  | { readonly kind: "running"; readonly reason: string }
  /** No probe, or it failed or gave no answer effectgate understands. */
  | { readonly kind: "unknown"; readonly reason: string };

export interface ProbeOptions {
  readonly policy: ProbePolicy;
  /** The clock the horizon is on, and the pauses between rounds wait on. */
  readonly time: TimeSource;
  readonly late?: LateRun | undefined;
  /**
   * From when (`time.monotonic()` ms) "absent" is an answer: -Infinity for a downstream that
   * honours the key, the send + settleMs, or "never" for a tool with no horizon.
   */
  readonly absentFrom: number | "never";
  /** Wait for the horizon when the probe says absent before it (false: say not_yet at once). */
  readonly waitForHorizon: boolean;
  /** Stop probing when this aborts (the lease was lost). */
  readonly signal?: AbortSignal;
}

export async function probeUntilKnown(call: Call, held: CallRecord, options: ProbeOptions): Promise<ProbeVerdict> {
  const verdict = await probeLoop(call, held, options);
  call.note?.probes.push(verdict.kind); // for the gate's observers
  return verdict;
}

async function probeLoop(call: Call, held: CallRecord, options: ProbeOptions): Promise<ProbeVerdict> {
  const { policy, late, absentFrom } = options;
  const hasProbe = call.tool.probe !== undefined;
  const ctx: ToolContext = {
    idempotencyKey: held.key, toolUseId: call.toolUseId, scope: call.scope, fence: held.fence,
    signal: options.signal ?? new AbortController().signal, attempt: held.attempts,
  };
  const tooSoon = absentFrom === "never"
    ? `the probe says absent, but ${call.tool.name} declares no settleMs and its downstream does not honour keys, so a request already sent may still land`
    : "the probe says absent, but the request sent may still land";
  let last: ProbeVerdict = { kind: "unknown", reason: `${call.tool.name} has no probe, so effectgate cannot tell whether its effect happened` };
  for (let round = 0; hasProbe && round < policy.attempts; round++) {
    if (late?.value) return { kind: "done", result: late.value.result, from: "late_reply" };
    if (options.signal?.aborted) break;
    try {
      const answer = await call.tool.probe!(call.hasInput ? call.input : held.input, ctx);
      if (answer.status === "done") return { kind: "done", result: answer.result, from: "probe" };
      if (answer.status === "absent") {
        if (absentFrom !== "never" && options.time.monotonic() >= absentFrom) return { kind: "absent" };
        last = { kind: "not_yet", reason: tooSoon };
        if (absentFrom !== "never" && !options.waitForHorizon) break;
        if (absentFrom !== "never" && round + 1 >= policy.attempts) {
          // The budget is spent but the horizon is in sight: wait for it, then ask once more.
          await pause(options.time, Math.max(0, absentFrom - options.time.monotonic()), late);
          round = policy.attempts - 2;
          continue;
        }
      } else if (answer.status === "running") {
        last = { kind: "running", reason: "the probe still says the downstream is working on it" };
      } else {
        last = { kind: "unknown", reason: `the probe gave an unknown answer ${JSON.stringify(answer)}` };
      }
    } catch (err) {
      last = { kind: "unknown", reason: `probe failed: ${messageOf(err)}` };
    }
    if (round + 1 < policy.attempts) await pause(options.time, probeDelayMs(policy, round), late);
  }
  if (late?.value) return { kind: "done", result: late.value.result, from: "late_reply" };
  if (hasProbe && last.kind !== "not_yet") return { ...last, reason: `${last.reason} (asked ${policy.attempts} time${policy.attempts === 1 ? "" : "s"})` };
  return last;
}

/** Waits `ms`, or less if the late run settles first (a run that already settled shortens nothing). */
function pause(time: TimeSource, ms: number, late?: LateRun): Promise<void> {
  return sleepUnless(time, ms, late && late.done !== true ? late.settled : undefined);
}
