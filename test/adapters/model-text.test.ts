/**
 * What the model reads, through each adapter and its real SDK (with the SDK's own test double or
 * a fake API on 127.0.0.1): a bad input is EG_INVALID_INPUT with the issues only, no answer
 * carries a stack trace or a file path, and the text each adapter's doc page shows is the text the
 * model gets (docs/adapters.md quotes these tests).
 */
import Anthropic from "@anthropic-ai/sdk";
import { AIMessage, type BaseMessage } from "@langchain/core/messages";
import { tool as langchainOwnTool } from "@langchain/core/tools";
import { MemorySaver } from "@langchain/langgraph";
import { Agent, run, setTracingDisabled } from "@openai/agents";
import { generateText, stepCountIs } from "ai";
import type { LanguageModelV3CallOptions } from "@ai-sdk/provider";
import { MockLanguageModelV3 } from "ai/test";
import { createAgent, fakeModel } from "langchain";
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { aiSdkTools } from "../../src/ai-sdk.js";
import { anthropicTools } from "../../src/anthropic.js";
import { createGate, defineTool, type Gate } from "../../src/index.js";
import { effectgateMiddleware, fromLangChainTool, langchainTool } from "../../src/langchain.js";
import { agentsTool } from "../../src/openai-agents.js";
import { setKillSwitch } from "../../src/operator.js";
import { memoryLedger } from "../../src/stores/memory/index.js";
import { withoutStackTrace } from "../../src/adapters/shared.js";
import { plannedModel } from "./agents-model.js";
import { startFakeMessagesApi, textBlock, toolUse } from "./fake-messages-api.js";

beforeAll(() => setTracingDisabled(true));
const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
});

const scope = { tenant: "acme", task: "t1" };
/** A stack frame (`    at fn (file:///…:1:2)`) or a path of this machine. */
const LEAK = /\n\s*at \S|file:\/\/|node_modules|\/work\/|\.(?:ts|js|mjs):\d+/;

function gateWith(tools: Parameters<typeof createGate>[0]["tools"], policy?: Parameters<typeof createGate>[0]["policy"]): Gate {
  const gate = createGate({ tools, ledger: memoryLedger(), onAlert: () => {}, ...(policy ? { policy } : {}) });
  closers.push(() => gate.close());
  return gate;
}

/** A downstream client's error that embeds its cause's stack in its message, as LangChain's ToolInvocationError does. */
function wrappedError(): Error {
  const cause = new Error("connect ECONNREFUSED 127.0.0.1:9");
  return new Error(`the payments client failed: ${cause.stack}`);
}
const runs: string[] = [];
const charge = defineTool({
  name: "charge_card", description: "Charge the card", effect: "write", input: z.object({ amount: z.number() }),
  execute: (input) => {
    runs.push(JSON.stringify(input));
    throw wrappedError();
  },
});

const toolText = (messages: BaseMessage[]) => messages.filter((m) => m.getType() === "tool").map((m) => (typeof m.content === "string" ? m.content : JSON.stringify(m.content)));


/** What the AI SDK hands the model after a mock model calls charge_card once ({ amount: 30 }) through aiSdkTools. */
async function toolOutputsOfOneCall(gate: Parameters<typeof aiSdkTools>[0]): Promise<{ output: { type: string; value: unknown } }[]> {
  const seen: { output: { type: string; value: unknown } }[] = [];
  let step = 0;
  const model = new MockLanguageModelV3({
    doGenerate: async (options: LanguageModelV3CallOptions) => {
      seen.push(...options.prompt.flatMap((m) => (m.role === "tool" ? m.content : [])) as never[]);
      const calls = step++ === 0;
      return {
        content: calls ? [{ type: "tool-call", toolCallId: "call_1", toolName: "charge_card", input: JSON.stringify({ amount: 30 }) }] : [{ type: "text", text: "done" }],
        finishReason: { unified: calls ? "tool-calls" : "stop", raw: undefined },
        usage: { inputTokens: { total: 1, noCache: 1, cacheRead: undefined, cacheWrite: undefined }, outputTokens: { total: 1, text: 1, reasoning: undefined } },
        warnings: [],
      };
    },
  });
  await generateText({ model, tools: aiSdkTools(gate, { scope: () => scope }), prompt: "go", stopWhen: stepCountIs(3) });
  return seen;
}

