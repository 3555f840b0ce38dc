/**
 * The pipeline for one tool_use (DESIGN.md §2): validate → ledger gate → governance (kill
 * switch, grant, rate breaker, quota, dry-run + approval: src/governance/govern.ts) → claim →
 * execute → record. Reads skip everything after validation.
 */
import { EffectgateError, messageOf } from "../core/errors.js";
import { deriveKey, fingerprint, type Scope } from "../core/keys.js";
import { validate } from "../core/standard-schema.js";
import { redactInput, type AnyTool, type Json } from "../core/tool.js";
import type { CallRecord } from "../contracts/calls.js";
import { resultBlock, type ToolResultBlock, type ToolUseBlock } from "../core/blocks.js";
import { executeHeld, runWithTimeout, toJson } from "./execute.js";
import { classifyError, ToolTimeout } from "../core/outcome.js";
import { backoffMs, sleep } from "../core/policies.js";
import { isStaleHolder, resolveStale } from "./resolve.js";
import { inProgressResult, needsHumanResult, renderResult, replayRecord, singleFlight, type Call, type Runtime } from "./runtime.js";

/**
 * `override` (sagas, src/saga): run with this idempotency key instead of the tool's own key
 * strategy, and/or with this tool instead of the registered one of that name (a compensation hook).
 */
export async function runCall(
  rt: Runtime, block: ToolUseBlock, scope: Scope, override: { readonly key?: string; readonly tool?: AnyTool } = {},
): Promise<ToolResultBlock> {
  const fail = (message: string) => resultBlock(block.id, message, true);
  const tool = override.tool ?? rt.tools.get(block.name);
  if (!tool) {
    return fail(`EG_UNKNOWN_TOOL: there is no tool named ${JSON.stringify(block.name)}. Available tools: ${[...rt.tools.keys()].join(", ") || "none"}. Nothing was executed.`);
  }
  const checked = await validate(tool.input, block.input);
  if (!checked.ok) {
    return fail(`EG_INVALID_INPUT: the input for ${tool.name} does not match its schema: ${checked.issues.join("; ")}. Nothing was executed; fix the input and call again.`);
  }
  const call: Call = { tool, input: checked.value, hasInput: true, scope, toolUseId: block.id };
  // A read has no side effect to protect: it runs without touching the ledger, so it costs microseconds.
  if (tool.effect === "read") return runRead(rt, call);
  try {
    const key = override.key ?? keyFor(tool, checked.value, block, scope);
    const print = fingerprint(tool.name, block.input);
    const stored = redactInput(block.input, tool.redact);
    return await singleFlight(rt, scope.tenant, key, async () => {
      if (rt.governance) {
        // Steps 3–4 (src/governance): a call the ledger knows is answered from it, never governed again.
        const known = await rt.ledger.get(scope.tenant, key);
        if (known) return answerExisting(rt, call, print, known);
        const admitted = await rt.governance.admit({
          tool, input: checked.value, rawInput: block.input, storedInput: stored.value as Json, key, scope, toolUseId: block.id,
        });
        if (!admitted.ok) return fail(admitted.message);
      }
      const claim = await rt.ledger.claim({
        tenant: scope.tenant, key, tool: tool.name, effect: tool.effect, task: scope.task, toolUseId: block.id,
        fingerprint: print, input: stored.value as Json, inputRedacted: stored.redacted, owner: rt.owner, leaseMs: rt.leaseMs,
      });
      if (claim.claimed) return executeHeld(rt, call, claim.record);
      return answerExisting(rt, call, print, claim.record);
    });
  } catch (err) {
    // Only ledger trouble reaches here: the tool did not run (executeHeld never throws after it starts one).
    const message = err instanceof EffectgateError ? err.message : `EG_LEDGER_UNAVAILABLE: ${messageOf(err)}. Nothing was executed.`;
    return fail(message);
  }
}

/** The ledger already knows this key: replay, wait for its holder, or resolve it. Never a second blind run. */
async function answerExisting(rt: Runtime, call: Call, print: string, first: CallRecord): Promise<ToolResultBlock> {
  let record = first;
  const deadline = Date.now() + rt.waitMs;
  for (let pause = 2; ; pause = Math.min(pause * 2, 250)) {
    if (record.fingerprint !== print || record.tool !== call.tool.name) {
      return resultBlock(
        call.toolUseId,
        `EG_KEY_MISMATCH: idempotency key ${record.key} was first used by a ${record.tool} call with different input ` +
          `(tool_use ${record.toolUseId}); this call's input differs, so it was neither executed nor answered from that record. ` +
          `Use a new tool_use id for a different call.`,
        true,
      );
    }
    switch (record.state) {
      case "completed":
      case "failed":
      case "compensated":
      case "compensation_failed":
        rt.stats.replayed++;
        return replayRecord(call.toolUseId, record);
      case "needs_human":
        return needsHumanResult(call.toolUseId, record);
      case "uncertain":
      case "in_progress": {
        if (isStaleHolder(rt, record, await rt.ledger.now())) {
          const resolved = await resolveStale(rt, call, record, rt.policyFor(call.tool).probe.attempts);
          if (resolved.block) return resolved.block;
          break; // moved: read it again
        }
        if (Date.now() >= deadline) return inProgressResult(call.toolUseId, record, `held by another worker (${record.owner ?? "unknown"})`);
        await new Promise((resolve) => setTimeout(resolve, pause));
        break;
      }
    }
    const again = await rt.ledger.get(record.tenant, record.key);
    if (!again) throw new EffectgateError("EG_LEDGER_CORRUPT", `record ${record.tenant}/${record.key} vanished from ${rt.ledger.location}`);
    record = again;
  }
}

function keyFor(tool: AnyTool, input: unknown, block: ToolUseBlock, scope: Scope): string {
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
    const outcome = await runWithTimeout(call, { key: call.toolUseId, attempts: attempt }, policy.timeoutMs);
    if (outcome.status === "ok") return resultBlock(call.toolUseId, renderResult(toJson(outcome.value)), false);
    const why = outcome.status === "timeout" ? `no reply within ${policy.timeoutMs} ms` : messageOf(outcome.error);
    if (outcome.status === "timeout") outcome.controller.abort(new ToolTimeout(why));
    const kind = outcome.status === "timeout" ? "unknown" : classifyError(outcome.error);
    if (kind === "rejected" || kind === "failed" || attempt >= policy.retry.attempts) {
      const tries = attempt > 1 ? ` (after ${attempt} tries)` : "";
      return resultBlock(call.toolUseId, `EG_TOOL_FAILED: ${call.tool.name} failed${tries}: ${why}`, true);
    }
    await sleep(backoffMs(policy.retry, attempt - 1, rt.random));
  }
}
