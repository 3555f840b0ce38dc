/**
 * An Anthropic-style agent loop with effectgate in front of its tools: every tool_use block is
 * answered through the gate, and the loop's state is checkpointed before tools run, so a
 * killed process resumes without repeating a charge.
 *
 * `callModel` stands for `client.messages.create({ model, messages, tools })` from
 * @anthropic-ai/sdk; here it is a scripted stand-in so the example runs without a network.
 * Build and run: npx tsc -p tsconfig.bench.json && node dist-bench/examples/agent-loop.js
 */
import { z } from "zod";
import { createGate, defineTool, fileCheckpoint, memoryLedger, type Scope } from "effectgate";

type Block = { type: "text"; text: string } | { type: "tool_use"; id: string; name: string; input: unknown };
type Message = { role: "user" | "assistant"; content: string | readonly unknown[] };

const charges = new Map<string, { id: string; amount: number }>(); // the "payments service", keyed like Stripe

const chargeCard = defineTool({
  name: "charge_card",
  description: "Charge the customer's card on file.",
  effect: "write",
  input: z.object({ customer: z.string(), amount: z.number().positive() }),
  key: "derived", // the model sometimes emits the same charge twice under two ids: one effect
  async execute({ amount }, ctx) {
    const existing = charges.get(ctx.idempotencyKey);
    if (existing) return existing;
    const charge = { id: `ch_${charges.size + 1}`, amount };
    charges.set(ctx.idempotencyKey, charge);
    return charge;
  },
  async probe(_input, ctx) {
    const found = charges.get(ctx.idempotencyKey);
    return found ? { status: "done", result: found } : { status: "absent" };
  },
});

/** The scripted model: asks for a charge (twice, as models sometimes do), then answers. */
async function callModel(messages: readonly Message[]): Promise<{ content: Block[]; stop_reason: "tool_use" | "end_turn" }> {
  if (messages.length === 1) {
    const input = { customer: "cus_42", amount: 30 };
    return { stop_reason: "tool_use", content: [
      { type: "text", text: "Charging the card." },
      { type: "tool_use", id: "toolu_01", name: "charge_card", input },
      { type: "tool_use", id: "toolu_02", name: "charge_card", input },
    ] };
  }
  return { stop_reason: "end_turn", content: [{ type: "text", text: "Done: the customer was charged once." }] };
}

const scope: Scope = { tenant: "acme", task: "refund-ticket-7" };
const gate = createGate({ tools: [chargeCard], ledger: memoryLedger() }); // sqliteLedger(path) in production
const checkpoint = fileCheckpoint(".effectgate/example-checkpoint.json");

const messages: Message[] = [{ role: "user", content: "Charge cus_42 30 EUR for the repair." }];
for (let turn = 0; turn < 5; turn++) {
  const reply = await callModel(messages);
  messages.push({ role: "assistant", content: reply.content });
  if (reply.stop_reason !== "tool_use") break;
  // Durable before the tools run: a crash from here on resumes with gate.resume(checkpoint).
  await checkpoint.save({ scope, messages, counters: { turn }, pendingToolUse: reply.content });
  const toolResults = await gate.runToolUses(reply.content, scope);
  messages.push({ role: "user", content: toolResults });
  await checkpoint.save({ scope, messages, counters: { turn }, pendingToolUse: null });
}

console.log(JSON.stringify(messages, null, 2));
console.log(`charges applied: ${charges.size}`); // 1, although the model asked twice
await gate.close();