describe("LangChain: a tool whose schema is JSON Schema, run through effectgateMiddleware (issue 24 #9)", () => {
  it("a bad input is EG_INVALID_INPUT with the issues only, the tool never runs, and no stack trace or file path reaches the model", async () => {
    const ran: unknown[] = [];
    const mine = langchainOwnTool(async (input: unknown) => {
      ran.push(input);
      return "charged";
    }, {
      name: "charge", description: "Charge",
      schema: { type: "object", properties: { amount: { type: "number" }, card: { type: "object", properties: { last4: { type: "string", minLength: 4 } } } }, required: ["amount", "currency"] },
    });
    const gate = gateWith([fromLangChainTool(mine, { effect: "write" })]);
    const model = fakeModel().respondWithTools([{ id: "call_1", name: "charge", args: { amount: "lots", card: { last4: "1" } } }]).respond(new AIMessage("done"));
    const agent = createAgent({ model, tools: [mine], middleware: [effectgateMiddleware(gate, { scope: () => scope })], checkpointer: new MemorySaver() });
    const out = await agent.invoke({ messages: [{ role: "user", content: "go" }] }, { configurable: { thread_id: "j1" } });
    const [answer] = toolText(out.messages);
    expect(answer).toBe("EG_INVALID_INPUT: the input for charge does not match its schema: Instance does not have required property \"currency\"; " +
      "amount: Instance type \"string\" is invalid. Expected \"number\"; card/last4: String is too short (1 < 4). Nothing was executed; fix the input and call again.");
    expect(ran).toEqual([]);
    expect(await gate.ledger.calls.list({ tenant: "acme", limit: 10 })).toEqual([]); // refused before the ledger: nothing to replay
  });

  it("a good input passes LangChain's own validator the same way and runs once", async () => {
    const mine = langchainOwnTool(async (input: unknown) => `charged ${(input as { amount: number }).amount}`, {
      name: "charge", description: "Charge", schema: { type: "object", properties: { amount: { type: "number" } }, required: ["amount"] },
    });
    const gate = gateWith([fromLangChainTool(mine, { effect: "write" })]);
    const model = fakeModel().respondWithTools([{ id: "call_1", name: "charge", args: { amount: 30 } }]).respond(new AIMessage("done"));
    const agent = createAgent({ model, tools: [mine], middleware: [effectgateMiddleware(gate, { scope: () => scope })], checkpointer: new MemorySaver() });
    const out = await agent.invoke({ messages: [{ role: "user", content: "go" }] }, { configurable: { thread_id: "j2" } });
    expect(toolText(out.messages)).toEqual(["charged 30"]);
  });
});

describe("LangChain: a bad input to a gate tool given to createAgent with langchainTool", () => {
  it("LangChain's own refusal (its stack trace) never reaches the model: the gate answers EG_INVALID_INPUT with the issues, nothing runs", async () => {
    runs.length = 0;
    const gate = gateWith([charge]);
    const model = fakeModel().respondWithTools([{ id: "call_1", name: "charge_card", args: { amount: "lots" } }]).respond(new AIMessage("done"));
    const agent = createAgent({ model, tools: [langchainTool(gate, charge, { scope: () => scope })], checkpointer: new MemorySaver() });
    const out = await agent.invoke({ messages: [{ role: "user", content: "go" }] }, { configurable: { thread_id: "b1" } });
    const [answer] = toolText(out.messages);
    expect(answer).toMatch(/^EG_INVALID_INPUT: the input for charge_card does not match its schema: amount: .*number.*Nothing was executed; fix the input and call again\.$/);
    expect(answer).not.toMatch(LEAK);
    expect(runs).toEqual([]);
  });
});

