/**
 * Runs a tool for a call this gate holds (claimed or taken over) and records the outcome.
 *
 * - The claim is durable before the tool starts; the outcome is durable before the result is
 *   returned, or, when recording fails, the agent still gets the true result, the outcome is kept
 *   in memory and written again in the background, and an operator alert is raised. Once the tool
 *   has started, no answer says that nothing was executed.
 * - A timeout, a dropped connection or a 5xx is not a failure but an unknown outcome: the call
 *   becomes `uncertain` and its probe is asked (probe-loop.ts).
 * - The tool runs again for the same key only when a second send cannot add a second effect:
 *   the request never left; or the downstream honours the key; or the probe said "absent" after
 *   the settle horizon (the send + the tool's `settleMs`) and the first run has settled here (once).
 * - The tool starts only while this gate holds the lease; a lost lease aborts `ctx.signal`.
 */
import { EffectgateError, errorMessage, messageOf, reasonAfterStart } from "../core/errors.js";
import type { ToolContext } from "../core/tool.js";
import { toJson, type Json } from "../core/json.js";
import type { CallRecord, RecordUpdate } from "../contracts/calls.js";
import { errorResult, renderResult, resultBlock, type ToolResultBlock } from "../core/blocks.js";
import { keepLease, type LeaseKeeper } from "./lease.js";
import { classifyError, ToolTimeout } from "../core/outcome.js";
import { backoffMs, MAX_TOOL_STARTS } from "../core/policies.js";
import { sleepOn, sleepUnless, type TimeSource } from "../core/time.js";
import { probeUntilKnown, type LateRun } from "./probe-loop.js";
import { contradicts, reportContradiction } from "./contradiction.js";
import { record as write } from "./record.js";
import { markStarted } from "./known.js";
import { inflightId, inProgressResult, needsHumanResult, type Call, type Runtime } from "./runtime.js";

/**
 * The caller holds the key's single flight (runtime.ts), so nothing else in this gate touches the
 * record meanwhile. `confirmedAt`: rt.time.monotonic() just before the write that made this gate the
 * holder was sent. Never throws once the tool may have started.
 */
export async function executeHeld(
  rt: Runtime, call: Call, held: CallRecord, confirmedAt: number, options: ExecuteOptions = {},
): Promise<ToolResultBlock> {
  const lease = keepLease(rt, held, confirmedAt);
  const run: RunState = { started: false, record: held };
  try {
    return await attempt(rt, call, run, lease, options);
  } catch (err) {
    // A bug or a throwing hook: once the tool may have run, never "nothing was executed".
    if (!run.started) throw err;
    rt.alert({
      code: "record_failed",
      message: `${held.tool} call ${held.key} ran, then something went wrong before its outcome was known: ${messageOf(err)}`,
      tenant: held.tenant, key: held.key, tool: held.tool, cause: err,
    });
    return unknownResult(call, run.record, reasonAfterStart(err));
  } finally {
    lease.stop();
  }
}

export interface ExecuteOptions {
  /** A holder before this one may have sent a request that can still land. */
  readonly earlierSendMayLand?: boolean;
  /**
   * No run of the call was ever started: `held` is this gate's own claim (or its take-over of its own
   * unanswered claim). If the lease is lost before the tool starts, the gate remembers the record as its
   * own unstarted claim, so its next request for the call takes it back and runs it, not a person (seed 39342).
   */
  readonly neverStarted?: boolean;
}

/** The options of a call this gate claimed itself: nothing of it was ever started. */
export const NEVER_STARTED: ExecuteOptions = { neverStarted: true };

interface RunState {
  /** Whether the tool was started (at least once) by this attempt. */
  started: boolean;
  /** The record as this gate last wrote it. */
  record: CallRecord;
}

export type RunOutcome =
  | { readonly status: "ok"; readonly value: unknown }
  | { readonly status: "error"; readonly error: unknown }
  | { readonly status: "timeout"; readonly late: LateRun; readonly controller: AbortController };

