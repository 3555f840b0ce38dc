/**
 * The Anthropic SDK's tool runner with effectgate in front of its tools: each call is keyed by its
 * tool_use id and the reply that holds the calls is checkpointed in the loop body, before they
 * run. Runs offline: the client's `fetch` is a stand-in that answers like the Messages API.
 * Build and run: npx tsc -p tsconfig.bench.json && node dist-bench/examples/anthropic.js
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Anthropic from "@anthropic-ai/sdk";
import { z } from "zod";
import { createGate, defineTool, fileCheckpoint, memoryLedger } from "effectgate";
import { anthropicTools, checkpointReply } from "effectgate/anthropic";

const charges = new Map<string, { id: string; amount: number }>();
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
const gate = createGate({ tools: [chargeCard], ledger: memoryLedger(), onAlert: () => {} });
const scope = { tenant: "acme", task: "chat-7" };

// The Messages API, scripted: first a tool call, then (once a tool_result came back) a text reply.
let turn = 0;
const fakeFetch = async (_url: string | URL | Request, init?: RequestInit): Promise<Response> => {
  const body = JSON.parse(typeof init?.body === "string" ? init.body : "{}") as { messages: { content: unknown }[] };
  const answered = JSON.stringify(body.messages).includes("tool_result");
  const content = answered ? [{ type: "text", text: "Charged." }] : [{ type: "tool_use", id: "toolu_1", name: "charge_card", input: { amount: 30 } }];
  return Response.json({
    id: `msg_${++turn}`, type: "message", role: "assistant", model: "claude-test", content,
    stop_reason: answered ? "end_turn" : "tool_use", stop_sequence: null, usage: { input_tokens: 1, output_tokens: 1 },
  });
};
const client = new Anthropic({ apiKey: "offline", maxRetries: 0, fetch: fakeFetch });

const dir = mkdtempSync(join(tmpdir(), "effectgate-example-"));
const store = fileCheckpoint(join(dir, "checkpoint.json"));
const user = { role: "user" as const, content: "Charge me 30 EUR." };
const runner = client.beta.messages.toolRunner({ model: "claude-test", max_tokens: 512, messages: [user], tools: anthropicTools(gate, { scope: () => scope }) });
for await (const reply of runner) {
  // Before the runner runs this reply's tools: a crash from here on resumes with gate.resume(store).
  await checkpointReply(store, { scope, history: [user], reply });
  const text = reply.content.find((b) => b.type === "text");
  if (text?.type === "text") console.log(text.text, `Charges made: ${charges.size}`);
}
await gate.close();
rmSync(dir, { recursive: true, force: true });
