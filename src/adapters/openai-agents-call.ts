/**
 * One SDK tool call through the gate, keyed by the SDK's own call id: the smallest piece every
 * adapter needs. The call becomes one Anthropic-shaped tool_use block, so it takes exactly the
 * path `runToolUses` takes (validate → ledger gate → governance → claim → execute → record) and
 * a replay of the same id is answered from the ledger without running the tool again.
 */
import { EffectgateError } from "../core/errors.js";
import type { ToolResultBlock } from "../core/blocks.js";
import type { Scope } from "../core/keys.js";
import type { Gate } from "../root/create-gate.js";

/** One call as an SDK hands it over: its id, the tool's name and the model's arguments. */
export interface SdkCall {
  readonly id: string;
  readonly name: string;
  readonly input: unknown;
}

/** Runs one SDK call through the gate and returns its single tool_result (never throws for a failing tool). */
export async function runSdkCall(gate: Gate, call: SdkCall, scope: Scope): Promise<ToolResultBlock> {
  const [result] = await gate.runToolUses([{ type: "tool_use", id: call.id, name: call.name, input: call.input }], scope);
  if (!result) throw new EffectgateError("EG_BAD_CONTENT", `the gate gave no result for ${call.name} call ${call.id}`);
  return result;
}
