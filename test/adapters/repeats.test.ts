/**
 * The same effect under a new id, under every adapter: the model charges a card, then asks for the
 * same charge again as a NEW tool call (a re-plan after a timeout or an error; stripe/ai #402). No
 * SDK's call id sees it; the tool's `repeats` policy does. Each SDK runs with its own test double,
 * the charges are counted by a real HTTP downstream on 127.0.0.1, and the ledger is SQLite.
 */
import { join } from "node:path";
import Anthropic from "@anthropic-ai/sdk";
import { Agent, run, RunState, setTracingDisabled, Usage, type Model, type ModelRequest, type ModelResponse, type RunContext } from "@openai/agents";
import { AIMessage, ToolMessage } from "@langchain/core/messages";
import { createAgent, fakeModel } from "langchain";
import { generateText, stepCountIs, type ModelMessage } from "ai";
import { Command, MemorySaver } from "@langchain/langgraph";
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { aiSdkTools, approvalResponses } from "../../src/ai-sdk.js";
import { anthropicTools } from "../../src/anthropic.js";
import { agentsTool } from "../../src/openai-agents.js";
import { effectgateMiddleware, fromLangChainTool } from "../../src/langchain.js";
import { createGate, defineTool, type Gate, type RepeatPolicy } from "../../src/index.js";
import { decideCall, listApprovals } from "../../src/operator.js";
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
  if (action === "collapse") expect(second).toBe(collapsedLine(second) + first);
  else expect(second).toMatch(/^(Error: )?EG_REPEATED_CALL: this charge_card call repeats call (call_1|tu_1) of this task .* It was not executed again: the effect already happened once\./s);
}

