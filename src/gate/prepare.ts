/**
 * A call looked at before (or beside) running it: its tool, parsed input and idempotency key,
 * exactly as the pipeline computes them. Adapters use it to ask governance about a call (is it
 * approved?) and to find its ledger record, without running anything.
 */
import type { ToolUseBlock } from "../core/blocks.js";
import { isEffectgateError } from "../core/errors.js";
import type { Scope } from "../core/keys.js";
import { validate } from "../core/standard-schema.js";
import { redactInput, type AnyTool } from "../core/tool.js";
import type { Json } from "../core/json.js";
import type { GovernedCall } from "./governor.js";
import { keyFor } from "./pipeline.js";

/**
 * The call as governance would see it, or why it would never get there (unknown tool, input the
 * schema refuses, a key function that fails): such a call is answered with an error by the
 * pipeline, so there is nothing to approve.
 */
export type PreparedCall =
  | { readonly ok: true; readonly call: GovernedCall }
  | { readonly ok: false; readonly problem: string };

export async function prepareCall(tools: ReadonlyMap<string, AnyTool>, block: ToolUseBlock, scope: Scope): Promise<PreparedCall> {
  const tool = tools.get(block.name);
  if (!tool) return { ok: false, problem: `there is no tool named ${JSON.stringify(block.name)}` };
  const checked = await validate(tool.input, block.input);
  if (!checked.ok) return { ok: false, problem: `the input for ${tool.name} does not match its schema: ${checked.issues.join("; ")}` };
  let key: string;
  try {
    key = keyFor(tool, checked.value, block, scope);
  } catch (err) {
    if (isEffectgateError(err)) return { ok: false, problem: err.message };
    throw err;
  }
  const stored = redactInput(block.input, tool.redact);
  return {
    ok: true,
    call: { tool, input: checked.value, rawInput: block.input, storedInput: stored.value as Json, key, scope, toolUseId: block.id },
  };
}
