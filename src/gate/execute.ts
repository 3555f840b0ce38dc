/**
 * Runs a tool for a call this gate holds (claimed or taken over) and records the outcome.
 *
 * The claim is durable before the tool starts; the outcome is durable before the result is
 * returned, except when recording fails: then the agent still gets the true result and an
 * operator alert is raised. A timeout, a dropped connection or a 5xx is not a failure but an
 * unknown outcome: the call becomes `uncertain` and the probe is asked (probe-loop.ts). The
 * tool runs again for the same key only when a second send is known to be harmless: the
 * request never left, the downstream honours the key, or the probe said "absent" (once).
 */
import { EffectgateError, errorMessage, messageOf } from "../core/errors.js";
import type { ToolContext } from "../core/tool.js";
import { toJson, type Json } from "../core/json.js";
import type { CallRecord } from "../contracts/calls.js";
import { errorResult, renderResult, resultBlock, type ToolResultBlock } from "../core/blocks.js";
import { keepLease, type LeaseKeeper } from "./lease.js";
import { classifyError, ToolTimeout } from "../core/outcome.js";
import { backoffMs, sleep } from "../core/policies.js";
import { probeUntilKnown, type LateRun } from "./probe-loop.js";
import { needsHumanResult, type Call, type Runtime } from "./runtime.js";

/** The caller holds the key's single flight (runtime.ts), so nothing else in this gate touches the record meanwhile. */
export async function executeHeld(rt: Runtime, call: Call, held: CallRecord): Promise<ToolResultBlock> {
  const lease = keepLease(rt, held);
  try {
    return await attempt(rt, call, held, lease);
  } finally {
    lease.stop();
  }
}

export type RunOutcome =
  | { readonly status: "ok"; readonly value: unknown }
  | { readonly status: "error"; readonly error: unknown }
  | { readonly status: "timeout"; readonly late: LateRun; readonly controller: AbortController };

async function attempt(rt: Runtime, call: Call, start: CallRecord, lease: LeaseKeeper): Promise<ToolResultBlock> {
  const policy = rt.policyFor(call.tool);
  const where = { tool: start.tool, key: start.key, toolUseId: call.toolUseId };
  let record = start;
  let retries = 0;
  let reranAfterProbe = false;
  for (;;) {
    lease.track(record);
    await rt.faults?.("after_claim", where);
    rt.stats.executed++;
    const outcome = await runWithTimeout(call, record, policy.timeoutMs);
    if (outcome.status === "ok") {
      await rt.faults?.("after_execute", where);
      return recordSuccess(rt, call, record, toJson(outcome.value));
    }
    const kind = outcome.status === "timeout" ? "unknown" : classifyError(outcome.error);
    const why = outcome.status === "timeout" ? `no reply within ${policy.timeoutMs} ms` : messageOf(outcome.error);
    if (kind === "rejected" || kind === "failed") return recordFailure(rt, call, record, outcome.status === "error" ? outcome.error : why);

    const harmlessToResend = kind === "not_sent" || call.tool.downstreamIdempotent === true;
    if (harmlessToResend && call.tool.effect !== "destructive" && retries + 1 < policy.retry.attempts) {
      if (outcome.status === "timeout") outcome.controller.abort(new ToolTimeout(why));
      await sleep(backoffMs(policy.retry, retries++, rt.random));
      const again = await rerun(rt, record, `retrying with the same key after: ${why}`);
      if (!again) return lostRace(rt, call, record);
      record = again;
      continue;
    }
    if (kind === "not_sent") {
      return recordFailure(rt, call, record, new Error(`${why} (the request never reached the downstream; nothing happened)`));
    }

    // Outcome unknown: hold the call as uncertain and ask the probe.
    const late = outcome.status === "timeout" ? outcome.late : undefined;
    const uncertain = await rt.calls.update(record.tenant, record.key, record.version, {
      state: "uncertain", error: `outcome unknown: ${why}`, leaseMs: rt.leaseMs,
    });
    if (!uncertain) return lostRace(rt, call, record);
    record = uncertain;
    lease.track(record);
    if (late && outcome.status === "timeout") {
      rt.abandoned.add(outcome.controller);
      void late.settled.then(() => rt.abandoned.delete(outcome.controller));
    }
    let verdict = await probeUntilKnown(call, record, policy.probe, late);
    if (verdict.kind === "absent" && late && !late.value && outcome.status === "timeout") {
      // "Absent" while the first request may still be on its way is not yet an answer: a
      // downstream that ignores keys would apply both. Cancel the first request, let it settle,
      // then ask again; only an "absent" after that allows the re-run.
      outcome.controller.abort(new ToolTimeout(why));
      await Promise.race([late.settled, sleep(policy.probe.maxDelayMs)]);
      await sleep(policy.probe.initialDelayMs);
      verdict = await probeUntilKnown(call, record, policy.probe, late);
    }
    if (verdict.kind === "done") return recordSuccess(rt, call, record, toJson(verdict.result));
    if (verdict.kind === "absent" && !reranAfterProbe) {
      reranAfterProbe = true;
      if (late && outcome.status === "timeout") outcome.controller.abort(new ToolTimeout(why));
      const again = await rerun(rt, record, "the probe says the effect did not happen; running it again with the same key");
      if (!again) return lostRace(rt, call, record);
      record = again;
      continue;
    }
    const reason = verdict.kind === "absent" ? "the probe said absent again after a re-run" : verdict.reason;
    const parked = await sendToHuman(rt, record, `${why}; ${reason}`);
    if (late) {
      const recording = late.settled.then(() => recordLateReply(rt, parked, late));
      rt.background.add(recording);
      void recording.finally(() => rt.background.delete(recording));
    }
    return needsHumanResult(call.toolUseId, parked);
  }
}

