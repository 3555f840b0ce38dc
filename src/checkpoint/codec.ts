/**
 * The agent loop's state, saved so a killed run resumes where it stopped. The pending
 * tool_use content is what the model asked for last; on resume it is answered through the
 * ledger, so a call that already ran is not run again.
 */
import { z } from "zod";
import { EffectgateError } from "../core/errors.js";
import type { Scope } from "../core/keys.js";

export interface AgentCheckpoint {
  readonly scope: Scope;
  /** The conversation so far, in whatever message shape the agent loop uses. */
  readonly messages: readonly unknown[];
  /** Loop counters (turns, tokens, …). */
  readonly counters: Readonly<Record<string, number>>;
  /** The assistant content whose tool_use blocks have not been answered yet; null when none. */
  readonly pendingToolUse: readonly unknown[] | null;
}

export interface CheckpointStore {
  /** Where it lives, for messages. */
  readonly location: string;
  /** The saved state, or undefined when nothing was ever saved. Damage throws EG_CHECKPOINT_CORRUPT. */
  load(): Promise<AgentCheckpoint | undefined>;
  /** Replaces the saved state atomically: a reader sees the old state or the new one, never a mix. */
  save(checkpoint: AgentCheckpoint): Promise<void>;
}

const checkpointSchema = z.object({
  format: z.literal("effectgate.checkpoint/1"),
  scope: z.object({ tenant: z.string().min(1), task: z.string().min(1), agent: z.string().optional(), session: z.string().min(1).optional(), saga: z.string().min(1).optional() }),
  messages: z.array(z.unknown()),
  counters: z.record(z.string(), z.number()),
  pendingToolUse: z.array(z.unknown()).nullable(),
});

export function encodeCheckpoint(checkpoint: AgentCheckpoint): string {
  return JSON.stringify({ format: "effectgate.checkpoint/1", ...checkpoint });
}

export function decodeCheckpoint(text: string, location: string): AgentCheckpoint {
  const damaged = (what: string, cause?: unknown) =>
    new EffectgateError(
      "EG_CHECKPOINT_CORRUPT",
      `the checkpoint at ${location} is damaged (${what}). It was left as it is and nothing was resumed. ` +
        `Restore it from a backup, or move it aside to start the task afresh (calls already made stay in the ledger and are not repeated).`,
      cause === undefined ? undefined : { cause },
    );
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (err) {
    throw damaged(`not valid JSON: ${(err as Error).message}`, err);
  }
  const parsed = checkpointSchema.safeParse(raw);
  if (!parsed.success) {
    throw damaged(parsed.error.issues.map((i) => `${i.path.join(".") || "(root)"}: ${i.message}`).join("; "));
  }
  const { scope, messages, counters, pendingToolUse } = parsed.data;
  return {
    scope: {
      tenant: scope.tenant, task: scope.task,
      ...(scope.agent === undefined ? {} : { agent: scope.agent }),
      ...(scope.session === undefined ? {} : { session: scope.session }),
      // A pending call tagged with a saga is answered inside its saga on resume (docs/sagas.md).
      ...(scope.saga === undefined ? {} : { saga: scope.saga }),
    },
    messages, counters, pendingToolUse,
  };
}
