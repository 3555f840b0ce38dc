/**
 * The pipeline for one tool_use (DESIGN.md §2), in this order:
 *
 *   1. validate the block's tool and input (schema)       → clear error, nothing executed
 *   2. reads run at once, outside the ledger              (retried with jittered backoff)
 *   3. ledger gate: a key the ledger knows is answered from it (replay, wait, or resolve)
 *   4. governance (the Governor: kill switch, grant, breaker, quota, dry-run + approval)
 *   5. claim the key durably (in_progress), then execute with a timeout (execute.ts)
 *   6. record the outcome durably (execute.ts)
 */
import { EffectgateError, messageOf } from "../core/errors.js";
import { deriveKey, fingerprint, keyTooLong, type Scope } from "../core/keys.js";
import { validate } from "../core/standard-schema.js";
import { ledgerIdentity, redactInput, type AnyTool } from "../core/tool.js";
import { toJson, type Json } from "../core/json.js";
import { isSettled } from "../core/states.js";
import type { CallRecord } from "../contracts/calls.js";
import { errorResult, renderResult, resultBlock, type ToolResultBlock, type ToolUseBlock } from "../core/blocks.js";
import { classifyError, ToolTimeout } from "../core/outcome.js";
import { backoffMs } from "../core/policies.js";
import { sleepOn } from "../core/time.js";
import { executeHeld, NEVER_STARTED, runWithTimeout } from "./execute.js";
import { waitForHolder } from "./holder.js";
import { resolveStale } from "./resolve.js";
import { ownUnansweredClaim } from "./known.js";
import type { CallNote } from "./observe.js";
import { flushKept } from "./record.js";
import { repeatMethods, runUnlessRepeated } from "./repeats.js";
import { intentOf, repeatPolicyOf } from "../core/repeats.js";
import { inflightId, inProgressResult, needsHumanResult, noteApproval, replayRecord, singleFlight, type Call, type Runtime } from "./runtime.js";

/** Runs a call with this idempotency key instead of the tool's own key strategy, and/or with this tool instead of the registered one of that name. */
export interface CallOverride {
  readonly key?: string;
  readonly tool?: AnyTool;
  /** Where the call's progress is noted for the gate's observers. */
  readonly note?: CallNote;
}

