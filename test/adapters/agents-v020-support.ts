/**
 * The @openai/agents 0.20 tests' model and tool factory (the dev alias `openai-agents-v020`, Node 22
 * or later). The model is the SDK's own ScriptedModel, every step a `modelResponder` that reads the
 * request: it asks for each planned call (built with `functionCall`) until the request holds that
 * call's result, then answers with an `assistantMessage` naming every result. So it answers alike
 * however often one saved run is resumed.
 */
import type { FunctionTool } from "openai-agents-v020";
import { assistantMessage, functionCall, modelResponder, ScriptedModel, type RecordedModelCall } from "openai-agents-v020/testing";
import type { Gate } from "../../src/root/create-gate.js";
import { agentsTool, type AgentsToolOptions } from "../../src/openai-agents.js";
import type { AnyGateTool } from "../../src/adapters/openai-agents/types.js";

export interface PlannedCall {
  readonly callId: string;
  readonly name: string;
  readonly input: Record<string, unknown>;
}

/** Every function call result in a request, by call id, as text. */
function resultsOf(call: RecordedModelCall): Map<string, string> {
  const found = new Map<string, string>();
  const input = call.request.input;
  for (const item of Array.isArray(input) ? input : []) {
    if (item.type !== "function_call_result") continue;
    const output: unknown = item.output;
    const text = typeof output === "string" ? output
      : typeof output === "object" && output !== null && "text" in output ? String(output.text) : JSON.stringify(output);
    found.set(item.callId, text);
  }
  return found;
}

/** A ScriptedModel that asks for `calls` (in one turn, a parallel batch) and then reports their results; `turns` model calls at most. */
export function plannedModel(calls: readonly PlannedCall[], turns = 12): ScriptedModel {
  const respond = modelResponder((call) => {
    const results = resultsOf(call);
    const missing = calls.filter((c) => !results.has(c.callId));
    if (missing.length > 0) return missing.map((c) => functionCall(c.name, c.input, { callId: c.callId, id: `fc_${c.callId}` }));
    return [assistantMessage(calls.map((c) => `${c.name}: ${results.get(c.callId)}`).join("\n"), { id: "msg_final" })];
  });
  return new ScriptedModel(Array.from({ length: turns }, () => respond));
}

/**
 * The adapter's public entry (src/openai-agents.ts, `agentsTool`) with 0.20 as its SDK: the test
 * file that uses this substitutes the module `@openai/agents` with the 0.20 alias (vi.mock), so the
 * entry's own `import { tool } from "@openai/agents"` gets 0.20's. The casts bridge the two majors'
 * type declarations only.
 */
export function agentsTool020<C>(gate: Gate, gated: AnyGateTool, options: AgentsToolOptions<C>): FunctionTool<C> {
  return agentsTool(gate, gated, options) as unknown as FunctionTool<C>;
}
