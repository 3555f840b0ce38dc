/**
 * Checkpoints: the agent loop's state, saved so a killed run resumes where it stopped.
 *
 * `CheckpointStore` is what the gate's `resume()` reads and the agent loop writes (a file, or a
 * row next to the calls); `CheckpointRecords` is the store contract a ledger keeps them in:
 * opaque text per (tenant, id), replaced whole.
 */
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

/** Rules: one value per (tenant, id); `put` replaces it atomically at the store's durability level. */
export interface CheckpointRecords {
  put(tenant: string, id: string, data: string): Promise<void>;
  get(tenant: string, id: string): Promise<string | undefined>;
}
