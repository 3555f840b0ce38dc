/**
 * The AI SDK's own retries never re-run a write through effectgate/ai-sdk: `maxRetries` retries
 * the model call (never a tool), a turn re-sent after the retries ran out re-plans the charge
 * under a new call id, and a tool whose reply was lost (a timeout) makes the loop's next step ask
 * for the charge again. The real `ai` package (6) with its MockLanguageModelV3; the payments
 * service on 127.0.0.1 counts the charges it applies. Each path is shown first without effectgate
 * where the bare SDK makes the effect twice.
 */
import { join } from "node:path";
import { APICallError, generateText, stepCountIs, tool, type ModelMessage, type ToolSet } from "ai";
import { MockLanguageModelV3 } from "ai/test";
import type { LanguageModelV3CallOptions, LanguageModelV3Content } from "@ai-sdk/provider";
import { afterEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { aiSdkTools } from "../../src/ai-sdk.js";
import { createGate, defineTool } from "../../src/index.js";
import { sqliteLedger } from "../../src/sqlite.js";
import { startChargeService, type ChargeService } from "../support/charge-service.js";
import { tempDir } from "../support/tmp.js";
import { toolCalls } from "./ai-sdk-support.js";

const scope = () => ({ tenant: "acme", task: "chat-1" });
const prompt: ModelMessage[] = [{ role: "user", content: "charge me 30" }];
const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
});

const usage = {
  inputTokens: { total: 1, noCache: 1, cacheRead: undefined, cacheWrite: undefined },
  outputTokens: { total: 1, text: 1, reasoning: undefined },
};
const answer = (content: LanguageModelV3Content[]) => ({
  content, finishReason: { unified: content.some((c) => c.type === "tool-call") ? "tool-calls" as const : "stop" as const, raw: undefined }, usage, warnings: [],
});
/** What a provider throws for a 529: retryable, with a retry-after-ms that keeps the SDK's backoff short. */
const overloaded = () => new APICallError({
  message: "Overloaded", url: "http://127.0.0.1/v1/messages", requestBodyValues: {}, statusCode: 529, isRetryable: true, responseHeaders: { "retry-after-ms": "1" },
});

/** The tool results the model was sent, in its prompt. */
function resultsIn(options: LanguageModelV3CallOptions) {
  return options.prompt.flatMap((m) => (m.role === "tool" ? m.content : [])).filter((p) => p.type === "tool-result");
}

async function payments(options: Parameters<typeof startChargeService>[0] = { instant: true }): Promise<ChargeService> {
  const service = await startChargeService(options);
  closers.push(() => service.close());
  return service;
}

async function charge(service: ChargeService, key: string, input: unknown, signal: AbortSignal): Promise<unknown> {
  const res = await fetch(`${service.url}/charges`, {
    method: "POST", headers: { "content-type": "application/json", "idempotency-key": key }, body: JSON.stringify(input), signal,
  });
  return res.json();
}

function gateFor(service: ChargeService, spec: { key?: "derived"; timeoutMs?: number } = {}) {
  const gate = createGate({
    tools: [defineTool({
      name: "charge_card", effect: "write", input: z.object({ amount: z.number() }), settleMs: 30_000, ...spec,
      execute: (input, ctx) => charge(service, ctx.idempotencyKey, input, ctx.signal),
      async probe(_input, ctx) {
        const found = (await (await fetch(`${service.url}/charges?key=${encodeURIComponent(ctx.idempotencyKey)}`)).json()) as { status: string; charge?: unknown };
        return found.status === "done" ? { status: "done", result: found.charge } : { status: "absent" };
      },
    })],
    ledger: sqliteLedger(join(tempDir(), "ledger.db")), onAlert: () => {},
  });
  closers.push(() => gate.close());
  return gate;
}

/** The same charge tool without effectgate, keyed by the SDK's call id. */
function bareTool(service: ChargeService, timeoutMs?: number) {
  return tool({
    inputSchema: z.object({ amount: z.number() }),
    execute: (input, { toolCallId, abortSignal }) =>
      charge(service, toolCallId, input, timeoutMs === undefined ? abortSignal ?? new AbortController().signal : AbortSignal.timeout(timeoutMs)),
  });
}

describe("maxRetries retries the model call after the tool ran", () => {
  /** Step 1 asks for the charge; the next two model calls fail with a retryable 529; then the model answers. */
  function failingAfterTool() {
    let n = 0;
    return new MockLanguageModelV3({
      doGenerate: async () => {
        n++;
        if (n === 1) return answer(toolCalls({ id: "call_1", name: "charge_card", input: { amount: 30 } }));
        if (n <= 3) throw overloaded();
        return answer([{ type: "text", text: "charged" }]);
      },
    });
  }

  it("the SDK retries only the model call, bare or through the adapter: one charge, the model called four times", async () => {
    for (const through of ["bare", "adapter"] as const) {
      const service = await payments();
      const tools = through === "bare" ? { charge_card: bareTool(service) } : aiSdkTools(gateFor(service), { scope });
      const model = failingAfterTool();
      const result = await generateText({ model, tools, messages: prompt, maxRetries: 2, stopWhen: stepCountIs(5) });
      expect(result.text).toBe("charged");
      expect(model.doGenerateCalls).toHaveLength(4);
      expect(service.charges).toHaveLength(1);
    }
  });
});