async function attempt(rt: Runtime, call: Call, run: RunState, lease: LeaseKeeper, options: ExecuteOptions): Promise<ToolResultBlock> {
  const policy = rt.policyFor(call.tool);
  const where = { tool: run.record.tool, key: run.record.key, toolUseId: call.toolUseId };
  let retries = 0;
  let reranAfterProbe = false;
  // Whether an earlier send (of this attempt, or of a holder before this one) may still reach the
  // downstream: then a later send failing definitely (not sent, refused) says nothing about the
  // first, and the outcome stays unknown.
  let sentUnknown = options.earlierSendMayLand === true;
  for (;;) {
    lease.track(run.record);
    await rt.faults?.("after_claim", where);
    // Never start a run of the tool without the lease: another worker may hold the call now.
    if (!lease.held()) {
      if (!run.started && options.neverStarted === true) rt.known.set(inflightId(run.record), { kind: "claim_unanswered", versions: [run.record.version] });
      return lostLease(rt, call, run.record, lease);
    }
    rt.stats.executed++;
    if (call.note) call.note.executed = true;
    run.started = true;
    markStarted(rt, run.record);
    const outcome = await runWithTimeout(rt.time, call, run.record, policy.timeoutMs, lease.lost);
    if (outcome.status === "ok") {
      await rt.faults?.("after_execute", where);
      return recordSuccess(rt, call, run.record, toJson(outcome.value));
    }
    const classified = outcome.status === "timeout" ? "unknown" : classifyError(outcome.error);
    const why = outcome.status === "timeout" ? `no reply within ${policy.timeoutMs} ms` : messageOf(outcome.error);
    const kind = sentUnknown && classified !== "unknown" ? "unknown" : classified;
    if (kind === "rejected" || kind === "failed") return recordFailure(rt, call, run.record, outcome.status === "error" ? outcome.error : why);
    if (kind === "unknown") sentUnknown = true;

    const harmlessToResend = kind === "not_sent" || call.tool.downstreamIdempotent === true;
    if (harmlessToResend && call.tool.effect !== "destructive" && retries + 1 < policy.retry.attempts && lease.held()) {
      if (outcome.status === "timeout") outcome.controller.abort(new ToolTimeout(why));
      await sleepOn(rt.time, backoffMs(policy.retry, retries++, rt.random));
      const again = await rerun(rt, run, lease, `retrying with the same key after: ${why}`);
      if (again !== "rerun") {
        // Not re-run (given to a person, or taken over): the run just timed out is the last one started and may still
        // reply, which then settles the call or, when someone settled it otherwise, is reported, never dropped.
        if (outcome.status === "timeout") judgeLateReply(rt, run.record, outcome.late);
        return again;
      }
      continue;
    }
    if (kind === "not_sent") {
      return recordFailure(rt, call, run.record, new Error(`${why} (the request never reached the downstream; nothing happened)`));
    }

    // Outcome unknown: cancel the request, hold the call as uncertain and ask the probe. A reply that
    // still comes (a tool that ignores the abort) is taken as the answer. The request may land until
    // the horizon, counted from now: a downstream may even apply it after the cancel.
    const late = outcome.status === "timeout" ? outcome.late : undefined;
    if (late && outcome.status === "timeout") {
      outcome.controller.abort(new ToolTimeout(why));
      if (late.done !== true) {
        rt.abandoned.add(outcome.controller);
        void late.settled.then(() => rt.abandoned.delete(outcome.controller));
      }
    }
    const unknownSince = rt.time.monotonic();
    const uncertainSentAt = rt.time.monotonic();
    const uncertain = await write(rt, run.record, { state: "uncertain", error: `outcome unknown: ${why}`, leaseMs: rt.leaseMs, sendEnded: true });
    if (uncertain.kind === "lost") {
      // Another worker or a person has the call now; a reply this run still gets is judged against their record.
      if (late) judgeLateReply(rt, run.record, late);
      return lostRace(rt, call, run.record);
    }
    // A failed write leaves the record in_progress under this gate's lease: it stays ours either way.
    if (uncertain.kind === "written") {
      run.record = uncertain.record;
      lease.track(run.record, uncertainSentAt);
    }
    const horizonFrom = (since: number) =>
      call.tool.downstreamIdempotent === true ? -Infinity : call.tool.settleMs === undefined ? "never" as const : since + call.tool.settleMs;
    const probeOptions = { policy: policy.probe, time: rt.time, late, waitForHorizon: true, signal: lease.lost };
    let verdict = await probeUntilKnown(call, run.record, { ...probeOptions, absentFrom: horizonFrom(unknownSince) });
    if (verdict.kind === "done") return recordSuccess(rt, call, run.record, toJson(verdict.result));
    if (verdict.kind === "absent" && late && late.done !== true) {
      // A run that ignored the abort is still going, so it may send its request only now: wait for it
      // to settle, and if it ends without a reply, the horizon counts from then (its last possible send).
      await sleepUnless(rt.time, policy.probe.maxDelayMs, late.settled);
      if (endedWithoutReply(late)) verdict = await probeUntilKnown(call, run.record, { ...probeOptions, absentFrom: horizonFrom(rt.time.monotonic()) });
      if (verdict.kind === "done") return recordSuccess(rt, call, run.record, toJson(verdict.result));
    }
    if (verdict.kind === "absent" && late?.value) return recordSuccess(rt, call, run.record, toJson(late.value.result));
    if (verdict.kind === "absent" && !reranAfterProbe && (late === undefined || late.done === true) && lease.held()) {
      // Past the horizon, the first request can no longer land, and here its run has settled: one re-send, same key.
      reranAfterProbe = true;
      // Absent past the horizon: no earlier send can land any more. (A downstream that honours keys
      // has no horizon: an earlier send may still land, and is then what a later send replays.)
      if (call.tool.downstreamIdempotent !== true) sentUnknown = false;
      const again = await rerun(rt, run, lease, "the probe says the effect did not happen and the request can no longer land; running it again with the same key");
      if (again !== "rerun") return again;
      continue;
    }
    if (!lease.held()) {
      if (!run.started && options.neverStarted === true) rt.known.set(inflightId(run.record), { kind: "claim_unanswered", versions: [run.record.version] });
      return lostLease(rt, call, run.record, lease);
    }
    if (verdict.kind === "running") return park(rt, call, run.record, `${why}; ${verdict.reason}`);
    const reason = verdict.kind === "absent"
      ? reranAfterProbe ? "the probe said absent again after a re-run" : `the probe says absent, but the first run of the tool is still going here (it ignored the abort), so its request may still land`
      : verdict.reason;
    const parked = await sendToHuman(rt, run.record, `${why}; ${reason}`);
    if (late) judgeLateReply(rt, parked.record, late);
    return needsHumanResult(call.toolUseId, parked.record);
  }
}

