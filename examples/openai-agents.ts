/**
 * The OpenAI Agents SDK with effectgate in front of a charge: the run interrupts for approval,
 * its RunState is saved, a person approves (here in code, as `effectgate approvals approve ID`
 * would from another process), and the saved state is resumed TWICE — as a retried job would —
 * yet the card is charged once. The model is a scripted stand-in implementing the SDK's `Model`
 * interface, so the example runs without a network.
 * Build and run: npx tsc -p tsconfig.bench.json && node dist-bench/examples/openai-agents.js
 */
import { Agent, run, RunState, setTracingDisabled, Usage, type Model } from "@openai/agents";
import { z } from "zod";
import { createGate, defineTool, memoryLedger } from "effectgate";
import { agentsTool } from "effectgate/openai-agents";
import { decideCall, listApprovals } from "effectgate/operator";

setTracingDisabled(true);
const charges: { key: string; amount: number }[] = []; // the "payments service"

const chargeCard = defineTool({
  name: "charge_card",
  description: "Charge the customer's card on file.",
  effect: "write",
  input: z.object({ customer: z.string(), amount: z.number().positive() }),
  async execute({ amount }, ctx) {
    charges.push({ key: ctx.idempotencyKey, amount });
    return { charge: `ch_${charges.length}`, amount };
  },
});

// Asks for the charge until the request holds its result, then answers with it.
const model: Model = {
  async getResponse(request) {
    const items = Array.isArray(request.input) ? request.input : [];
    const result = items.find((i) => i.type === "function_call_result");
    if (!result) {
      return { usage: new Usage(), output: [{ type: "function_call", callId: "call_1", name: "charge_card", status: "completed", arguments: '{"customer":"cus_1","amount":42}' }] };
    }
    return { usage: new Usage(), output: [{ type: "message", role: "assistant", status: "completed", content: [{ type: "output_text", text: `Charged: ${JSON.stringify(result.output)}` }] }] };
  },
  async *getStreamedResponse() {
    throw new Error("not streamed in this example");
  },
};

const ledger = memoryLedger();
const gate = createGate({ tools: [chargeCard], ledger, policy: { approvals: { rules: [{ tool: "charge_card" }] } }, onAlert: () => {} });
const agent = new Agent<{ tenant: string; conversation: string }>({
  name: "billing", model,
  tools: [agentsTool(gate, chargeCard, { scope: (rc) => ({ tenant: rc.context.tenant, task: rc.context.conversation }) })],
});

const first = await run(agent, "charge 42", { context: { tenant: "acme", conversation: "conv-1" } });
const saved = first.state.toString(); // the checkpoint: it keeps the call ids
console.log(`interrupted for approval: ${first.interruptions.length} call(s)`);
const [request] = await listApprovals(ledger, { state: "pending" });
if (request) await decideCall(ledger, request.id, { approve: true, by: "alice" });

for (const attempt of [1, 2]) {
  const resumed = await run(agent, await RunState.fromString(agent, saved));
  console.log(`resume ${attempt}: ${String(resumed.finalOutput)}`);
}
console.log(`charges applied: ${charges.length}`); // 1
await gate.close();
