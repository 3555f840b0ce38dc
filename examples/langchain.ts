/**
 * LangGraph's ToolNode with effectgate in front of two tickets in one batch: the refund waits for
 * approval (the graph interrupts), the other ticket is made at once. On resume LangGraph re-runs
 * the whole node, but the sibling is answered from the ledger: two tickets, not three.
 * Build and run: npx tsc -p tsconfig.bench.json && node dist-bench/examples/langchain.js
 */
import { AIMessage } from "@langchain/core/messages";
import { Command, END, MemorySaver, MessagesAnnotation, START, StateGraph } from "@langchain/langgraph";
import { ToolNode } from "@langchain/langgraph/prebuilt";
import { z } from "zod";
import { createGate, defineTool, memoryLedger } from "effectgate";
import { langchainTool } from "effectgate/langchain";

const tickets: string[] = []; // the "ticket service": one entry per ticket made

const createTicket = defineTool({
  name: "create_ticket",
  description: "Open a support ticket.",
  effect: "write",
  input: z.object({ customer: z.string(), title: z.string() }),
  async execute({ title }, ctx) {
    tickets.push(ctx.idempotencyKey);
    return { ticket: `T-${tickets.length}`, title };
  },
});

const gate = createGate({
  tools: [createTicket], ledger: memoryLedger(), onAlert: () => {},
  policy: { approvals: { rules: [{ tool: "create_ticket", when: { field: "title", eq: "refund" } }] } },
});
const scope = (config: { configurable?: Record<string, unknown> }) => ({ tenant: "acme", task: String(config.configurable?.thread_id) });
const graph = new StateGraph(MessagesAnnotation)
  .addNode("tools", new ToolNode([langchainTool(gate, createTicket, { scope })]))
  .addEdge(START, "tools")
  .addEdge("tools", END)
  .compile({ checkpointer: new MemorySaver() });

const thread = { configurable: { thread_id: "t-1" } };
const batch = new AIMessage({
  content: "",
  tool_calls: [
    { id: "call_hello", name: "create_ticket", args: { customer: "c_1", title: "hello" } },
    { id: "call_refund", name: "create_ticket", args: { customer: "c_1", title: "refund" } },
  ],
});
const paused = (await graph.invoke({ messages: [batch] }, thread)) as { __interrupt__?: { value: unknown }[] };
console.log("interrupted:", JSON.stringify(paused.__interrupt__?.[0]?.value));
// The person decides in the resume itself (or from `effectgate approvals approve ID`, then resumes with any value).
const done = await graph.invoke(new Command({ resume: { approve: true, by: "alice" } }), thread);
for (const m of done.messages.slice(1)) console.log(typeof m.content === "string" ? m.content : JSON.stringify(m.content));
console.log(`tickets made: ${tickets.length}`); // 2
await gate.close();
