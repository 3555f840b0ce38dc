/**
 * A fake model for the OpenAI Agents SDK, implementing the SDK's own `Model` interface (the
 * installed 0.14 line ships no `@openai/agents/testing`). It is a function of the request, not a
 * queue: it asks for each planned tool call until the request holds that call's result, then
 * answers with text naming every result. So it answers alike however often a saved run resumes.
 */
import { Usage, type Model, type ModelRequest, type ModelResponse } from "@openai/agents";

export interface PlannedCall {
  readonly callId: string;
  readonly name: string;
  readonly input: Record<string, unknown>;
}

/** Every function call result in a request, by call id. */
function resultsOf(request: ModelRequest): Map<string, string> {
  const found = new Map<string, string>();
  for (const item of Array.isArray(request.input) ? request.input : []) {
    if (item.type !== "function_call_result") continue;
    const output: unknown = item.output;
    const text = typeof output === "string" ? output
      : typeof output === "object" && output !== null && "text" in output ? String(output.text) : JSON.stringify(output);
    found.set(item.callId, text);
  }
  return found;
}

/** A model that asks for `calls` (in one turn, as a parallel batch) and then reports their results. */
export function plannedModel(calls: readonly PlannedCall[]): Model & { readonly requests: number } {
  let requests = 0;
  return {
    get requests() {
      return requests;
    },
    async getResponse(request: ModelRequest): Promise<ModelResponse> {
      requests++;
      const results = resultsOf(request);
      const missing = calls.filter((c) => !results.has(c.callId));
      if (missing.length > 0) {
        return {
          usage: new Usage(),
          output: missing.map((c) => ({
            type: "function_call" as const, id: `fc_${c.callId}`, callId: c.callId, name: c.name, arguments: JSON.stringify(c.input), status: "completed" as const,
          })),
        };
      }
      const text = calls.map((c) => `${c.name}: ${results.get(c.callId)}`).join("\n");
      return {
        usage: new Usage(),
        output: [{ type: "message", id: "msg_final", role: "assistant", status: "completed", content: [{ type: "output_text", text }] }],
      };
    },
    async *getStreamedResponse() {
      throw new Error("the fake model does not stream");
    },
  };
}
