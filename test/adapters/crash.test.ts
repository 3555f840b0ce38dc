/**
 * Each adapter under a real SIGKILL: a child agent process (fixtures/agent.mjs, langgraph-agent.mjs; built package,
 * real SDK with its offline double) is killed right after its tool's charge landed and before the
 * outcome was recorded; a fresh process resumes from the loop's checkpoint (for LangGraph, its own
 * checkpointer on a SQLite file: @langchain/langgraph-checkpoint-sqlite). The payments
 * service's own count is the ground truth: one charge, and the agent gets that charge's result.
 */
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { startChargeService, type ChargeService } from "../support/charge-service.js";
import { requireBuild, runFixture } from "../support/processes.js";
import { newerSdkLines, newerSdkLinesNote } from "../support/sdk-lines.js";
import { tempDir } from "../support/tmp.js";
import { startFakeMessagesApi, textBlock, toolUse, type FakeMessagesApi } from "./fake-messages-api.js";

const agent = fileURLToPath(new URL("./fixtures/agent.mjs", import.meta.url));
const langgraphAgent = fileURLToPath(new URL("./fixtures/langgraph-agent.mjs", import.meta.url));
beforeAll(() => requireBuild());

const open: { close(): Promise<void> }[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((s) => s.close()));
});

async function crashThenResume(sdk: "ai-sdk" | "ai-sdk-v7" | "anthropic", payments: ChargeService, api?: FakeMessagesApi) {
  const dir = tempDir();
  const job = { sdk, ledger: join(dir, "ledger.db"), checkpoint: join(dir, "checkpoint.json"), payments: payments.url, api: api?.url };
  const crashed = await runFixture(agent, { ...job, mode: "crash" }, { cwd: dir, label: `${sdk} agent (crash)` });
  expect(crashed.signal, crashed.stderr).toBe("SIGKILL");
  expect(payments.charges).toHaveLength(1);
  const resumed = await runFixture(agent, { ...job, mode: "resume" }, { cwd: dir, label: `${sdk} agent (resume)` });
  expect(resumed.code, resumed.stderr).toBe(0);
  return resumed.lines.at(-1) as { result: unknown; final: string; sdk?: string };
}

describe("a run killed right after its tool's effect, resumed from its checkpoint in a fresh process", () => {
  it("effectgate/ai-sdk: the charge happened once and the agent gets that charge", async () => {
    const payments = await startChargeService({ instant: true });
    open.push(payments);
    const out = await crashThenResume("ai-sdk", payments);
    expect(payments.charges).toHaveLength(1);
    expect(out.result).toEqual({ type: "json", value: expect.objectContaining({ id: payments.charges[0]!.id }) });
    expect(out.final).toBe("charged");
  });

  it(`effectgate/ai-sdk on ai 7 (onToolExecutionStart checkpoints the call): the charge happened once and the agent gets that charge${newerSdkLinesNote}`, { skip: !newerSdkLines }, async () => {
    const payments = await startChargeService({ instant: true });
    open.push(payments);
    const out = await crashThenResume("ai-sdk-v7", payments);
    expect(out.sdk).toMatch(/^7\./);
    expect(payments.charges).toHaveLength(1);
    expect(out.result).toEqual({ type: "json", value: expect.objectContaining({ id: payments.charges[0]!.id }) });
    expect(out.final).toBe("charged");
  });

  it("effectgate/anthropic: the charge happened once and the agent gets that charge", async () => {
    const payments = await startChargeService({ instant: true });
    const api = await startFakeMessagesApi([[toolUse("tu_1", "charge_card", { amount: 30 })], [textBlock("charged")]]);
    open.push(payments, api);
    const out = await crashThenResume("anthropic", payments, api);
    expect(payments.charges).toHaveLength(1);
    expect(out.result).toMatchObject({ tool_use_id: "tu_1", is_error: false, content: expect.stringContaining(payments.charges[0]!.id) });
    expect(out.final).toBe("charged");
  });

  it("LangGraph without effectgate: the resumed thread re-runs the tools node and charges again (the path the adapter closes)", async () => {
    const payments = await startChargeService({ instant: true });
    open.push(payments);
    const dir = tempDir();
    const job = { via: "bare", ledger: join(dir, "ledger.db"), checkpoints: join(dir, "checkpoints.db"), payments: payments.url };
    const crashed = await runFixture(langgraphAgent, { ...job, mode: "crash" }, { cwd: dir, label: "langgraph agent (crash)" });
    expect(crashed.signal, crashed.stderr).toBe("SIGKILL");
    const resumed = await runFixture(langgraphAgent, { ...job, mode: "resume" }, { cwd: dir, label: "langgraph agent (resume)" });
    expect(resumed.code, resumed.stderr).toBe(0);
    expect(payments.charges.map((c) => c.key)).toEqual(["call_1", "call_1"]);
  });

  for (const via of ["tool", "middleware"] as const) {
    it(`effectgate/langchain (${via === "tool" ? "langchainTool" : "effectgateMiddleware"}, createAgent on a SQLite checkpointer): the charge happened once and the agent gets that charge`, async () => {
      const payments = await startChargeService({ instant: true });
      open.push(payments);
      const dir = tempDir();
      const job = { via, ledger: join(dir, "ledger.db"), checkpoints: join(dir, "checkpoints.db"), payments: payments.url };
      const crashed = await runFixture(langgraphAgent, { ...job, mode: "crash" }, { cwd: dir, label: "langgraph agent (crash)" });
      expect(crashed.signal, crashed.stderr).toBe("SIGKILL");
      expect(payments.charges).toHaveLength(1);

      const resumed = await runFixture(langgraphAgent, { ...job, mode: "resume" }, { cwd: dir, label: "langgraph agent (resume)" });
      expect(resumed.code, resumed.stderr).toBe(0);
      const out = resumed.lines.at(-1) as { tool: { tool_call_id: string; status: string; content: string }; final: string; messages: string[] };
      expect(payments.charges).toHaveLength(1);
      expect(payments.received).toHaveLength(1);
      // The resumed thread is the crashed one (the checkpointer kept the AI message with call_1), answered with that charge.
      expect(out.messages).toEqual(["human", "ai", "tool", "ai"]);
      expect(out.tool).toMatchObject({ tool_call_id: "call_1", status: "success" });
      expect(out.tool.content).toContain(payments.charges[0]!.id);
      expect(out.final).toBe("charged");
    });
  }
});
