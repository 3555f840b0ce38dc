/**
 * Each adapter under a real SIGKILL: a child agent process (fixtures/agent.mjs, built package,
 * real SDK with its offline double) is killed right after its tool's charge landed and before the
 * outcome was recorded; a fresh process resumes from the loop's checkpoint. The payments
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
});
