/**
 * The fault explorer's entry points: how a schedule's calls reach the gate. The default is
 * `gate.runToolUses`; the others drive the same seeded worlds through the package's other front
 * doors, so a defect at a seam (an SDK adapter, the MCP gateway, the Idempotency-Key middleware)
 * is found the way the gate's own defects are.
 *
 * Two kinds:
 * - an `ask` entry answers one call of a worker's message, the way its SDK's loop would deliver
 *   that call to the gate and the answer back to the model (schedule.ts asks it instead of
 *   calling runToolUses); the world, faults and invariants are schedule.ts's own;
 * - a `world` entry needs a world of its own (two MCP gateways in front of two upstreams, a
 *   LangGraph agent resumed twice, HTTP clients in front of the middleware) and runs the whole
 *   schedule itself, on the same World, faultyLedger, Faults, simulated downstreams and
 *   checkInvariants.
 *
 * Nothing here imports an SDK: each entry is its own module, loaded (dynamic import, load.ts)
 * only when a schedule asks for it, so `effectgate/testing` loads without the optional peers.
 */
import type { ToolResultBlock, ToolUseBlock } from "../../../core/blocks.js";
import type { Scope } from "../../../core/keys.js";
import type { Gate } from "../../../root/create-gate.js";

/** The entries a schedule can be driven through. */
export const ENTRY_NAMES = ["gate", "ai-sdk", "openai-agents", "anthropic", "langchain", "mcp", "langchain-hitl", "middleware"] as const;

export type EntryName = (typeof ENTRY_NAMES)[number];

/** Answers one call through a front door; `runToolUses` for the default entry. */
export interface AskEntry {
  readonly kind: "ask";
  readonly name: EntryName;
  /** One call of a message, as the SDK hands it to the gate; its answer as the model would read it. Never rejects for a refused call. */
  answer(gate: Gate, call: ToolUseBlock, scope: Scope): Promise<ToolResultBlock>;
}

/** The default entry: the gate's own `runToolUses`, one call at a time. */
export const gateEntry: AskEntry = {
  kind: "ask",
  name: "gate",
  async answer(gate, call, scope) {
    const [block] = await gate.runToolUses([call], scope);
    if (!block) throw new Error(`runToolUses gave no answer for ${call.id}`);
    return block;
  },
};

