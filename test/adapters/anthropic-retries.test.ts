/**
 * The Anthropic SDK's own retries never re-run a write through effectgate/anthropic: the
 * client's `maxRetries` re-sends the request after the tool ran (the fake Messages API on
 * 127.0.0.1 answers it 529, 500, or drops the connection), the same runner iterated again after
 * the retries ran out, and a job retried from its checkpoint (a fresh runner over the saved
 * reply). The payments service on 127.0.0.1 counts the charges it applies. Where the bare SDK
 * makes the effect twice (the retried job), that is shown first.
 */
import { join } from "node:path";
import Anthropic from "@anthropic-ai/sdk";
import { betaZodTool } from "@anthropic-ai/sdk/helpers/beta/zod";
import { afterEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { anthropicTools } from "../../src/anthropic.js";
import { createGate, defineTool } from "../../src/index.js";
import { sqliteLedger } from "../../src/sqlite.js";
import { postCharge, startChargeService, type ChargeService } from "../support/charge-service.js";
import { tempDir } from "../support/tmp.js";
import { dropped, overloaded, serverError, startFakeMessagesApi, textBlock, toolUse, type FakeMessagesApi, type Reply } from "./fake-messages-api.js";

const scope = () => ({ tenant: "acme", task: "chat-1" });
const user = { role: "user" as const, content: "charge me 30" };
const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
});

type Tools = Parameters<Anthropic["beta"]["messages"]["toolRunner"]>[0]["tools"];

async function api(replies: Reply[], maxRetries: number) {
  const fake = await startFakeMessagesApi(replies);
  closers.push(() => fake.close());
  return { fake, client: new Anthropic({ apiKey: "test-key", baseURL: fake.url, maxRetries }) };
}

async function payments(): Promise<ChargeService> {
  const service = await startChargeService({ instant: true });
  closers.push(() => service.close());
  return service;
}

/** charge_card without effectgate (keyed by the tool_use id), or through the adapter. */
function chargeTools(service: ChargeService, through: "bare" | "adapter"): Tools {
  if (through === "bare") {
    return [betaZodTool({
      name: "charge_card", description: "Charge", inputSchema: z.object({ amount: z.number() }),
      run: async (input, context) => JSON.stringify(await postCharge(service, context!.toolUse.id, input)),
    })];
  }
  const gate = createGate({
    tools: [defineTool({ name: "charge_card", description: "Charge", effect: "write", input: z.object({ amount: z.number() }), execute: (input, ctx) => postCharge(service, ctx.idempotencyKey, input) })],
    ledger: sqliteLedger(join(tempDir(), "ledger.db")), onAlert: () => {},
  });
  closers.push(() => gate.close());
  return anthropicTools(gate, { scope });
}

/** The tool_result blocks each request carried. */
const resultsOf = (fake: FakeMessagesApi) => fake.requests.map((r) =>
  r.messages.flatMap((m) => (Array.isArray(m.content) ? m.content : [])).filter((b: { type?: string }) => b.type === "tool_result"));

describe("the client's maxRetries re-sends the request that carries the tool's result", () => {
  for (const [what, failure] of [["529 overloaded", overloaded], ["500", serverError], ["a dropped connection", dropped]] as const) {
    it(`after ${what}: the tool ran once, bare or through the adapter, and the retry carried the same tool_result`, async () => {
      for (const through of ["bare", "adapter"] as const) {
        const service = await payments();
        const { fake, client } = await api([[toolUse("tu_1", "charge_card", { amount: 30 })], failure, failure, [textBlock("charged")]], 2);
        const final = await client.beta.messages.toolRunner({ model: "claude-test", max_tokens: 100, messages: [user], tools: chargeTools(service, through) }).runUntilDone();
        expect(final.content).toEqual([expect.objectContaining({ text: "charged" })]);
        expect(fake.requests).toHaveLength(4);
        expect(service.charges).toHaveLength(1);
        const [, first, second, third] = resultsOf(fake);
        expect(JSON.stringify(first)).toContain(service.charges[0]!.id);
        expect(second).toEqual(first);
        expect(third).toEqual(first);
      }
    });
  }

  it("after the retries ran out, the same runner iterated again sends the kept tool_result: the tool does not run again", async () => {
    for (const through of ["bare", "adapter"] as const) {
      const service = await payments();
      const { fake, client } = await api([[toolUse("tu_1", "charge_card", { amount: 30 })], overloaded, overloaded, [textBlock("charged")]], 1);
      const runner = client.beta.messages.toolRunner({ model: "claude-test", max_tokens: 100, messages: [user], tools: chargeTools(service, through) });
      await expect(runner.runUntilDone()).rejects.toThrow(/529/);
      // The runner's own loop once more (it can be iterated again after an error).
      const final = await runner.runUntilDone();
      expect(final.content).toEqual([expect.objectContaining({ text: "charged" })]);
      expect(service.charges).toHaveLength(1);
      expect(resultsOf(fake).at(-1)).toEqual(resultsOf(fake)[1]);
    }
  });
});

describe("a job retried from its checkpoint after the retries ran out", () => {
  /**
   * One attempt of a job: a runner over the saved conversation; the loop body saves each reply
   * before the runner runs its tools. A saved reply with a pending tool_use is handed back to the
   * runner (`setMessagesParams`), which answers it: what a resumed or retried job does.
   */
  async function attempt(client: Anthropic, tools: Tools, saved: { messages: Anthropic.Beta.BetaMessageParam[] }) {
    const resuming = saved.messages.length > 1;
    const runner = client.beta.messages.toolRunner({ model: "claude-test", max_tokens: 100, messages: resuming ? [{ role: "user", content: "resume" }] : saved.messages, tools, thread: false });
    let handed = false;
    for await (const reply of runner) {
      if (resuming && !handed) {
        handed = true;
        runner.setMessagesParams((params) => ({ ...params, messages: saved.messages }));
        continue;
      }
      saved.messages = [...saved.messages, { role: "assistant", content: reply.content }];
    }
  }

  /** The first attempt's second request fails past maxRetries (after the charge); the job is retried from the checkpoint. */
  async function retriedJob(service: ChargeService, through: "bare" | "adapter") {
    const { fake, client } = await api([
      [toolUse("tu_1", "charge_card", { amount: 30 })], overloaded, overloaded, // attempt 1: the charge, then 529 twice
      [textBlock("resuming")], [textBlock("charged")], // attempt 2: the loop's first turn, then the answer to the tool_result
    ], 1);
    const tools = chargeTools(service, through);
    const saved = { messages: [user] as Anthropic.Beta.BetaMessageParam[] };
    await expect(attempt(client, tools, saved)).rejects.toThrow(/529/);
    await attempt(client, tools, saved);
    return resultsOf(fake);
  }

  it("without effectgate the retried job runs the saved tool_use again: two charges (the path exists)", async () => {
    const service = await payments();
    await retriedJob(service, "bare");
    expect(service.charges).toHaveLength(2);
  });

  it("through the adapter the retried job charges once, and the model gets that charge's result again", async () => {
    const service = await payments();
    const results = await retriedJob(service, "adapter");
    expect(service.charges).toHaveLength(1);
    expect(JSON.stringify(results[1])).toContain(service.charges[0]!.id);
    expect(results.at(-1)).toEqual(results[1]);
  });
});
