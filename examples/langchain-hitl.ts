/**
 * createAgent with effectgateHumanInTheLoop: LangChain's humanInTheLoopMiddleware shapes (a
 * HITLRequest interrupt, a `{ decisions }` resume) on effectgate's durable approvals. The refund
 * pauses the agent; the resume's decision is recorded as alice's in effectgate's store, and the
 * gate runs the refund once. (A person could decide from `effectgate approvals approve ID`
 * instead, in any process, and the agent be resumed with any value.)
 * Build and run: npx tsc -p tsconfig.bench.json && node dist-bench/examples/langchain-hitl.js
 */
import { AIMessage } from "@langchain/core/messages";
import { Command, MemorySaver } from "@langchain/langgraph";
import { createAgent, fakeModel } from "langchain";
import { z } from "zod";
import { createGate, defineTool, memoryLedger } from "effectgate";
import { effectgateHumanInTheLoop, langchainTool, type HitlRequest } from "effectgate/langchain";

const refunds: string[] = []; // the "payments service": one entry per refund made

const refund = defineTool({
  name: "refund",
  description: "Refund a customer.",
  effect: "write",
  input: z.object({ customer: z.string(), amount: z.number() }),
  async execute({ amount }, ctx) {
    refunds.push(ctx.idempotencyKey);
    return { refund: `R-${refunds.length}`, amount };
  },
});
const gate = createGate({
  tools: [refund], ledger: memoryLedger(), onAlert: () => {},
  policy: { approvals: { rules: [{ tool: "refund", reason: "refunds are checked" }] } },
});

const task = (configurable?: { thread_id?: unknown }) => ({ tenant: "acme", task: String(configurable?.thread_id) });
const agent = createAgent({
  model: fakeModel().respondWithTools([{ id: "call_1", name: "refund", args: { customer: "c_1", amount: 30 } }]).respond(new AIMessage("refunded")),
  tools: [langchainTool(gate, refund, { scope: (config) => task(config.configurable) })],
  middleware: [effectgateHumanInTheLoop(gate, { scope: (runtime) => task(runtime.configurable) })],
  checkpointer: new MemorySaver(),
});

const thread = { configurable: { thread_id: "t-1" } };
const paused = await agent.invoke({ messages: [{ role: "user", content: "refund c_1" }] }, thread);
const request = (paused as { __interrupt__?: { value: HitlRequest }[] }).__interrupt__?.[0]?.value;
console.log("to review:", request?.actionRequests.map((a) => `${a.name} ${JSON.stringify(a.args)} (${a.approvalId})`));
const done = await agent.invoke(new Command({ resume: { decisions: [{ type: "approve" }], by: "alice" } }), thread);
console.log(done.messages.at(-1)?.content, `- refunds made: ${refunds.length}`); // refunded - refunds made: 1
await gate.close();
