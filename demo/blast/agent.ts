/**
 * The agent loop every level shares: ask the scripted model for the next turn, save a checkpoint
 * holding the pending tool_use blocks, hand the blocks to the level's tool layer, append the
 * results, save again. A worker started after a crash loads the checkpoint and answers the
 * pending blocks through the same layer: that is where levels differ.
 *
 * Each answered block is appended (synchronously, so a SIGKILL loses nothing already written)
 * to an outcome log: what the agent was told, and how long the call took. Those lines are what
 * the agent believes; the ground truth never comes from them.
 */
import { appendFileSync } from "node:fs";
import { performance } from "node:perf_hooks";
import { type CheckpointStore, fileCheckpoint, type Scope, type ToolResultBlock, type ToolUseBlock } from "effectgate";
import { canonicalJson } from "../text.js";
import type { Executor } from "./levels/types.js";
import { contentOf, nextTurn } from "./model.js";
import type { CallTimer } from "./timing.js";
import type { Task } from "./workload.js";

/** What the agent was told about a call. */
export type Belief =
  /** A result: the agent takes it as done. */
  | "done"
  /** An error saying it failed. */
  | "failed"
  /** Refused before anything ran (bad input, a policy). */
  | "refused"
  /** Told the outcome is not known yet: a person is on it, or another worker is. */
  | "unknown";

export interface CallOutcome {
  /** Which agent loop: "<role>/a", or "<role>/b" for the twin of a task run twice at once. */
  readonly loop: string;
  readonly task: string;
  readonly id: string;
  readonly tool: string;
  /** The business reference in the call's input ("" for none). */
  readonly ref: string;
  /** Canonical JSON of the input as the model sent it. */
  readonly input: string;
  readonly phase: "first" | "resume" | "redelivery";
  readonly belief: Belief;
  readonly totalMs: number;
  readonly downstreamMs: number;
  readonly content: string;
}

export function beliefOf(result: ToolResultBlock): Belief {
  if (!result.is_error) return "done";
  const code = /^(EG_[A-Z_]+)/.exec(result.content)?.[1];
  if (code === "EG_NEEDS_HUMAN" || code === "EG_IN_PROGRESS" || code === "EG_AWAITING_APPROVAL") return "unknown";
  if (code === "EG_INVALID_INPUT" || code === "EG_UNKNOWN_TOOL" || code === "EG_KEY_MISMATCH" || code === "EG_MALFORMED_BLOCK") return "refused";
  if (code !== undefined && /DENIED|QUOTA|BREAKER|KILL|APPROVAL|NOT_GRANTED|POLICY/.test(code)) return "refused";
  return "failed";
}

export interface LoopContext {
  readonly seed: number;
  readonly loop: string;
  readonly executor: Executor;
  readonly timer: CallTimer;
  readonly checkpointPath: string;
  readonly outcomeLog: string;
  /** Tells the crash hook which business reference a tool_use id carries. */
  readonly register: (block: ToolUseBlock) => void;
}

interface Message {
  readonly role: "user" | "assistant";
  readonly content: unknown;
}

/** Runs (or resumes) one task to its end. */
export async function runTask(task: Task, ctx: LoopContext): Promise<void> {
  const scope: Scope = { tenant: task.tenant, task: task.id };
  const store = demoCheckpoint(ctx.checkpointPath);
  const saved = await store.load();
  if (saved?.counters.done === 1) return;
  const messages: Message[] = saved ? (saved.messages as Message[]).slice() : [{ role: "user", content: `Task ${task.id} for ${task.customer} (${task.tenant}), a ${task.kind} request.` }];
  const answered = messages.filter((m, i) => i > 0 && m.role === "user").map((m) => m.content as ToolResultBlock[]);
  let redelivered = false;

  const answer = (blocks: readonly ToolUseBlock[], phase: CallOutcome["phase"]) =>
    Promise.all(blocks.map(async (block) => {
      ctx.register(block);
      const start = performance.now();
      const result = await ctx.executor.answer(block, scope);
      const end = performance.now();
      const input = block.input as Record<string, unknown>;
      const line: CallOutcome = {
        loop: ctx.loop, task: task.id, id: block.id, tool: block.name,
        ref: typeof input.reference === "string" ? input.reference : "",
        input: canonicalJson(input), phase, belief: beliefOf(result),
        totalMs: end - start, downstreamMs: ctx.timer.take(block.id, start, end), content: result.content.slice(0, 300),
      };
      appendFileSync(ctx.outcomeLog, `${JSON.stringify(line)}\n`);
      return result;
    }));

  const settle = async (content: unknown[], results: ToolResultBlock[]) => {
    messages.push({ role: "assistant", content }, { role: "user", content: results });
    answered.push(results);
    await store.save({ scope, messages, counters: { turns: answered.length }, pendingToolUse: null });
  };

  if (saved?.pendingToolUse) {
    const pending = saved.pendingToolUse.filter(isToolUse);
    await settle([...saved.pendingToolUse], await answer(pending, "resume"));
  }
  for (;;) {
    const turn = nextTurn(task, ctx.seed, answered);
    if (!turn) break;
    const content = contentOf(turn);
    await store.save({ scope, messages, counters: { turns: answered.length }, pendingToolUse: content });
    let results = await answer(turn.blocks, "first");
    if (!redelivered && task.redeliver !== null && turn.blocks.some((b) => (b.input as { reference?: unknown }).reference === task.redeliver)) {
      // The same assistant message reaches the tool layer a second time (a queue redelivering it).
      redelivered = true;
      results = await answer(turn.blocks, "redelivery");
    }
    await settle(content, results);
  }
  await store.save({ scope, messages, counters: { turns: answered.length, done: 1 }, pendingToolUse: null });
}

function isToolUse(value: unknown): value is ToolUseBlock {
  return typeof value === "object" && value !== null && (value as { type?: unknown }).type === "tool_use";
}

/**
 * A checkpoint file, replaced atomically but without fsync: the demo kills processes, not the
 * machine, and a few hundred fsyncs per level would only measure the disk.
 */
function demoCheckpoint(path: string): CheckpointStore {
  return fileCheckpoint(path, { durability: "process" });
}