/** The line a collapsed answer starts with, where the model reads text: it names the first call and says the charge was not made again. */
function collapsedLine(answer: string): string {
  const line = /^\[effectgate: this charge_card call repeats call (call_1|tu_1) \(same input, completed [0-9T:.Z-]+\); it was not executed again\. That call's result:\]\n/.exec(answer);
  expect(line, `a collapsed answer says it repeats the first call: ${answer}`).not.toBeNull();
  return line![0];
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
    if (action === "refuse") expectSecondAnswer(action, outputs[0]!, outputs[1]!);
    else {
      // The program reads the output as the tool returned it; the model, in the tool message it is sent, is told it was not run.
      expect(outputs[1]).toBe(outputs[0]);
      const sent = result.response.messages.flatMap((m) => (m.role === "tool" ? m.content : []))
        .find((p) => p.type === "tool-result" && p.toolCallId === "call_2");
      const output = (sent as { output: { type: string; value: string } } | undefined)?.output;
      expect(output?.type).toBe("text");
      expect(output!.value).toBe(collapsedLine(output!.value) + outputs[0]);
    }
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

describe("a collapsed repeat whose result is Anthropic content blocks", () => {
  it("the runner's tool_result keeps the blocks, after a text block saying the call was not run", async () => {
    const payments = await startChargeService({ instant: true });
    const chargeCard = defineTool({
      name: "charge_card", description: "Charge the card", effect: "write", input: z.object({ amount: z.number() }), repeats: { action: "collapse" },
      execute: async (input, ctx) => [{ type: "text", text: `charged ${JSON.stringify(await postCharge(payments, ctx.idempotencyKey, input))}` }],
    });
    const gate = createGate({ tools: [chargeCard], ledger: sqliteLedger(join(tempDir(), "ledger.db")), onAlert: () => {} });
    const fake = await startFakeMessagesApi([[toolUse("tu_1", "charge_card", charge)], [toolUse("tu_2", "charge_card", charge)], [textBlock("done")]]);
    closers.push(() => payments.close(), () => gate.close(), () => fake.close());
    const client = new Anthropic({ apiKey: "test-key", baseURL: fake.url, maxRetries: 0 });
    await client.beta.messages.toolRunner({
      model: "claude-test", max_tokens: 100, messages: [{ role: "user", content: "charge me 30" }], tools: anthropicTools(gate, { scope }), thread: false,
    });
    const results = (fake.requests.at(-1)?.messages ?? []).flatMap((m) => (Array.isArray(m.content) ? m.content : []))
      .filter((b: { type?: string }) => b.type === "tool_result") as { content: { type: string; text: string }[] }[];
    expect(payments.charges).toHaveLength(1);
    const [first, second] = results;
    expect(first!.content).toHaveLength(1);
    expect(second!.content).toHaveLength(2);
    expect(second!.content[0]!.text).toMatch(/^\[effectgate: this charge_card call repeats call tu_1 \(same input, completed .*\); it was not executed again\. That call's result:\]$/);
    expect(second!.content[1]).toEqual(first!.content[0]);
  });
});

/**
 * `approve`: the SDK's own approval surface is asked about the repeat (needsApproval, the agent's
 * interruptions, the graph's interrupt), so the person sees it where the application already shows
 * approvals, with a request naming the first call; approved, the second charge is made once;
 * denied, never.
 */
describe("a re-planned charge under a new call id (repeats: approve): the SDK's approval surface asks the person", () => {
  async function pendingRepeat(gate: Gate) {
    const pending = await listApprovals(gate.ledger, { state: "pending" });
    expect(pending).toHaveLength(1);
    expect(pending[0]!.toolUseId).toBe("call_2");
    expect(pending[0]!.reasons.join("; ")).toMatch(/^it repeats call call_1 of this task \(same input, key call_1\), which completed at .* with the result /);
    return pending[0]!.id;
  }

  it.each([true, false])("Vercel AI SDK: a tool-approval-request for the repeat; decided %s from the operator layer", async (approve) => {
    const { gate, payments } = await setup({ action: "approve" });
    const tools = aiSdkTools(gate, { scope });
    const model = scriptedModel([toolCalls({ id: "call_1", name: "charge_card", input: charge }), toolCalls({ id: "call_2", name: "charge_card", input: charge }), text("done")]);
    const prompt: ModelMessage[] = [{ role: "user", content: "charge me 30" }];
    const first = await generateText({ model, tools, messages: prompt, stopWhen: stepCountIs(5) });
    // The first charge ran without asking anyone; the repeat is the SDK's approval request, not an error.
    expect(payments.charges).toHaveLength(1);
    expect(first.content.filter((p) => p.type === "tool-approval-request").map((p) => p.toolCall.toolCallId)).toEqual(["call_2"]);
    expect(first.steps.flatMap((st) => st.content).some((p) => p.type === "tool-error")).toBe(false);
    const id = await pendingRepeat(gate);
    const conversation: ModelMessage[] = [...prompt, ...first.response.messages];
    expect((await decideCall(gate.ledger, id, { approve, by: "alice", note: approve ? "customer asked for two" : "duplicate" })).ok).toBe(true);
    const responses = await approvalResponses(gate, conversation, { scope });
    expect(responses?.content).toEqual([expect.objectContaining({ type: "tool-approval-response", approved: approve })]);
    await generateText({ model, tools, messages: [...conversation, responses as ModelMessage], stopWhen: stepCountIs(5) });
    await generateText({ model, tools, messages: [...conversation, responses as ModelMessage], stopWhen: stepCountIs(5) });
    expect(payments.charges).toHaveLength(approve ? 2 : 1);
  });

  it.each([true, false])("OpenAI Agents SDK: the repeat is a run interruption; decided %s, the resumed run charges accordingly", async (approve) => {
    const { gate, payments, chargeCard } = await setup({ action: "approve" });
    const agent = new Agent<{ tenant: string }>({
      name: "billing", model: replanningModel(), tools: [agentsTool(gate, chargeCard, { scope: (rc: RunContext<{ tenant: string }>) => ({ tenant: rc.context.tenant, task: "chat-1" }) })],
    });
    const first = await run(agent, "charge me 30", { context: { tenant: "acme" } });
    expect(payments.charges).toHaveLength(1);
    expect(first.interruptions.map((i) => (i.rawItem as { callId: string }).callId)).toEqual(["call_2"]);
    const id = await pendingRepeat(gate);
    expect((await decideCall(gate.ledger, id, { approve, by: "alice" })).ok).toBe(true);
    const saved = first.state.toString();
    for (let i = 0; i < 2; i++) {
      const state = await RunState.fromString(agent, saved);
      await run(agent, state);
    }
    expect(payments.charges).toHaveLength(approve ? 2 : 1);
  });

  it.each([true, false])("LangChain createAgent with effectgateMiddleware: the repeat interrupts the graph; decided %s, the resumed graph charges accordingly", async (approve) => {
    const payments = await startChargeService({ instant: true });
    const written = langchainToolOf(async (input: { amount: number }, config) => postCharge(payments, String(config.toolCall?.id), input),
      { name: "charge_card", description: "Charge the card", schema: z.object({ amount: z.number() }) });
    const gate = createGate({ tools: [fromLangChainTool(written, { effect: "write", repeats: { action: "approve" } })], ledger: sqliteLedger(join(tempDir(), "l.db")), onAlert: () => {} });
    closers.push(() => payments.close(), () => gate.close());
    const model = fakeModel()
      .respondWithTools([{ id: "call_1", name: "charge_card", args: charge }])
      .respondWithTools([{ id: "call_2", name: "charge_card", args: charge }])
      .respond(new AIMessage("done"));
    const agent = createAgent({ model, tools: [written], middleware: [effectgateMiddleware(gate, { scope: () => scope() })], checkpointer: new MemorySaver() });
    const thread = { configurable: { thread_id: "t-approve" } };
    const paused = await agent.invoke({ messages: [{ role: "user", content: "charge me 30" }] }, thread);
    expect(payments.charges).toHaveLength(1);
    const interrupts = (paused as { __interrupt__?: { value: { callId: string; approvalId: string } }[] }).__interrupt__ ?? [];
    expect(interrupts.map((i) => i.value.callId)).toEqual(["call_2"]);
    const id = await pendingRepeat(gate);
    expect(interrupts[0]!.value.approvalId).toBe(id);
    expect((await decideCall(gate.ledger, id, { approve, by: "alice" })).ok).toBe(true);
    const done = await agent.invoke(new Command({ resume: "decided in the console" }), thread);
    expect(payments.charges).toHaveLength(approve ? 2 : 1);
    const last = done.messages.filter((m) => ToolMessage.isInstance(m)).at(-1);
    if (!approve) expect(typeof last?.content === "string" ? last.content : JSON.stringify(last?.content)).toMatch(/^EG_APPROVAL_DENIED/);
  });
});

/**
 * The default for destructive tools (refuse), through an SDK's approval surface: every destructive
 * call needs a person, but a repeat that will be refused is not put before one. Asking would file a
 * request the gate then ignores.
 */
describe("a re-planned deletion (destructive, repeats by default: refuse) through the AI SDK", () => {
  it("the first call is approved and runs; the repeat gets no approval request and is refused, naming the first", async () => {
    const accounts = await startChargeService({ instant: true });
    const deleteAccount = defineTool({
      name: "delete_account", description: "Delete an account", effect: "destructive", input: z.object({ account: z.string() }),
      dryRun: (input: { account: string }) => ({ effect: "would_delete", would_affect: { account: input.account }, reversible: false }),
      execute: (input, ctx) => postCharge(accounts, ctx.idempotencyKey, { amount: 0, account: input.account }),
    });
    const gate = createGate({ tools: [deleteAccount], ledger: sqliteLedger(join(tempDir(), "ledger.db")), onAlert: () => {} });
    closers.push(() => accounts.close(), () => gate.close());
    const tools = aiSdkTools(gate, { scope });
    const ask = { account: "acc_9" };
    const model = scriptedModel([toolCalls({ id: "call_1", name: "delete_account", input: ask }), toolCalls({ id: "call_2", name: "delete_account", input: ask }), text("done")]);
    const prompt: ModelMessage[] = [{ role: "user", content: "delete acc_9" }];
    const first = await generateText({ model, tools, messages: prompt, stopWhen: stepCountIs(5) });
    const [request] = await listApprovals(gate.ledger, { state: "pending" });
    expect(request?.toolUseId).toBe("call_1");
    expect((await decideCall(gate.ledger, request!.id, { approve: true, by: "alice" })).ok).toBe(true);
    const conversation: ModelMessage[] = [...prompt, ...first.response.messages];
    const second = await generateText({ model, tools, messages: [...conversation, (await approvalResponses(gate, conversation, { scope })) as ModelMessage], stopWhen: stepCountIs(5) });
    expect(accounts.charges).toHaveLength(1);
    const parts = second.steps.flatMap((st) => st.content);
    expect(parts.some((p) => p.type === "tool-approval-request")).toBe(false);
    const refused = parts.find((p) => p.type === "tool-error");
    expect(refused?.type === "tool-error" && refused.toolCallId).toBe("call_2");
    expect(refused?.type === "tool-error" && String((refused.error as Error).message)).toMatch(/^EG_REPEATED_CALL: this delete_account call repeats call call_1 of this task/);
    expect((await listApprovals(gate.ledger, {})).map((a) => a.toolUseId)).toEqual(["call_1"]);
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