export async function runWithTimeout(call: Call, record: Pick<CallRecord, "key" | "attempts">, timeoutMs: number): Promise<RunOutcome> {
  const controller = new AbortController();
  const ctx: ToolContext = {
    idempotencyKey: record.key, toolUseId: call.toolUseId, scope: call.scope, signal: controller.signal, attempt: record.attempts,
  };
  const late: { value?: { result: unknown } } = {};
  const run = Promise.resolve().then(() => call.tool.execute(call.input, ctx));
  const settled = run.then((result) => void (late.value = { result }), () => undefined);
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<"timeout">((resolve) => (timer = setTimeout(() => resolve("timeout"), timeoutMs)));
  try {
    const first = await Promise.race([
      run.then((value) => ({ status: "ok", value }) as const, (error: unknown) => ({ status: "error", error }) as const),
      timedOut,
    ]);
    if (first !== "timeout") return first;
    return { status: "timeout", late: Object.assign(late, { settled }), controller };
  } finally {
    clearTimeout(timer);
  }
}

/** Counts a new start of the tool durably, before it starts, with the same key. */
function rerun(rt: Runtime, record: CallRecord, note: string): Promise<CallRecord | undefined> {
  return rt.calls.update(record.tenant, record.key, record.version, {
    state: "in_progress", owner: rt.owner, leaseMs: rt.leaseMs, countAttempt: true, error: note,
  });
}

async function recordSuccess(rt: Runtime, call: Call, held: CallRecord, result: Json): Promise<ToolResultBlock> {
  const content = renderResult(result);
  try {
    const recorded = await rt.calls.update(held.tenant, held.key, held.version, { state: "completed", result, owner: null, error: null });
    if (!recorded) {
      rt.alert({
        code: "record_lost_race",
        message: `${held.tool} call ${held.key} completed, but another worker took it over before its result was recorded; check that worker's probe outcome`,
        tenant: held.tenant, key: held.key, tool: held.tool,
      });
      return resultBlock(call.toolUseId, content, false);
    }
  } catch (err) {
    rt.alert({
      code: "record_failed",
      message: `${held.tool} call ${held.key} completed but its result could not be recorded: ${messageOf(err)}. The agent got the true result; the record stays ${held.state} and recovery will probe it`,
      tenant: held.tenant, key: held.key, tool: held.tool, cause: err,
    });
    return resultBlock(call.toolUseId, content, false);
  }
  await rt.faults?.("after_record", { tool: held.tool, key: held.key, toolUseId: call.toolUseId });
  return resultBlock(call.toolUseId, content, false);
}

async function recordFailure(rt: Runtime, call: Call, held: CallRecord, err: unknown): Promise<ToolResultBlock> {
  const error = err instanceof EffectgateError ? err.message : errorMessage("EG_TOOL_FAILED", `${call.tool.name} failed: ${messageOf(err)}`);
  try {
    await rt.calls.update(held.tenant, held.key, held.version, { state: "failed", error, owner: null });
  } catch (recordErr) {
    rt.alert({
      code: "record_failed",
      message: `${held.tool} call ${held.key} failed (${messageOf(err)}) and the failure could not be recorded: ${messageOf(recordErr)}`,
      tenant: held.tenant, key: held.key, tool: held.tool, cause: recordErr,
    });
  }
  return resultBlock(call.toolUseId, error, true);
}

export async function sendToHuman(rt: Runtime, record: CallRecord, reason: string): Promise<CallRecord> {
  const parked = await rt.calls.update(record.tenant, record.key, record.version, { state: "needs_human", error: reason, owner: null });
  rt.alert({
    code: "needs_human",
    message: `${record.tool} call ${record.key} needs a person: ${reason}`,
    tenant: record.tenant, key: record.key, tool: record.tool,
  });
  return parked ?? (await rt.calls.get(record.tenant, record.key)) ?? record;
}

/** A reply that came after the call was handed to a human still settles it, never dropped. */
async function recordLateReply(rt: Runtime, parked: CallRecord, late: LateRun): Promise<void> {
  if (!late.value) return;
  try {
    const current = await rt.calls.get(parked.tenant, parked.key);
    if (current?.state !== "needs_human" && current?.state !== "uncertain") return;
    await rt.calls.update(current.tenant, current.key, current.version, {
      state: "completed", result: toJson(late.value.result), owner: null, error: "completed by a reply that arrived after the timeout",
    });
  } catch (err) {
    rt.alert({
      code: "record_failed",
      message: `a late reply for ${parked.tool} call ${parked.key} could not be recorded: ${messageOf(err)}`,
      tenant: parked.tenant, key: parked.key, tool: parked.tool, cause: err,
    });
  }
}

function lostRace(rt: Runtime, call: Call, record: CallRecord): ToolResultBlock {
  rt.alert({
    code: "record_lost_race",
    message: `${record.tool} call ${record.key} was taken over by another worker while this one was still on it`,
    tenant: record.tenant, key: record.key, tool: record.tool,
  });
  return errorResult(call.toolUseId, "EG_IN_PROGRESS",
    `another worker took this ${record.tool} call over; repeat this same call to get its result. Do not retry it under a new id.`);
}
