/**
 * What the model reads for a tool result (the AI SDK's `toModelOutput`). The tool's output itself
 * keeps its shape (the program reads it as the tool returned it); where the repeats policy
 * answered a call with an earlier call's result, the model is also told that it was not run.
 */
import { renderResult } from "../../core/blocks.js";
import { toJson } from "../../core/json.js";
import { collapsedPreamble } from "../../core/repeats.js";

/** A tool result as the model gets it (the SDK's ToolResultOutput, as far as the adapter reads it). */
type ModelOutput =
  | { readonly type: "text"; readonly value: string }
  | { readonly type: "json"; readonly value: unknown }
  | { readonly type: "content"; readonly value: readonly unknown[] }
  | { readonly type: string; readonly value?: unknown };

export type ToModelOutput = (options: { readonly toolCallId: string; readonly input: unknown; readonly output: unknown }) => unknown;

// The SDK converts a result right after execute, in the same step; later conversions of a
// conversation rebuilt from stored messages fall back to the result alone.
const KEPT = 1000;

/** The lines for collapsed calls, by toolCallId, until the SDK converts their results (the oldest go first past KEPT). */
export class CollapsedCalls {
  private readonly said = new Map<string, string>();

  note(toolCallId: string, said: string): void {
    this.said.set(toolCallId, said);
    if (this.said.size > KEPT) this.said.delete(this.said.keys().next().value as string);
  }

  get(toolCallId: string): string | undefined {
    return this.said.get(toolCallId);
  }
}

/** The SDK's own default: text for a string, JSON for anything else. */
function defaultOutput(output: unknown): ModelOutput {
  return typeof output === "string" ? { type: "text", value: output } : { type: "json", value: output === undefined ? null : output };
}

/** A toModelOutput that runs the tool's own (or the SDK's default) and puts the collapsed line before it. */
export function modelOutputWith(own: ToModelOutput | undefined, collapsed: CollapsedCalls | undefined) {
  return async (options: { readonly toolCallId: string; readonly input: unknown; readonly output: unknown }): Promise<ModelOutput> => {
    const output = (own ? await own(options) : defaultOutput(options.output)) as ModelOutput;
    const said = collapsed?.get(options.toolCallId);
    if (said === undefined) return output;
    const line = collapsedPreamble(said);
    switch (output.type) {
      case "text":
        return { type: "text", value: line + String(output.value) };
      case "json":
        return { type: "text", value: line + renderResult(toJson(output.value)) };
      case "content":
        return { type: "content", value: [{ type: "text", text: line.trimEnd() }, ...(output.value as readonly unknown[])] };
      default:
        return output; // an error or a denial: not a result the repeat gave
    }
  };
}
