/**
 * The tool runner's loop body, made crash-safe and approval-aware. The runner keeps the reply
 * that holds the tool calls in memory (on a message thread by default, which sends only new
 * messages, so `runner.params.messages` is not the whole conversation), and runs its tools after
 * the loop body. So, in the loop body, before the tools run:
 *
 *   for await (const reply of runner) {
 *     await checkpointReply(store, { scope, history, reply });          // the call ids survive a crash
 *     if ((await waitingApprovals(gate, reply, { scope })).length > 0) break;  // pause for a person
 *     history.push(reply);  // (and the tool results, once the runner has added them)
 *   }
 *
 * A fresh process resumes with `gate.resume(store)`: it answers the checkpointed tool_use blocks
 * through the ledger (an effect that happened is reused, never made again), and returns the
 * tool_result blocks to send as the next user message.
 */
import type { Scope } from "../../core/keys.js";
import type { CheckpointStore } from "../../contracts/checkpoints.js";
import type { ApprovalStatus } from "../../governance/govern.js";
import type { Gate } from "../../root/create-gate.js";

interface Reply {
  readonly role?: string;
  readonly content: readonly unknown[];
}

/** Saves the conversation with this reply, its tool_use blocks pending, atomically (a fileCheckpoint or ledgerCheckpoint). */
export async function checkpointReply(
  store: CheckpointStore,
  at: { readonly scope: Scope; readonly history: readonly unknown[]; readonly reply: Reply; readonly counters?: Readonly<Record<string, number>> },
): Promise<void> {
  const hasCalls = at.reply.content.some((b) => typeof b === "object" && b !== null && (b as { type?: unknown }).type === "tool_use");
  await store.save({
    scope: at.scope,
    messages: [...at.history, { role: "assistant", content: at.reply.content }],
    counters: at.counters ?? {},
    pendingToolUse: hasCalls ? [...at.reply.content] : null,
  });
}

/**
 * The reply's tool calls that wait for a person, each with its durable request (filed now if new,
 * dry run included): pause the loop while any does, and resume once `effectgate approvals approve
 * ID` (or deny) has decided them. Calls needing no approval, or already decided, are not listed.
 */
export async function waitingApprovals(gate: Gate, reply: Reply, options: { readonly scope: Scope }): Promise<Extract<ApprovalStatus, { id: string }>[]> {
  const waiting: Extract<ApprovalStatus, { id: string }>[] = [];
  for (const block of reply.content) {
    const b = block as { type?: unknown; id?: unknown; name?: unknown; input?: unknown };
    if (b.type !== "tool_use" || typeof b.id !== "string" || typeof b.name !== "string" || !gate.tools.has(b.name)) continue;
    const status = await gate.approvalFor({ id: b.id, name: b.name, input: b.input }, options.scope);
    if (status.state === "pending" || status.state === "none") waiting.push(status);
  }
  return waiting;
}
