/**
 * Asking a tool's probe whether a call with an unknown outcome happened, with backoff and
 * a budget. A late reply from the original run, if one comes meanwhile, is taken as the answer.
 */
import { messageOf } from "../core/errors.js";
import type { ToolContext } from "../core/tool.js";
import type { CallRecord } from "../contracts/calls.js";
import { probeDelayMs, type ProbePolicy } from "../core/policies.js";
import type { Call } from "./runtime.js";

/** The original run of a timed-out call, which may still answer. */
export interface LateRun {
  /** Set once the run settles with a value. */
  value?: { readonly result: unknown };
  /** Resolves when the run settles, either way. */
  readonly settled: Promise<void>;
}

export type ProbeVerdict =
  | { readonly kind: "done"; readonly result: unknown; readonly from: "probe" | "late_reply" }
  | { readonly kind: "absent" }
  | { readonly kind: "unknown"; readonly reason: string };

export async function probeUntilKnown(call: Call, held: CallRecord, policy: ProbePolicy, late?: LateRun): Promise<ProbeVerdict> {
  const hasProbe = call.tool.probe !== undefined;
  const ctx: ToolContext = {
    idempotencyKey: held.key, toolUseId: call.toolUseId, scope: call.scope,
    signal: new AbortController().signal, attempt: held.attempts,
  };
  let reason = `${call.tool.name} has no probe, so effectgate cannot tell whether its effect happened`;
  for (let round = 0; round < (hasProbe ? policy.attempts : 0); round++) {
    if (late?.value) return { kind: "done", result: late.value.result, from: "late_reply" };
    try {
      const answer = await call.tool.probe!(call.hasInput ? call.input : held.input, ctx);
      if (answer.status === "done") return { kind: "done", result: answer.result, from: "probe" };
      if (answer.status === "absent") return { kind: "absent" };
      if (answer.status === "running") reason = "the probe still says the downstream is working on it";
      else reason = `the probe gave an unknown answer ${JSON.stringify(answer)}`;
    } catch (err) {
      reason = `probe failed: ${messageOf(err)}`;
    }
    if (round + 1 < policy.attempts) await pause(probeDelayMs(policy, round), late);
  }
  if (late?.value) return { kind: "done", result: late.value.result, from: "late_reply" };
  if (hasProbe) reason = `${reason} (asked ${policy.attempts} time${policy.attempts === 1 ? "" : "s"})`;
  return { kind: "unknown", reason };
}

/** Waits `ms`, or less if the late run settles first. */
async function pause(ms: number, late?: LateRun): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const slept = new Promise<void>((resolve) => (timer = setTimeout(resolve, ms)));
  await (late ? Promise.race([slept, late.settled]) : slept);
  clearTimeout(timer);
}
