/**
 * Runs a tool for a call this gate holds (claimed or taken over) and records the outcome.
 * The claim is durable before this runs; the outcome is durable before it returns, except
 * when recording fails: then the agent still gets the true result and an operator alert is raised.
 */
import { inspect } from "node:util";
import { EffectgateError, messageOf } from "../core/errors.js";
import type { Json, ToolContext } from "../core/tool.js";
import type { CallRecord } from "../ledger/contract.js";
import { resultBlock, type ToolResultBlock } from "./blocks.js";
import { inflightId, renderResult, type Call, type Runtime } from "./runtime.js";

export async function executeHeld(rt: Runtime, call: Call, held: CallRecord): Promise<ToolResultBlock> {
  const id = inflightId(held);
  let finish!: () => void;
  rt.inflight.set(id, new Promise<void>((resolve) => (finish = resolve)));
  const controller = new AbortController();
  // Keep the lease alive while the tool runs, so no other worker takes a live call over.
  const heartbeat = setInterval(() => {
    rt.ledger.renewLease(held.tenant, held.key, held.version, rt.owner, rt.leaseMs).catch(() => {
      // A failed renewal only shortens the lease; the outcome write below reports real trouble.
    });
  }, Math.max(10, Math.floor(rt.leaseMs / 3)));
  heartbeat.unref();
  try {
    const ctx: ToolContext = {
      idempotencyKey: held.key,
      toolUseId: call.toolUseId,
      scope: call.scope,
      signal: controller.signal,
      attempt: held.attempts,
    };
    const where = { tool: held.tool, key: held.key, toolUseId: call.toolUseId };
    await rt.faults?.("after_claim", where);
    rt.stats.executed++;
    let value: unknown;
    try {
      value = await call.tool.execute(call.input, ctx);
    } catch (err) {
      clearInterval(heartbeat);
      return await recordFailure(rt, call, held, err);
    }
    clearInterval(heartbeat);
    await rt.faults?.("after_execute", where);
    const result = toJson(value);
    const content = renderResult(result);
    try {
      const recorded = await rt.ledger.update(held.tenant, held.key, held.version, { state: "completed", result, owner: null });
      if (!recorded) {
        rt.alert({
          code: "record_lost_race",
          message: `${held.tool} call ${held.key} completed, but another worker took it over before its result was recorded; check that worker's probe outcome`,
          tenant: held.tenant, key: held.key, tool: held.tool,
        });
      }
    } catch (err) {
      rt.alert({
        code: "record_failed",
        message: `${held.tool} call ${held.key} completed but its result could not be recorded: ${messageOf(err)}. The agent got the true result; the record stays in_progress and recovery will probe it`,
        tenant: held.tenant, key: held.key, tool: held.tool, cause: err,
      });
      return resultBlock(call.toolUseId, content, false);
    }
    await rt.faults?.("after_record", where);
    return resultBlock(call.toolUseId, content, false);
  } finally {
    clearInterval(heartbeat);
    rt.inflight.delete(id);
    finish();
  }
}

async function recordFailure(rt: Runtime, call: Call, held: CallRecord, err: unknown): Promise<ToolResultBlock> {
  const error = err instanceof EffectgateError ? err.message : `EG_TOOL_FAILED: ${call.tool.name} failed: ${messageOf(err)}`;
  try {
    await rt.ledger.update(held.tenant, held.key, held.version, { state: "failed", error, owner: null });
  } catch (recordErr) {
    rt.alert({
      code: "record_failed",
      message: `${held.tool} call ${held.key} failed (${messageOf(err)}) and the failure could not be recorded: ${messageOf(recordErr)}`,
      tenant: held.tenant, key: held.key, tool: held.tool, cause: recordErr,
    });
  }
  return resultBlock(call.toolUseId, error, true);
}

/** A tool's return value as stored JSON (undefined → null; non-JSON values as JSON would write them). */
export function toJson(value: unknown): Json {
  if (value === undefined) return null;
  try {
    const text = JSON.stringify(value);
    return text === undefined ? null : (JSON.parse(text) as Json);
  } catch {
    // The effect happened; a result we cannot store as JSON (a BigInt, a cycle) must not turn into an error.
    return inspect(value, { depth: 4 });
  }
}