describe("no stack trace or file path reaches the model, through any adapter: a tool error that embeds its cause's stack", () => {
  it("effectgate/langchain (langchainTool in createAgent)", async () => {
    const gate = gateWith([charge]);
    const model = fakeModel().respondWithTools([{ id: "call_1", name: "charge_card", args: { amount: 30 } }]).respond(new AIMessage("done"));
    const agent = createAgent({ model, tools: [langchainTool(gate, charge, { scope: () => scope })], checkpointer: new MemorySaver() });
    const out = await agent.invoke({ messages: [{ role: "user", content: "go" }] }, { configurable: { thread_id: "s1" } });
    const [answer] = toolText(out.messages);
    expect(answer).toMatch(/^EG_TOOL_FAILED: charge_card failed: the payments client failed: Error: connect ECONNREFUSED 127\.0\.0\.1:9$/);
    expect(answer).not.toMatch(LEAK);
  });

  it("effectgate/ai-sdk (generateText with MockLanguageModelV3): the tool-error the model reads", async () => {
    const gate = gateWith([charge]);
    const [result] = (await toolOutputsOfOneCall(gate)) as { output: { type: string; value: string } }[];
    expect(result?.output.type).toBe("error-text");
    expect(result?.output.value).toMatch(/^EG_TOOL_FAILED: charge_card failed: the payments client failed: Error: connect ECONNREFUSED 127\.0\.0\.1:9$/);
    expect(result?.output.value).not.toMatch(LEAK);
  });

  it("effectgate/openai-agents (run with a Model of the tests' own): the function_call_result the model reads", async () => {
    const gate = gateWith([charge]);
    const agent = new Agent({ name: "a", model: plannedModel([{ callId: "call_1", name: "charge_card", input: { amount: 30 } }]), tools: [agentsTool(gate, charge, { scope: () => scope })] });
    const out = await run(agent, "go");
    expect(out.finalOutput).toMatch(/^charge_card: EG_TOOL_FAILED: charge_card failed: the payments client failed: Error: connect ECONNREFUSED 127\.0\.0\.1:9$/);
    expect(out.finalOutput).not.toMatch(LEAK);
  });

  it("effectgate/anthropic (the SDK's tool runner over a fake Messages API): the tool_result the model reads", async () => {
    const gate = gateWith([charge]);
    const api = await startFakeMessagesApi([[toolUse("tu_1", "charge_card", { amount: 30 })], [textBlock("done")]]);
    closers.push(() => api.close());
    const client = new Anthropic({ apiKey: "test-key", baseURL: api.url, maxRetries: 0 });
    await client.beta.messages.toolRunner({ model: "claude-test", max_tokens: 100, messages: [{ role: "user", content: "go" }], tools: anthropicTools(gate, { scope: () => scope }), thread: false }).runUntilDone();
    const result = toolResultsOf(api.requests.at(-1)!.messages)[0];
    expect(result).toMatchObject({ tool_use_id: "tu_1", is_error: true });
    expect(textOf(result!.content)).toMatch(/^Error: EG_TOOL_FAILED: charge_card failed: the payments client failed: Error: connect ECONNREFUSED 127\.0\.0\.1:9$/);
    expect(textOf(result!.content)).not.toMatch(LEAK);
  });
});

function toolResultsOf(messages: { role: string; content: unknown }[]) {
  return messages.flatMap((m) => (Array.isArray(m.content) ? m.content : [])).filter((b: { type?: string }) => b.type === "tool_result") as
    { tool_use_id: string; content: unknown; is_error?: boolean }[];
}
const textOf = (content: unknown): string => typeof content === "string" ? content
  : Array.isArray(content) ? content.map((b: { text?: string }) => b.text ?? "").join("") : JSON.stringify(content);

