/**
 * The same effect under a new id, under every adapter: the model charges a card, then asks for the
 * same charge again as a NEW tool call (a re-plan after a timeout or an error; stripe/ai #402). No
 * SDK's call id sees it; the tool's `repeats` policy does. Each SDK runs with its own test double,
 * the charges are counted by a real HTTP downstream on 127.0.0.1, and the ledger is SQLite.
 */
import { join } from "node:path";
import Anthropic from "@anthropic-ai/sdk";
import { Agent, run, setTracingDisabled, Usage, type Model, type ModelRequest, type ModelResponse, type RunContext } from "@openai/agents";
import { AIMessage, ToolMessage } from "@langchain/core/messages";
import { createAgent, fakeModel } from "langchain";
import { generateText, stepCountIs, type ModelMessage } from "ai";
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { aiSdkTools } from "../../src/ai-sdk.js";
import { anthropicTools } from "../../src/anthropic.js";
import { agentsTool } from "../../src/openai-agents.js";
import { effectgateMiddleware, fromLangChainTool } from "../../src/langchain.js";
import { createGate, defineTool, type Gate, type RepeatPolicy } from "../../src/index.js";
import { sqliteLedger } from "../../src/sqlite.js";
import { tool as langchainToolOf } from "@langchain/core/tools";
import { postCharge, startChargeService } from "../support/charge-service.js";
import { tempDir } from "../support/tmp.js";
import { scriptedModel, text, toolCalls } from "./ai-sdk-support.js";
import { startFakeMessagesApi, textBlock, toolUse } from "./fake-messages-api.js";

beforeAll(() => setTracingDisabled(true));
const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
});

const scope = () => ({ tenant: "acme", task: "chat-1" });
const charge = { amount: 30 };

async function setup(repeats: RepeatPolicy) {
  const payments = await startChargeService({ instant: true });
  const chargeCard = defineTool({
    name: "charge_card", description: "Charge the card", effect: "write", input: z.object({ amount: z.number() }), repeats,
    execute: (input, ctx) => postCharge(payments, ctx.idempotencyKey, input),
  });
  const gate: Gate = createGate({
    tools: [chargeCard],
    ledger: sqliteLedger(join(tempDir(), "ledger.db")),
    onAlert: () => {},
  });
  closers.push(() => payments.close(), () => gate.close());
  return { gate, payments, chargeCard };
}

/**
 * What each policy makes of the re-plan. Collapse: the SDK gets the first charge's recorded value
 * itself (the adapters hand the SDK the value, so its tool output keeps its shape). Refuse: an
 * error naming the first call (an SDK may prefix its own "Error: ").
 */
function expectSecondAnswer(action: RepeatPolicy["action"], first: string, second: string) {
  if (action === "collapse") expect(second).toBe(first);
  else expect(second).toMatch(/^(Error: )?EG_REPEATED_CALL: this charge_card call repeats call (call_1|tu_1) of this task .* It was not executed again: the effect already happened once\./s);
}

