/**
 * A checkpoint as text: versioned JSON, checked field by field when read, so a damaged one is
 * refused by name (EG_CHECKPOINT_CORRUPT) instead of resuming the wrong task. The pending
 * tool_use content is what the model asked for last; on resume it is answered through the
 * ledger, so a call that already ran is not run again.
 */
import { z } from "zod";
import { EffectgateError } from "../core/errors.js";
import type { AgentCheckpoint } from "../contracts/checkpoints.js";

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
