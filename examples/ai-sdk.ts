/**
 * The Vercel AI SDK with effectgate in front of its tools: a charge that needs a person's
 * approval, approved through effectgate's durable approvals, then the SDK's own replay path (the
 * same approval messages sent twice) charging once. Runs offline on the SDK's own test double.
 * Build and run: npx tsc -p tsconfig.bench.json && node dist-bench/examples/ai-sdk.js
 */
import { generateText, type ModelMessage } from "ai";
import { MockLanguageModelV3 } from "ai/test";
import { z } from "zod";
import { createGate, defineTool, memoryLedger } from "effectgate";
import { aiSdkTools, approvalResponses, dropStoppedTools } from "effectgate/ai-sdk";
import { decideCall, listApprovals } from "effectgate/operator";

const charges = new Map<string, { id: string; amount: number }>(); // the "payments service", keyed like Stripe
const chargeCard = defineTool({
  name: "charge_card",
  description: "Charge the customer's card on file.",
  effect: "write",
  input: z.object({ amount: z.number().positive() }),
  execute({ amount }, ctx) {
    const charge = charges.get(ctx.idempotencyKey) ?? { id: `ch_${charges.size + 1}`, amount };
    charges.set(ctx.idempotencyKey, charge);
    return charge;
  },
});

const gate = createGate({
  tools: [chargeCard],
  ledger: memoryLedger(),
  policy: { approvals: { rules: [{ tool: "charge_card", reason: "every charge needs a person" }] } },
  onAlert: () => {},
});
const scope = () => ({ tenant: "acme", task: "chat-42" });
const tools = aiSdkTools(gate, { scope });

const usage = { inputTokens: { total: 1, noCache: 1, cacheRead: undefined, cacheWrite: undefined }, outputTokens: { total: 1, text: 1, reasoning: undefined } };
const model = new MockLanguageModelV3({
  doGenerate: async ({ prompt }) => prompt.some((m) => m.role === "tool")
    ? { content: [{ type: "text", text: "Charged." }], finishReason: { unified: "stop", raw: undefined }, usage, warnings: [] }
    : { content: [{ type: "tool-call", toolCallId: "call_1", toolName: "charge_card", input: JSON.stringify({ amount: 30 }) }], finishReason: { unified: "tool-calls", raw: undefined }, usage, warnings: [] },
});

const messages: ModelMessage[] = [{ role: "user", content: "Charge me 30 EUR." }];
const first = await generateText({ model, tools, messages, prepareStep: dropStoppedTools(gate, tools, { scope }) });
messages.push(...first.response.messages);
console.log("the SDK asks for approval:", first.content.some((p) => p.type === "tool-approval-request"));

// A person approves (here in code; in production `effectgate approvals approve ID` from any process).
const [request] = await listApprovals(gate.ledger, { state: "pending" });
if (request) await decideCall(gate.ledger, request.id, { approve: true, by: "alice" });
const responses = await approvalResponses(gate, messages, { scope });
if (responses) messages.push(responses);

await generateText({ model, tools, messages });
const again = await generateText({ model, tools, messages }); // the same approval messages sent twice
console.log(`${again.text} Charges made: ${charges.size}`); // 1
await gate.close();
