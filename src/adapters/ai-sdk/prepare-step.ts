/**
 * A `prepareStep` for generateText / streamText that offers the model only the tools that can
 * run now: the write and destructive tools a kill switch, a missing grant or an open rate
 * breaker stops are left out of `activeTools`, so the model is not invited to call them (a call
 * that slips through is still refused by the gate).
 */
import type { Gate } from "../../root/create-gate.js";
import type { AiSdkScope } from "./types.js";

export interface StepInfo {
  readonly messages?: readonly unknown[];
  /** v6 */
  readonly experimental_context?: unknown;
  /** v7 */
  readonly runtimeContext?: unknown;
}

/** `prepareStep: dropStoppedTools(gate, tools, { scope })`; wrap it to combine with your own prepareStep. */
export function dropStoppedTools<Name extends string, Context = unknown>(gate: Gate, tools: Readonly<Record<Name, unknown>>, options: { readonly scope: AiSdkScope<Context> }) {
  const names = Object.keys(tools) as Name[];
  return async (step: StepInfo): Promise<{ activeTools: Name[] }> => {
    const context = (step.experimental_context !== undefined ? step.experimental_context : step.runtimeContext) as Context | undefined;
    const scope = await options.scope({ messages: step.messages ?? [], context });
    const stopped = new Set((await gate.stoppedTools(scope)).map((s) => s.tool));
    return { activeTools: names.filter((name) => !stopped.has(name)) };
  };
}