describe("a turn re-sent after the model call's retries ran out", () => {
  /**
   * Step 1 asks for the charge; the call after it fails past maxRetries. The app re-sends the turn,
   * and the model plans the same charge again, as a new call (call_2); once it has a result it answers.
   */
  function replanningModel() {
    let n = 0;
    return new MockLanguageModelV3({
      doGenerate: async (options) => {
        n++;
        if (resultsIn(options).length > 0) {
          if (n <= 4) throw overloaded();
          return answer([{ type: "text", text: "charged" }]);
        }
        return answer(toolCalls({ id: `call_${n === 1 ? 1 : 2}`, name: "charge_card", input: { amount: 30 } }));
      },
    });
  }

  async function turnWithResend(tools: ToolSet) {
    const model = replanningModel();
    await expect(generateText({ model, tools, messages: prompt, maxRetries: 2, stopWhen: stepCountIs(5) })).rejects.toThrow(/Overloaded/);
    // The app's own retry: the turn again, from the user's message.
    return generateText({ model, tools, messages: prompt, maxRetries: 2, stopWhen: stepCountIs(5) });
  }

  it("without effectgate the re-planned call charges again (the path exists)", async () => {
    const service = await payments();
    const result = await turnWithResend({ charge_card: bareTool(service) });
    expect(result.text).toBe("charged");
    expect(service.charges).toHaveLength(2);
  });

  it("through the adapter keyed by the call id (the default) the re-plan is a new call and charges again: the derived key is what collapses it", async () => {
    const service = await payments();
    await turnWithResend(aiSdkTools(gateFor(service), { scope }));
    expect(service.charges.map((c) => c.key)).toEqual(["call_1", "call_2"]);
  });

  it("through the adapter, a tool keyed by its input (key: \"derived\") collapses the re-plan: one charge, and call_2 gets its result", async () => {
    const service = await payments();
    const result = await turnWithResend(aiSdkTools(gateFor(service, { key: "derived" }), { scope }));
    expect(result.text).toBe("charged");
    expect(service.charges).toHaveLength(1);
    const answered = result.steps[0]!.toolResults;
    expect(answered.map((r) => r.toolCallId)).toEqual(["call_2"]);
    expect(answered[0]!.output).toMatchObject({ id: service.charges[0]!.id, key: service.charges[0]!.key });
  });
});

describe("a tool whose reply is lost (a timeout), and the loop's next step", () => {
  /** Asks for the charge; after an error result it asks again as a new call, after a success it answers. */
  function retryingOnErrorModel() {
    return new MockLanguageModelV3({
      doGenerate: async (options) => {
        const results = resultsIn(options);
        const last = results.at(-1);
        if (last === undefined) return answer(toolCalls({ id: "call_1", name: "charge_card", input: { amount: 30 } }));
        if (last.output.type === "error-text" || last.output.type === "error-json") {
          return answer(toolCalls({ id: `call_${results.length + 1}`, name: "charge_card", input: { amount: 30 } }));
        }
        return answer([{ type: "text", text: "charged" }]);
      },
    });
  }

  it("without effectgate the timeout is an error, and the next step charges again (the path exists)", async () => {
    // The first charge lands but its reply never comes; the tool gives up after 300 ms.
    const service = await payments({ decide: (n) => (n === 1 ? "lose-reply" : "land") });
    const result = await generateText({ model: retryingOnErrorModel(), tools: { charge_card: bareTool(service, 300) }, messages: prompt, stopWhen: stepCountIs(5) });
    expect(result.text).toBe("charged");
    expect(service.charges).toHaveLength(2);
  });

  it("through the adapter the probe settles the lost reply: one charge, the model gets it and asks for nothing more", async () => {
    const service = await payments({ decide: (n) => (n === 1 ? "lose-reply" : "land") });
    const model = retryingOnErrorModel();
    const result = await generateText({ model, tools: aiSdkTools(gateFor(service, { timeoutMs: 300 }), { scope }), messages: prompt, stopWhen: stepCountIs(5) });
    expect(result.text).toBe("charged");
    expect(service.charges).toHaveLength(1);
    expect(service.received).toHaveLength(1);
    expect(result.steps[0]!.toolResults[0]!.output).toMatchObject({ id: service.charges[0]!.id });
    expect(model.doGenerateCalls).toHaveLength(2);
  });
});