/** Once the abandoned run settles, its reply settles the call or, when someone settled it otherwise, is reported (recordLateReply). */
function judgeLateReply(rt: Runtime, record: CallRecord, late: LateRun): void {
  const recording = late.settled.then(() => recordLateReply(rt, record, late));
  rt.background.add(recording);
  void recording.finally(() => rt.background.delete(recording));
}

/** Whether the run settled without a value (read after a wait: it settles meanwhile). */
function endedWithoutReply(run: LateRun): boolean {
  return run.done === true && !run.value;
}

export async function runWithTimeout(
  time: TimeSource, call: Call, record: Pick<CallRecord, "key" | "attempts" | "fence">, timeoutMs: number, lost?: AbortSignal,
): Promise<RunOutcome> {
  const controller = new AbortController();
  const onLost = () => controller.abort(lost?.reason);
  lost?.addEventListener("abort", onLost, { once: true });
  const ctx: ToolContext = {
    idempotencyKey: record.key, toolUseId: call.toolUseId, scope: call.scope, fence: record.fence, signal: controller.signal, attempt: record.attempts,
  };
  const late: { value?: { result: unknown }; done?: boolean } = {};
  const run = Promise.resolve().then(() => call.tool.execute(call.input, ctx));
  const settled = run.then((result) => void (late.value = { result }), () => undefined).finally(() => {
    late.done = true;
    lost?.removeEventListener("abort", onLost);
  });
  let timer: { cancel(): void } | undefined;
  const timedOut = new Promise<"timeout">((resolve) => (timer = time.timeout(timeoutMs, () => resolve("timeout"))));
  try {
    const first = await Promise.race([
      run.then((value) => ({ status: "ok", value }) as const, (error: unknown) => ({ status: "error", error }) as const),
      timedOut,
    ]);
    if (first !== "timeout") return first;
    return { status: "timeout", late: Object.assign(late, { settled }), controller };
  } finally {
    timer?.cancel();
  }
}