export async function runCall(rt: Runtime, block: ToolUseBlock, scope: Scope, override: CallOverride = {}): Promise<ToolResultBlock> {
  const tool = override.tool ?? rt.tools.get(block.name);
  if (!tool) {
    return await answeredFromLedger(rt, block, scope, undefined) ?? errorResult(block.id, "EG_UNKNOWN_TOOL",
      `there is no tool named ${JSON.stringify(block.name)}. Available tools: ${[...rt.tools.keys()].join(", ") || "none"}. Nothing was executed.`);
  }
  const checked = await validate(tool.input, block.input);
  if (!checked.ok && checked.threw !== undefined) {
    return await answeredFromLedger(rt, block, scope, tool) ?? errorResult(block.id, "EG_INVALID_INPUT",
      `the input schema of ${tool.name} threw while validating (${checked.threw}). Nothing was executed.`);
  }
  if (!checked.ok) {
    return await answeredFromLedger(rt, block, scope, tool) ?? errorResult(block.id, "EG_INVALID_INPUT",
      `the input for ${tool.name} does not match its schema: ${checked.issues.join("; ")}. Nothing was executed; fix the input and call again.`);
  }
  const call: Call = { tool, input: checked.value, hasInput: true, scope, toolUseId: block.id, ...(override.note ? { note: override.note } : {}) };
  // A read has no side effect to protect: it runs without touching the ledger, so it costs microseconds.
  if (tool.effect === "read") return runRead(rt, call);
  try {
    const key = override.key ?? keyFor(tool, checked.value, block, scope);
    if (override.note) override.note.key = key;
    const print = fingerprint(ledgerIdentity(tool), block.input);
    const stored = redactInput(block.input, tool.redact);
    // Longer than any ledger keeps: refused before governance and the claim, unless the ledger already holds it (from before the limit).
    const tooLong = keyTooLong({ tenant: scope.tenant, task: scope.task, key });
    if (tooLong) return await rt.calls.get(scope.tenant, key).then((held) => (held ? answerExisting(rt, call, print, held) : resultBlock(block.id, tooLong.message, true)));
    return await singleFlight(rt, scope.tenant, key, async () => {
      // What this gate knows and its ledger may not show: never answered by running the tool again.
      // Memory is no shortcut around the checks: a kept answer is another call's unless its fingerprint and tool are this one's.
      const kept = await flushKept(rt, scope.tenant, key);
      if (kept) return mismatch(call, print, kept.record) ?? kept.block;
      const unanswered = await ownUnansweredClaim(rt, scope.tenant, key);
      if (unanswered) return unanswered.record.fingerprint === print ? executeHeld(rt, call, unanswered.record, unanswered.confirmedAt, NEVER_STARTED) : answerExisting(rt, call, print, unanswered.record);
      const repeats = repeatPolicyOf(tool);
      const request = {
        tenant: scope.tenant, key, tool: tool.name, effect: tool.effect, task: scope.task, toolUseId: block.id,
        fingerprint: print, input: stored.value as Json, inputRedacted: stored.redacted, owner: rt.owner, leaseMs: rt.leaseMs,
        // Only a tool with an intent window compares intents; for the rest the fingerprint stands for it.
        ...(repeats ? { intent: intentOf(ledgerIdentity(tool), checked.value) } : {}),
      };
      const claimed = async <T>(write: () => Promise<T>): Promise<T> => {
        try {
          return await write();
        } catch (err) {
          // The INSERT may have committed with its reply lost: the record, if there is one, is ours and its tool never started.
          rt.known.set(inflightId({ tenant: scope.tenant, key }), { kind: "claim_unanswered" });
          throw err;
        }
      };
      const governed = rt.governor ? { tool, input: checked.value, rawInput: block.input, storedInput: stored.value as Json, key, scope, toolUseId: block.id } : undefined;
      const repeatStore = repeats && repeatMethods(rt.calls);
      if (repeats && repeatStore) {
        return runUnlessRepeated(rt, call, {
          request, policy: repeats, store: repeatStore, governed, claimed,
          answerExisting: (record) => answerExisting(rt, call, print, record),
        });
      }
      if (rt.governor && governed) {
        const claimUnlessHalted = rt.calls.claimUnlessHalted?.bind(rt.calls);
        const killSwitch = claimUnlessHalted ? rt.governor.killSwitchOnly?.(governed) : undefined;
        if (killSwitch && claimUnlessHalted) {
          // The kill switch is checked by the claim itself: one ledger write, no read. "Halted" is governed again in full below.
          const confirmedAt = rt.time.monotonic();
          const first = await claimed(() => claimUnlessHalted(request, killSwitch.agent));
          if (first.claimed) return executeHeld(rt, call, first.record, confirmedAt, NEVER_STARTED);
          if (!("halted" in first)) return answerExisting(rt, call, print, first.record);
        }
        if (rt.governor.admitsByReadingOnly?.(governed) === true) {
          // Governing it changes nothing, so it is governed first and the claim finds a known key; a refused call the ledger knows is still answered from it.
          const admitted = await rt.governor.admit(governed);
          noteApproval(call, admitted);
          if (!admitted.ok) {
            const known = await rt.calls.get(scope.tenant, key);
            return known ? answerExisting(rt, call, print, known) : resultBlock(block.id, admitted.message, true);
          }
        } else {
          // A call the ledger knows is answered from it, never governed again (no quota charged twice, no second approval).
          const known = await rt.calls.get(scope.tenant, key);
          if (known) return answerExisting(rt, call, print, known);
          const admitted = await rt.governor.admit(governed);
          noteApproval(call, admitted);
          if (!admitted.ok) return resultBlock(block.id, admitted.message, true);
        }
      }
      const confirmedAt = rt.time.monotonic();
      const claim = await claimed(() => rt.calls.claim(request));
      if (claim.claimed) return executeHeld(rt, call, claim.record, confirmedAt, NEVER_STARTED);
      return answerExisting(rt, call, print, claim.record);
    });
  } catch (err) {
    // Only ledger trouble reaches here: this request did not start the tool (executeHeld never throws after it starts one),
    // but an earlier request may have: never say that nothing was executed.
    if (err instanceof EffectgateError) return resultBlock(block.id, err.message, true);
    return errorResult(block.id, "EG_LEDGER_UNAVAILABLE", `${messageOf(err)}. The tool was not started by this request; replay this same call to run it or get its outcome.`);
  }
}

/** The ledger already knows this key: replay, wait for its holder, or resolve it. Never a second blind run. */
async function answerExisting(rt: Runtime, call: Call, print: string, first: CallRecord): Promise<ToolResultBlock> {
  let record = first;
  const deadline = rt.time.monotonic() + rt.waitMs;
  for (;;) {
    const mismatched = mismatch(call, print, record);
    if (mismatched) return mismatched;
    if (isSettled(record.state)) return replayed(rt, call, record);
    if (record.state === "needs_human") return needsHumanResult(call.toolUseId, record);
    const waited = await waitForHolder(rt, record, deadline);
    if (waited.kind === "gone") throw new EffectgateError("EG_LEDGER_CORRUPT", `record ${record.tenant}/${record.key} vanished from ${rt.calls.location}`);
    if (waited.kind === "live") return inProgressResult(call.toolUseId, waited.record, `held by another worker (${waited.record.owner ?? "unknown"})`);
    if (waited.kind === "stale") {
      const resolved = await resolveStale(rt, call, waited.record, { probeRounds: rt.policyFor(call.tool).probe.attempts });
      if (resolved.block) return resolved.block;
      // moved: read it again
      const again = await rt.calls.get(record.tenant, record.key);
      if (!again) throw new EffectgateError("EG_LEDGER_CORRUPT", `record ${record.tenant}/${record.key} vanished from ${rt.calls.location}`);
      record = again;
      continue;
    }
    record = waited.record;
  }
}