/** docs/adapters.md quotes what the model reads in each SDK; these hold the quotes to the real SDKs. */
describe("what docs/adapters.md says the model reads", () => {
  const approvals = { approvals: { rules: [{ tool: "charge_card", reason: "charges need a person" }] } };
  const counted = () => {
    const ran: unknown[] = [];
    const tool = defineTool({
      name: "charge_card", description: "Charge the card", effect: "write", input: z.object({ amount: z.number() }),
      execute: (input) => {
        ran.push(input);
        return { charged: input.amount };
      },
    });
    return { ran, tool };
  };

  it("OpenAI Agents SDK, zod parameters: a call that violates the schema never reaches the gate; the model reads the SDK's own error text", async () => {
    const { ran, tool } = counted();
    const gate = gateWith([tool]);
    const agent = new Agent({ name: "a", model: plannedModel([{ callId: "call_1", name: "charge_card", input: { amount: "lots" } }]), tools: [agentsTool(gate, tool, { scope: () => scope })] });
    const out = await run(agent, "go");
    expect(out.finalOutput).toBe("charge_card: An error occurred while running the tool. Please try again. Error: InvalidToolInputError: Invalid JSON input for tool");
    expect(ran).toEqual([]);
    expect(await gate.ledger.calls.list({ tenant: "acme", limit: 10 })).toEqual([]);
  });

  it("OpenAI Agents SDK: a refusal is the EG_… text the adapter's execute returns (no prefix of the SDK's)", async () => {
    const { ran, tool } = counted();
    const gate = gateWith([tool], approvals);
    const agent = new Agent({ name: "a", model: plannedModel([{ callId: "call_1", name: "charge_card", input: { amount: 30 } }]), tools: [agentsTool(gate, tool, { scope: () => scope, approvals: false })] });
    const out = await run(agent, "go");
    expect(out.finalOutput).toMatch(/^charge_card: EG_AWAITING_APPROVAL: this charge_card call needs a person's approval before it runs \(charges need a person\)\. /);
    expect(ran).toEqual([]);
  });

  it("Anthropic tool runner: a refusal reaches the model as `Error: EG_…` (the runner's prefix), with is_error", async () => {
    const { ran, tool } = counted();
    const gate = gateWith([tool], approvals);
    const results = await anthropicTurn(gate, { amount: 30 });
    expect(results).toEqual([expect.objectContaining({ tool_use_id: "tu_1", is_error: true })]);
    expect(textOf(results[0]!.content)).toMatch(/^Error: EG_AWAITING_APPROVAL: this charge_card call needs a person's approval before it runs \(charges need a person\)\. /);
    expect(ran).toEqual([]);
  });

  it("Anthropic tool runner: a bad input is `Error: EG_INVALID_INPUT: …` with the issues", async () => {
    const { ran, tool } = counted();
    const results = await anthropicTurn(gateWith([tool]), { amount: "lots" });
    expect(textOf(results[0]!.content)).toBe("Error: EG_INVALID_INPUT: the input for charge_card does not match its schema: amount: Invalid input: expected number, received string. " +
      "Nothing was executed; fix the input and call again.");
    expect(ran).toEqual([]);
  });

  it("LangChain: a bad input to a JSON Schema tool is the EG_INVALID_INPUT the LangChain section quotes; bare, LangChain's own text carries its stack", async () => {
    const schema = { type: "object" as const, properties: { amount: { type: "number" as const } }, required: ["amount"] };
    const mine = langchainOwnTool(async () => "charged", { name: "charge", description: "Charge", schema });
    const gate = gateWith([fromLangChainTool(mine, { effect: "write" })]);
    const ask = () => fakeModel().respondWithTools([{ id: "call_1", name: "charge", args: { amount: "lots" } }]).respond(new AIMessage("done"));
    const gated = await createAgent({ model: ask(), tools: [mine], middleware: [effectgateMiddleware(gate, { scope: () => scope })] }).invoke({ messages: [{ role: "user", content: "go" }] });
    expect(toolText(gated.messages)).toEqual(["EG_INVALID_INPUT: the input for charge does not match its schema: amount: Instance type \"string\" is invalid. Expected \"number\". " +
      "Nothing was executed; fix the input and call again."]);
    const bare = await createAgent({ model: ask(), tools: [mine] }).invoke({ messages: [{ role: "user", content: "go" }] });
    const [text] = toolText(bare.messages);
    expect(text).toMatch(/^Error invoking tool 'charge' with kwargs \{"amount":"lots"\} with error: /);
    expect(text).toMatch(LEAK);
  });

  it("AI SDK: a refusal is a tool-error whose text is the EG_… message (output { type: \"error-text\" })", async () => {
    const { ran, tool } = counted();
    const gate = gateWith([tool]);
    await setKillSwitch(gate.ledger, true, {}, { by: "ops", reason: "incident 7" });
    const seen = await toolOutputsOfOneCall(gate);
    expect(seen[0]?.output.type).toBe("error-text");
    expect(String(seen[0]?.output.value)).toMatch(/^EG_KILL_SWITCH: /);
    expect(ran).toEqual([]);
  });
});

it("AI SDK: a bad input is the SDK's own text (it checks inputSchema before execute): no stack trace, nothing runs", async () => {
  const ran: unknown[] = [];
  const tool = defineTool({ name: "charge_card", description: "Charge", effect: "write", input: z.object({ amount: z.number() }), execute: (input) => ran.push(input) });
  const seen = await aiSdkTurn(gateWith([tool]), { amount: "lots" });
  expect(seen[0]?.output.type).toBe("error-text");
  const text = String(seen[0]?.output.value);
  expect(text.startsWith('Invalid input for tool charge_card: Type validation failed: Value: {"amount":"lots"}.\nError message: ')).toBe(true);
  expect(text).toContain("Invalid input: expected number, received string");
  expect(text).not.toMatch(LEAK);
  expect(ran).toEqual([]);
});

describe("withoutStackTrace: the frames V8 prints go, every other line stays", () => {
  it("drops each form of frame, keeps the message, its cause's first line and LangChain's hint", () => {
    const text = [
      "EG_TOOL_FAILED: charge failed: Error invoking tool 'charge' with error: Error: Received tool input did not match expected schema",
      "    at DynamicStructuredTool.call (file:///home/a b/node_modules/@langchain/core/dist/tools/index.js:120:11)",
      "    at async Promise.all (index 0)",
      "    at new Client (<anonymous>)",
      "    at /srv/app/src/tools/charge.ts:67:88",
      "    at process.processTicksAndRejections (node:internal/process/task_queues:95:5)",
      "  → at amount",
      " Please fix the error and try again.",
    ].join("\n");
    expect(withoutStackTrace(text)).toBe("EG_TOOL_FAILED: charge failed: Error invoking tool 'charge' with error: Error: Received tool input did not match expected schema\n" +
      "  → at amount\n Please fix the error and try again.");
    expect(withoutStackTrace("EG_KILL_SWITCH: stopped at 12:00 by ops")).toBe("EG_KILL_SWITCH: stopped at 12:00 by ops");
  });
});

/** One generateText turn in which the model asks for charge_card with `input`: the tool results the model then reads. */
async function aiSdkTurn(gate: Gate, input: unknown) {
  const seen: { output: { type: string; value: unknown } }[] = [];
  let step = 0;
  const model = new MockLanguageModelV3({
    doGenerate: async (options: LanguageModelV3CallOptions) => {
      seen.push(...options.prompt.flatMap((m) => (m.role === "tool" ? m.content : [])) as never[]);
      const calls = step++ === 0;
      return {
        content: calls ? [{ type: "tool-call", toolCallId: "call_1", toolName: "charge_card", input: JSON.stringify(input) }] : [{ type: "text", text: "done" }],
        finishReason: { unified: calls ? "tool-calls" : "stop", raw: undefined },
        usage: { inputTokens: { total: 1, noCache: 1, cacheRead: undefined, cacheWrite: undefined }, outputTokens: { total: 1, text: 1, reasoning: undefined } },
        warnings: [],
      };
    },
  });
  await generateText({ model, tools: aiSdkTools(gate, { scope: () => scope }), prompt: "go", stopWhen: stepCountIs(3) });
  return seen;
}

async function anthropicTurn(gate: Gate, input: unknown) {
  const api = await startFakeMessagesApi([[toolUse("tu_1", "charge_card", input)], [textBlock("done")]]);
  closers.push(() => api.close());
  const client = new Anthropic({ apiKey: "test-key", baseURL: api.url, maxRetries: 0 });
  await client.beta.messages.toolRunner({ model: "claude-test", max_tokens: 100, messages: [{ role: "user", content: "go" }], tools: anthropicTools(gate, { scope: () => scope }), thread: false }).runUntilDone();
  return toolResultsOf(api.requests.at(-1)!.messages);
}