/** Why a call whose tool was started MAX_TOOL_STARTS times goes to a person. */
export function startsSpent(record: CallRecord): string {
  return `${record.tool} was started ${record.attempts} times without a definite outcome (each time with the same key); ` +
    `effectgate starts a call at most ${MAX_TOOL_STARTS} times, so a person must check whether its effect happened`;
}

/** Counts a new start of the tool durably, before it starts, with the same key. */
async function rerun(rt: Runtime, run: RunState, lease: LeaseKeeper, note: string): Promise<"rerun" | ToolResultBlock> {
  if (run.record.attempts >= MAX_TOOL_STARTS) {
    const parked = await sendToHuman(rt, run.record, startsSpent(run.record));
    return needsHumanResult(run.record.toolUseId, parked.record);
  }
  const sentAt = rt.time.monotonic();
  const again = await write(rt, run.record, { state: "in_progress", owner: rt.owner, leaseMs: rt.leaseMs, countAttempt: true, error: note }, { keep: false });
  if (again.kind === "written") {
    run.record = again.record;
    lease.track(run.record, sentAt);
    return "rerun";
  }
  if (again.kind === "lost") return lostRace(rt, { toolUseId: run.record.toolUseId, tool: { name: run.record.tool } }, run.record);
  // The re-run could not be counted before the send: do not send. The first outcome stays unknown.
  const parked = await sendToHuman(rt, run.record, `the call's outcome is unknown and its re-run could not be recorded (${again.reason}), so it was not re-sent`);
  return needsHumanResult(run.record.toolUseId, parked.record);
}

async function recordSuccess(rt: Runtime, call: Call, held: CallRecord, result: Json): Promise<ToolResultBlock> {
  const block = resultBlock(call.toolUseId, renderResult(result), false);
  const done = await write(rt, held, { state: "completed", result, owner: null, error: null }, { block });
  if (done.kind === "lost") {
    const current = await rt.calls.get(held.tenant, held.key).catch(() => undefined);
    if (current && contradicts(current, result)) await reportContradiction(rt, current, result, "the reply of a worker that had lost the call");
    rt.alert({
      code: "record_lost_race",
      message: `${held.tool} call ${held.key} completed, but another worker took it over before its result was recorded; check that worker's probe outcome`,
      tenant: held.tenant, key: held.key, tool: held.tool,
    });
  }
  if (done.kind === "written" && call.note) call.note.recorded = done.record;
  if (done.kind === "written") await rt.faults?.("after_record", { tool: held.tool, key: held.key, toolUseId: call.toolUseId });
  return block;
}

async function recordFailure(rt: Runtime, call: Call, held: CallRecord, err: unknown): Promise<ToolResultBlock> {
  const error = err instanceof EffectgateError ? err.message : errorMessage("EG_TOOL_FAILED", `${call.tool.name} failed: ${messageOf(err)}`);
  const block = resultBlock(call.toolUseId, error, true);
  const done = await write(rt, held, { state: "failed", error, owner: null }, { block });
  // Another worker holds the call now (this one lost its lease): its record, not this failure, is the answer.
  if (done.kind === "lost") return lostRace(rt, call, held);
  return block;
}

/** Hands the call to a person; the record as written (or as this gate holds it, when the write is still being retried). */
export async function sendToHuman(rt: Runtime, record: CallRecord, reason: string): Promise<{ record: CallRecord }> {
  const update: RecordUpdate = { state: "needs_human", error: reason, owner: null };
  const parked = await write(rt, record, update, { block: needsHumanResult(record.toolUseId, { ...record, ...update, owner: null }) });
  rt.alert({
    code: "needs_human",
    message: `${record.tool} call ${record.key} needs a person: ${reason}`,
    tenant: record.tenant, key: record.key, tool: record.tool,
  });
  if (parked.kind === "written") return { record: parked.record };
  return { record: (parked.kind === "lost" ? await rt.calls.get(record.tenant, record.key).catch(() => undefined) : undefined) ?? { ...record, state: "needs_human", error: reason, owner: null } };
}

