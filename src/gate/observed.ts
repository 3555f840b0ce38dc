/** Runs one call under the gate's observers (observe.ts): each is told it started, may run it in its context, and is told how it ended. */
import type { ToolResultBlock, ToolUseBlock } from "../core/blocks.js";
import type { Scope } from "../core/keys.js";
import { CallNote, outcomeOf, type CallObservation, type GateObserver } from "./observe.js";
import { runCall, type CallOverride } from "./pipeline.js";
import type { Runtime } from "./runtime.js";

/** An observer's own failure is never the call's: it is dropped. */
function quietly<T>(fn: () => T): T | undefined {
  try {
    return fn();
  } catch {
    return undefined;
  }
}

export async function runObserved(
  rt: Runtime, observers: readonly GateObserver[], block: ToolUseBlock, scope: Scope, override: CallOverride = {},
): Promise<ToolResultBlock> {
  const tool = override.tool ?? rt.tools.get(block.name);
  const seen = { tool: block.name, effect: tool?.effect, toolUseId: block.id, tenant: scope.tenant, task: scope.task, agent: scope.agent };
  const observations: CallObservation[] = [];
  for (const observer of observers) {
    const observation = quietly(() => observer.callStarted?.(seen));
    if (observation) observations.push(observation);
  }
  // The caller's own note (gate.runTool reads it afterwards), or one for the observers alone.
  const note = override.note ?? new CallNote();
  const started = rt.time.monotonic();
  let work = () => runCall(rt, block, scope, { ...override, note });
  for (const observation of observations) {
    const inner = work;
    if (observation.within) work = () => observation.within!(inner);
  }
  const answer = await work();
  const outcome = outcomeOf(note, answer, rt.time.monotonic() - started);
  for (const observation of observations) quietly(() => observation.end(outcome));
  return answer;
}
