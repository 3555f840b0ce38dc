/**
 * The scripted "model": it emits Anthropic-shaped assistant turns (a text block and tool_use
 * blocks) for a task, and reacts to the tool results the way the script says, with no network
 * model. Pure: the next turn is a function of the task, the seed and the results so far, so a
 * resumed worker and a twin worker see exactly the turns the first one saw, with the same ids.
 *
 * Reactions:
 * - a hallucinated call answered with an error is sent again with the intended parameters
 *   (a new tool_use id, same business reference); answered with success, it is left as it is;
 * - in an order, a failed reserve, charge or shipment ends the task (the model gives up);
 * - a runaway loop keeps deleting drafts whatever it is told.
 */
import { createHash } from "node:crypto";
import type { ToolResultBlock, ToolUseBlock } from "effectgate";
import { SAGA_STEPS, type Input, type Step, type Task } from "./workload.js";

export interface Turn {
  /** Index of this assistant message in the task's conversation. */
  readonly emission: number;
  readonly text: string;
  readonly blocks: readonly ToolUseBlock[];
}

/** The assistant message content for a turn, as the Messages API shapes it. */
export function contentOf(turn: Turn): unknown[] {
  return [{ type: "text", text: turn.text }, ...turn.blocks];
}

/** The next turn, or null when the task is over. `answered[i]` are the tool results of turn i. */
export function nextTurn(task: Task, seed: number, answered: readonly (readonly ToolResultBlock[])[]): Turn | null {
  const run = script(task, seed);
  let at = run.next();
  for (const results of answered) {
    if (at.done) return null;
    at = run.next(results);
  }
  return at.done ? null : at.value;
}

/** The first turn of every task: look the customer up (a read). */
export function lookupRef(task: Task): string {
  return `${task.id}/lookup`;
}

function* script(task: Task, seed: number): Generator<Turn, void, readonly ToolResultBlock[]> {
  let emission = 0;
  const turn = (text: string, calls: readonly { tool: string; input: Input }[]): Turn => {
    const n = emission++;
    const blocks = calls.map((call, i): ToolUseBlock => ({ type: "tool_use", id: toolUseId(seed, task.id, n, i), name: call.tool, input: { ...call.input } }));
    return { emission: n, text, blocks };
  };
  yield turn(`Let me look up ${task.customer} first.`, [{ tool: "lookup_customer", input: { customer: task.customer, reference: lookupRef(task) } }]);

  for (const planned of task.turns) {
    const bad = planned.find((s) => s.ref === task.hallucinate?.ref);
    const first = yield turn(say(planned), planned.map((s) => ({ tool: s.tool, input: s === bad && task.hallucinate ? task.hallucinate.bad : s.input })));
    const outcome = new Map<Step, boolean>(planned.map((s, i) => [s, first[i]?.is_error !== true]));
    if (bad && outcome.get(bad) === false) {
      const [again] = yield turn(`That was wrong: ${task.hallucinate?.what}. Sending it again correctly.`, [{ tool: bad.tool, input: bad.input }]);
      outcome.set(bad, again?.is_error !== true);
    }
    const sagaFailed = task.kind === "order" && planned.some((s) => SAGA_STEPS.has(s.tool) && outcome.get(s) === false);
    if (sagaFailed) return;
  }
}

function say(steps: readonly Step[]): string {
  return steps.map((s) => `Calling ${s.tool} for ${s.ref}.`).join(" ");
}

/** A tool_use id shaped like Anthropic's ("toolu_01" + 22 characters), fixed by seed, task, turn and block. */
export function toolUseId(seed: number, task: string, emission: number, block: number): string {
  const memo = `${seed}/${task}/${emission}/${block}`;
  const known = ids.get(memo);
  if (known !== undefined) return known;
  const digest = createHash("sha256").update(`${seed}\u0000${task}\u0000${emission}\u0000${block}`).digest("base64url");
  const id = `toolu_01${digest.replace(/[-_]/g, "x").slice(0, 22)}`;
  ids.set(memo, id);
  return id;
}

const ids = new Map<string, string>();
