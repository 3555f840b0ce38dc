/**
 * The OpenAI Agents SDK's own retries never re-run a write through effectgate/openai-agents: the
 * runner's model retry (`modelSettings.retry`) retries the model request that fails after a tool
 * ran, never the tool. The real `@openai/agents` (0.14 on this lane) with a `Model` of the test's
 * own that fails once, retryably, right after the tool's result; the payments service on
 * 127.0.0.1 counts the charges it applies. Shown for the bare SDK tool and for the adapter.
 */
import { join } from "node:path";
import { Agent, run, setTracingDisabled, tool, Usage, type Model, type ModelRequest, type ModelResponse, type RunContext } from "@openai/agents";
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { agentsTool } from "../../src/openai-agents.js";
import { createGate, defineTool } from "../../src/index.js";
import { sqliteLedger } from "../../src/sqlite.js";
import { postCharge, startChargeService } from "../support/charge-service.js";
import { tempDir } from "../support/tmp.js";

beforeAll(() => setTracingDisabled(true));
const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
});

/** Asks for one charge; the request that carries its result fails once with a 503, then the model answers. */
function flakyAfterTheTool(): Model & { readonly requests: number } {
  let requests = 0;
  let failed = false;
  return {
    get requests() {
      return requests;
    },
    async getResponse(request: ModelRequest): Promise<ModelResponse> {
      requests++;
      const answered = (Array.isArray(request.input) ? request.input : []).some((i) => i.type === "function_call_result");
      if (!answered) {
        return { usage: new Usage(), output: [{ type: "function_call", id: "fc_1", callId: "call_1", name: "charge_card", arguments: JSON.stringify({ amount: 30 }), status: "completed" }] };
      }
      if (!failed) {
        failed = true;
        throw Object.assign(new Error("503 Service Unavailable"), { status: 503 });
      }
      return { usage: new Usage(), output: [{ type: "message", id: "msg_final", role: "assistant", status: "completed", content: [{ type: "output_text", text: "charged" }] }] };
    },
    async *getStreamedResponse() {
      throw new Error("the fake model does not stream");
    },
  };
}

const retrying = { retry: { maxRetries: 2, backoff: { initialDelayMs: 1, maxDelayMs: 1, jitter: false }, policy: () => true } };

describe("the runner's model retry (modelSettings.retry)", () => {
  it("without effectgate, retries the model request after the tool ran, never the tool: one charge", async () => {
    const payments = await startChargeService({ instant: true });
    closers.push(() => payments.close());
    const bare = tool({
      name: "charge_card", description: "Charge the card", parameters: z.object({ amount: z.number() }),
      execute: (input, _rc, details) => postCharge(payments, details?.toolCall?.callId ?? "?", input),
    });
    const model = flakyAfterTheTool();
    const result = await run(new Agent({ name: "billing", model, modelSettings: retrying, tools: [bare] }), "charge me 30");
    expect(result.finalOutput).toBe("charged");
    expect(model.requests).toBe(3);
    expect(payments.charges).toHaveLength(1);
  });

  it("through the adapter, the retried request carries the one recorded charge; the tool ran once", async () => {
    const payments = await startChargeService({ instant: true });
    const charge = defineTool({
      name: "charge_card", description: "Charge the card", effect: "write", input: z.object({ amount: z.number() }),
      execute: (input, ctx) => postCharge(payments, ctx.idempotencyKey, input),
    });
    const gate = createGate({ tools: [charge], ledger: sqliteLedger(join(tempDir(), "ledger.db")), onAlert: () => {} });
    closers.push(() => payments.close(), () => gate.close());
    const model = flakyAfterTheTool();
    const agent = new Agent<{ tenant: string }>({
      name: "billing", model, modelSettings: retrying,
      tools: [agentsTool(gate, charge, { scope: (rc: RunContext<{ tenant: string }>) => ({ tenant: rc.context.tenant, task: "chat-1" }) })],
    });
    const result = await run(agent, "charge me 30", { context: { tenant: "acme" } });
    expect(result.finalOutput).toBe("charged");
    expect(model.requests).toBe(3);
    expect(payments.charges.map((c) => c.key)).toEqual(["call_1"]);
    expect((await gate.ledger.calls.get("acme", "call_1"))).toMatchObject({ state: "completed", attempts: 1 });
  });
});