/** Leaves the call uncertain and released: the downstream is still working on it; a replay or recovery asks again later. */
async function park(rt: Runtime, call: Call, held: CallRecord, reason: string): Promise<ToolResultBlock> {
  const block = inProgressResult(call.toolUseId, held, `still being worked on downstream (${reason})`);
  await write(rt, held, { state: "uncertain", error: reason, owner: null }, { block });
  return block;
}

/**
 * A reply that came after the call was handed to a human still settles it, never dropped; one that
 * comes after a person settled it otherwise is a contradiction: a finding and an alert.
 */
async function recordLateReply(rt: Runtime, parked: CallRecord, late: LateRun): Promise<void> {
  if (!late.value) return;
  const result = toJson(late.value.result);
  try {
    // A few rounds: each miss means the record moved (settled, taken over), and the next read judges the reply against that.
    for (let round = 0; round < 5; round++) {
      const current = await rt.calls.get(parked.tenant, parked.key);
      if (!current) return;
      if (current.state !== "needs_human" && current.state !== "uncertain") {
        if (contradicts(current, result)) await reportContradiction(rt, current, result, "a reply that arrived after the timeout");
        return;
      }
      // Another worker holds it (probing): only a holder writes a held record. Its probe will likely find this
      // very effect; if it gives up instead, the record is released and this reply then settles it.
      if (current.owner !== null && current.owner !== rt.owner) {
        if (rt.closing.closed) return;
        await sleepUnless(rt.time, rt.leaseMs, rt.closing.promise, { background: true });
        continue;
      }
      const settled = await rt.calls.update(current.tenant, current.key, current.version, {
        state: "completed", result, owner: null, error: "completed by a reply that arrived after the timeout",
      });
      // Moved meanwhile (a person settled it, another worker took it): judge the reply against what it is now.
      if (settled) return;
    }
    if (rt.closing.closed) return;
    rt.alert({
      code: "record_failed",
      message: `a late reply for ${parked.tool} call ${parked.key} was not recorded: the record kept moving (held or rewritten by others); its result: ${renderResult(result).slice(0, 500)}`,
      tenant: parked.tenant, key: parked.key, tool: parked.tool,
    });
  } catch (err) {
    rt.alert({
      code: "record_failed",
      message: `a late reply for ${parked.tool} call ${parked.key} could not be recorded: ${messageOf(err)}`,
      tenant: parked.tenant, key: parked.key, tool: parked.tool, cause: err,
    });
  }
}

function lostRace(rt: Runtime, call: Pick<Call, "toolUseId"> & { tool: { name: string } }, record: CallRecord): ToolResultBlock {
  rt.alert({
    code: "record_lost_race",
    message: `${record.tool} call ${record.key} was taken over by another worker while this one was still on it`,
    tenant: record.tenant, key: record.key, tool: record.tool,
  });
  return errorResult(call.toolUseId, "EG_IN_PROGRESS",
    `another worker took this ${record.tool} call over; repeat this same call to get its result. Do not retry it under a new id.`);
}

/** This gate lost the lease before (another run of) the tool: it starts nothing more and leaves the call to its new holder. */
function lostLease(rt: Runtime, call: Call, record: CallRecord, lease: LeaseKeeper): ToolResultBlock {
  const why = lease.lost.reason instanceof Error ? lease.lost.reason.message : "its lease was lost";
  rt.alert({
    code: "record_lost_race",
    message: `${record.tool} call ${record.key}: ${why}; this worker starts nothing more for it`,
    tenant: record.tenant, key: record.key, tool: record.tool,
  });
  return errorResult(call.toolUseId, "EG_IN_PROGRESS",
    `this worker lost the lease on this ${record.tool} call (${why}), so another worker may hold it; its outcome is not known here. ` +
      `Do not retry it under a new id; repeat this same call to get its result.`);
}

/** The answer when the tool may have run and nothing more is known: never "nothing was executed". */
function unknownResult(call: Call, record: CallRecord, why: string): ToolResultBlock {
  return inProgressResult(call.toolUseId, record, `of unknown outcome: the tool may have run, but ${why}`);
}