describe.each(["collapse", "refuse"] as const)("a re-planned charge under a new call id (repeats: %s)", (action) => {
  it("Vercel AI SDK: charged once; the model's second tool result is the first charge (or names it)", async () => {
    const { gate, payments } = await setup({ action });
    const model = scriptedModel([toolCalls({ id: "call_1", name: "charge_card", input: charge }), toolCalls({ id: "call_2", name: "charge_card", input: charge }), text("done")]);
    const messages: ModelMessage[] = [{ role: "user", content: "charge me 30" }];
    const result = await generateText({ model, tools: aiSdkTools(gate, { scope }), messages, stopWhen: stepCountIs(5) });
    // A refused call is the SDK's tool-error part; a collapsed one its tool-result.
    const outputs = result.steps.flatMap((s) => s.content).flatMap((p) =>
      p.type === "tool-result" ? [typeof p.output === "string" ? p.output : JSON.stringify(p.output)]
        : p.type === "tool-error" ? [p.error instanceof Error ? p.error.message : String(p.error)] : []);
    expect(payments.charges).toHaveLength(1);
    expect(outputs).toHaveLength(2);
    expectSecondAnswer(action, outputs[0]!, outputs[1]!);
  });

  it("Anthropic SDK tool runner: charged once; the second tool_result answers the re-plan", async () => {
    const { gate, payments } = await setup({ action });
    const fake = await startFakeMessagesApi([[toolUse("tu_1", "charge_card", charge)], [toolUse("tu_2", "charge_card", charge)], [textBlock("done")]]);
    closers.push(() => fake.close());
    const client = new Anthropic({ apiKey: "test-key", baseURL: fake.url, maxRetries: 0 });
    await client.beta.messages.toolRunner({
      model: "claude-test", max_tokens: 100, messages: [{ role: "user", content: "charge me 30" }], tools: anthropicTools(gate, { scope }), thread: false,
    });
    const results = (fake.requests.at(-1)?.messages ?? []).flatMap((m) => (Array.isArray(m.content) ? m.content : []))
      .filter((b: { type?: string }) => b.type === "tool_result") as { tool_use_id: string; content: unknown }[];
    const textOf = (c: unknown) => (typeof c === "string" ? c : (c as { text: string }[]).map((b) => b.text).join(""));
    expect(payments.charges).toHaveLength(1);
    expect(results.map((r) => r.tool_use_id)).toEqual(["tu_1", "tu_2"]);
    expectSecondAnswer(action, textOf(results[0]!.content), textOf(results[1]!.content));
  });

  it("OpenAI Agents SDK: charged once; the second function call's output answers the re-plan", async () => {
    const { gate, payments, chargeCard } = await setup({ action });
    const agent = new Agent<{ tenant: string }>({
      name: "billing", model: replanningModel(), tools: [agentsTool(gate, chargeCard, { scope: (rc: RunContext<{ tenant: string }>) => ({ tenant: rc.context.tenant, task: "chat-1" }) })],
    });
    const result = await run(agent, "charge me 30", { context: { tenant: "acme" } });
    const outputs = result.newItems.filter((i) => i.type === "tool_call_output_item").map((i) => String((i as { output: unknown }).output));
    expect(payments.charges).toHaveLength(1);
    expect(outputs).toHaveLength(2);
    expectSecondAnswer(action, outputs[0]!, outputs[1]!);
  });

  it("LangChain createAgent with effectgateMiddleware: charged once; the second ToolMessage answers the re-plan", async () => {
    const payments = await startChargeService({ instant: true });
    const written = langchainToolOf(async (input: { amount: number }, config) => postCharge(payments, String(config.toolCall?.id), input),
      { name: "charge_card", description: "Charge the card", schema: z.object({ amount: z.number() }) });
    const gate = createGate({ tools: [fromLangChainTool(written, { effect: "write", repeats: { action } })], ledger: sqliteLedger(join(tempDir(), "l.db")), onAlert: () => {} });
    closers.push(() => payments.close(), () => gate.close());
    const model = fakeModel()
      .respondWithTools([{ id: "call_1", name: "charge_card", args: charge }])
      .respondWithTools([{ id: "call_2", name: "charge_card", args: charge }])
      .respond(new AIMessage("done"));
    const out = await createAgent({ model, tools: [written], middleware: [effectgateMiddleware(gate, { scope: () => scope() })] })
      .invoke({ messages: [{ role: "user", content: "charge me 30" }] }, { configurable: { thread_id: "t-1" } });
    const answers = out.messages.filter((m) => ToolMessage.isInstance(m)).map((m) => (typeof m.content === "string" ? m.content : JSON.stringify(m.content)));
    expect(payments.charges).toHaveLength(1);
    expect(answers).toHaveLength(2);
    expectSecondAnswer(action, answers[0]!, answers[1]!);
  });
});

/** A model that asks for the charge, and once it has a result asks for it again under a new call id, then stops. */
function replanningModel(): Model {
  return {
    async getResponse(request: ModelRequest): Promise<ModelResponse> {
      const answered = (Array.isArray(request.input) ? request.input : []).filter((i) => i.type === "function_call_result").length;
      if (answered < 2) {
        const callId = `call_${answered + 1}`;
        return { usage: new Usage(), output: [{ type: "function_call", id: `fc_${callId}`, callId, name: "charge_card", arguments: JSON.stringify(charge), status: "completed" }] };
      }
      return { usage: new Usage(), output: [{ type: "message", id: "msg_final", role: "assistant", status: "completed", content: [{ type: "output_text", text: "done" }] }] };
    },
    async *getStreamedResponse() {
      throw new Error("the fake model does not stream");
    },
  };
}