/** EG_KEY_MISMATCH when `record` (found under this call's key) is another call's: other input, or another tool. */
function mismatch(call: { readonly toolUseId: string; readonly tool: { readonly name: string } }, print: string, record: Pick<CallRecord, "fingerprint" | "tool" | "key" | "toolUseId">): ToolResultBlock | undefined {
  if (record.fingerprint === print && record.tool === call.tool.name) return undefined;
  return errorResult(call.toolUseId, "EG_KEY_MISMATCH",
    `idempotency key ${record.key} was first used by a call of ${record.tool} with different input ` +
      `(tool_use ${record.toolUseId}); this call's input differs, so it was neither executed nor answered from that record. ` +
      `Use a new tool_use id for a different call.`);
}

/** A settled record's verbatim answer, counted as a replay. */
function replayed(rt: Runtime, call: Pick<Call, "toolUseId" | "note">, record: CallRecord): ToolResultBlock {
  rt.stats.replayed++;
  if (call.note) {
    call.note.replayed = true;
    call.note.state = record.state;
    call.note.recorded = record;
  }
  return replayRecord(call.toolUseId, record);
}

/**
 * A call the ledger holds is answered from its record, whatever today's tool list or schema says
 * (a tool renamed, a schema tightened, a date check now in the past): looked up only on this error
 * path, under the keys the call could have had, so the fast path stays one write. Undefined when
 * the ledger holds no such call (the validation error is then the truth: nothing was executed).
 */
async function answeredFromLedger(rt: Runtime, block: ToolUseBlock, scope: Scope, tool: AnyTool | undefined): Promise<ToolResultBlock | undefined> {
  const print = fingerprint(tool ? ledgerIdentity(tool) : block.name, block.input);
  const call = { toolUseId: block.id, tool: { name: block.name } };
  try {
    for (const key of possibleKeys(block, scope, tool)) {
      const record = await rt.calls.get(scope.tenant, key);
      if (!record || mismatch(call, print, record)) continue;
      if (isSettled(record.state)) return replayed(rt, call, record);
      if (record.state === "needs_human") return needsHumanResult(block.id, record);
      return inProgressResult(block.id, record,
        `known to the ledger (${record.state}), but its tool or schema has changed here since it was made, so this worker cannot take it on`);
    }
  } catch (err) {
    return errorResult(block.id, "EG_LEDGER_UNAVAILABLE",
      `this ${block.name} call cannot run here (its tool or input is refused), and the ledger could not be read to tell whether it ran before (${messageOf(err)}). ` +
        "Replay this same call once the ledger is reachable.");
  }
  return undefined;
}

/** The keys a call could have been recorded under: its tool's strategy when the tool is known (a key function given the raw input), else the tool_use id and the derived key. */
function possibleKeys(block: ToolUseBlock, scope: Scope, tool: AnyTool | undefined): string[] {
  if (!tool) return [...new Set([block.id, deriveKey(scope, block.name, block.input)])];
  try {
    return [keyFor(tool, block.input, block, scope)];
  } catch {
    return [];
  }
}

/** The call's idempotency key by its tool's key strategy (exported for prepare.ts, which adapters use). */
export function keyFor(tool: AnyTool, input: unknown, block: ToolUseBlock, scope: Scope): string {
  if (tool.key === "tool_use_id") return block.id;
  if (tool.key === "derived") return deriveKey(scope, tool.name, block.input);
  const key = tool.key(input, { toolUseId: block.id, scope });
  if (typeof key !== "string" || key === "") {
    throw new EffectgateError("EG_BAD_TOOL_DEFINITION", `${tool.name}'s key function returned ${JSON.stringify(key)}; it must return a non-empty string`);
  }
  return key;
}

/** Reads run outside the ledger, retried with full-jitter backoff on anything but a definite rejection. */
async function runRead(rt: Runtime, call: Call): Promise<ToolResultBlock> {
  const policy = rt.policyFor(call.tool);
  for (let attempt = 1; ; attempt++) {
    rt.stats.executed++;
    if (call.note) call.note.executed = true;
    const outcome = await runWithTimeout(rt.time, call, { key: call.toolUseId, attempts: attempt, fence: 0 }, policy.timeoutMs);
    if (outcome.status === "ok") return resultBlock(call.toolUseId, renderResult(toJson(outcome.value)), false);
    const why = outcome.status === "timeout" ? `no reply within ${policy.timeoutMs} ms` : messageOf(outcome.error);
    if (outcome.status === "timeout") outcome.controller.abort(new ToolTimeout(why));
    const kind = outcome.status === "timeout" ? "unknown" : classifyError(outcome.error);
    if (kind === "rejected" || kind === "failed" || attempt >= policy.retry.attempts) {
      const tries = attempt > 1 ? ` (after ${attempt} tries)` : "";
      return errorResult(call.toolUseId, "EG_TOOL_FAILED", `${call.tool.name} failed${tries}: ${why}`);
    }
    await sleepOn(rt.time, backoffMs(policy.retry, attempt - 1, rt.random));
  }
}
