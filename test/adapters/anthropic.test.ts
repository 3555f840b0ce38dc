/**
 * effectgate/anthropic with the real @anthropic-ai/sdk tool runner against a fake Messages API
 * on 127.0.0.1 (`baseURL`, `maxRetries: 0`). Effects are counted by real HTTP downstreams;
 * approvals are decided by the built `effectgate` CLI in another process.
 */
import { join } from "node:path";
import Anthropic from "@anthropic-ai/sdk";
import { betaZodTool } from "@anthropic-ai/sdk/helpers/beta/zod";
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { anthropicTools, fromAnthropicTool, waitingApprovals } from "../../src/anthropic.js";
import { createGate, defineTool, type Gate } from "../../src/index.js";
import { listApprovals } from "../../src/operator.js";
import { sqliteLedger } from "../../src/sqlite.js";
import { runCli } from "../cli/run-cli.js";
import { postCharge, startChargeService } from "../support/charge-service.js";
import { requireBuild } from "../support/processes.js";
import { tempDir } from "../support/tmp.js";
import { startFakeMessagesApi, textBlock, toolUse, type Block } from "./fake-messages-api.js";

beforeAll(() => requireBuild());

const scope = () => ({ tenant: "acme", task: "chat-1" });
const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
});

async function api(replies: Block[][]) {
  const fake = await startFakeMessagesApi(replies);
  closers.push(() => fake.close());
  return { fake, client: new Anthropic({ apiKey: "test-key", baseURL: fake.url, maxRetries: 0 }) };
}

async function setup() {
  const payments = await startChargeService({ instant: true });
  const mailer = await startChargeService({ instant: true });
  const ledgerPath = join(tempDir(), "ledger.db");
  const gate = createGate({
    tools: [
      defineTool({
        name: "charge_card", description: "Charge the card", effect: "write", input: z.object({ amount: z.number() }),
        execute: (input, ctx) => postCharge(payments, ctx.idempotencyKey, input),
      }),
      defineTool({
        name: "send_receipt", description: "Send a receipt", effect: "write", input: z.object({ to: z.string() }),
        execute: (input, ctx) => postCharge(mailer, ctx.idempotencyKey, { amount: 1, to: input.to }),
      }),
    ],
    ledger: sqliteLedger(ledgerPath),
    policy: { approvals: { rules: [{ tool: "charge_card", reason: "charges need a person" }] } },
    onAlert: () => {},
  });
  closers.push(() => payments.close(), () => mailer.close(), () => gate.close());
  return { gate, payments, mailer, ledgerPath };
}

/** The tool_result blocks the runner sent in its requests. */
function sentResults(requests: { messages: { role: string; content: unknown }[] }[]) {
  const last = requests.at(-1)?.messages ?? [];
  return last.flatMap((m) => (Array.isArray(m.content) ? m.content : [])).filter((b: { type?: string }) => b.type === "tool_result") as
    { tool_use_id: string; content: unknown; is_error?: boolean }[];
}

const messages = [{ role: "user" as const, content: "charge me 30" }];

/** Polls until `check` holds (a condition, not a timing assertion); fails after many tries. */
async function until(check: () => Promise<boolean>): Promise<void> {
  for (let i = 0; i < 400; i++) {
    if (await check()) return;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  throw new Error("condition never held");
}

// A conversation saved with the assistant reply whose tool_use is not answered yet. A loop that resumes it hands it to
// the runner in the loop body (`setMessagesParams`: the caller takes over the history), and the runner answers that
// last reply's tools. Resumed twice (a retried request handler, two workers), it runs them twice.
const saved = [
  { role: "user" as const, content: "charge me 30" },
  { role: "assistant" as const, content: [{ type: "tool_use" as const, id: "tu_1", name: "charge_card", input: { amount: 30 } }] },
];

/** A loop that resumes `saved`: its first turn only opens the loop; the body hands the runner the saved history. */
async function resume(client: Anthropic, tools: Parameters<Anthropic["beta"]["messages"]["toolRunner"]>[0]["tools"]) {
  const runner = client.beta.messages.toolRunner({ model: "claude-test", max_tokens: 100, messages: [{ role: "user", content: "resume" }], tools, thread: false });
  let handed = false;
  for await (const _reply of runner) {
    if (handed) continue;
    handed = true;
    runner.setMessagesParams((params) => ({ ...params, messages: saved }));
  }
}

describe("effectgate/anthropic: the runner's own duplicate path", () => {
  it("without effectgate, a saved conversation resumed twice runs its pending tool twice (the path exists)", async () => {
    const payments = await startChargeService({ instant: true });
    closers.push(() => payments.close());
    const { client } = await api([[textBlock("resuming")], [textBlock("done")]]);
    const charge = betaZodTool({
      name: "charge_card", description: "Charge", inputSchema: z.object({ amount: z.number() }),
      run: async (input, context) => JSON.stringify(await postCharge(payments, context!.toolUse.id, input)),
    });
    for (let i = 0; i < 2; i++) await resume(client, [charge]);
    expect(payments.charges).toHaveLength(2);
  });

  it("through the adapter the same resume twice charges once, and the model gets that one charge's result both times", async () => {
    const payments = await startChargeService({ instant: true });
    const gate = createGate({
      tools: [defineTool({ name: "charge_card", effect: "write", input: z.object({ amount: z.number() }), execute: (input, ctx) => postCharge(payments, ctx.idempotencyKey, input) })],
      ledger: sqliteLedger(join(tempDir(), "l.db")), onAlert: () => {},
    });
    closers.push(() => payments.close(), () => gate.close());
    const { client, fake } = await api([[textBlock("resuming")], [textBlock("done")], [textBlock("resuming")], [textBlock("done")]]);
    const sent: unknown[] = [];
    for (let i = 0; i < 2; i++) {
      await resume(client, anthropicTools(gate, { scope }));
      sent.push(sentResults(fake.requests));
    }
    expect(payments.charges).toHaveLength(1);
    const [first] = sent[0] as ReturnType<typeof sentResults>;
    expect(first?.is_error ?? false).toBe(false);
    expect(JSON.stringify(first?.content)).toContain(payments.charges[0]!.id);
    expect(sent[1]).toEqual(sent[0]);
  });

  it("runs on the default message thread too, keyed by the tool_use id", async () => {
    const payments = await startChargeService({ instant: true });
    const gate = createGate({
      tools: [defineTool({ name: "charge_card", effect: "write", input: z.object({ amount: z.number() }), execute: (input, ctx) => postCharge(payments, ctx.idempotencyKey, input) })],
      ledger: sqliteLedger(join(tempDir(), "l.db")), onAlert: () => {},
    });
    closers.push(() => payments.close(), () => gate.close());
    const { client } = await api([[toolUse("tu_7", "charge_card", { amount: 5 })], [textBlock("done")]]);
    const final = await client.beta.messages.toolRunner({ model: "claude-test", max_tokens: 100, messages, tools: anthropicTools(gate, { scope }) });
    expect(final.content).toEqual([expect.objectContaining({ type: "text", text: "done" })]);
    expect(payments.received.map((r) => r.key)).toEqual(["tu_7"]);
  });
});

describe("effectgate/anthropic: approvals", () => {
  async function pending(gate: Gate): Promise<string[]> {
    return (await listApprovals(gate.ledger, { state: "pending" })).map((a) => a.id);
  }

  it("a call waits in the runner for a person's approval from the CLI while the rest of its batch runs, then runs once", async () => {
    const { gate, payments, mailer, ledgerPath } = await setup();
    const { client, fake } = await api([
      [toolUse("tu_1", "charge_card", { amount: 30 }), toolUse("tu_2", "send_receipt", { to: "a@b.c" })],
      [textBlock("done")],
    ]);
    const tools = anthropicTools(gate, { scope, waitForApproval: { pollMs: 20 } });
    const finished = client.beta.messages.toolRunner({ model: "claude-test", max_tokens: 100, messages, tools, thread: false }).runUntilDone();
    await until(async () => (await pending(gate)).length === 1);
    // The receipt ran while the charge waits.
    await until(async () => mailer.charges.length === 1);
    expect(payments.received).toHaveLength(0);

    const [id] = await pending(gate);
    const cli = await runCli(["approvals", "approve", id!, "--db", ledgerPath, "--by", "alice"]);
    expect(cli.code, cli.stderr).toBe(0);
    const final = await finished;
    expect(final.content).toEqual([expect.objectContaining({ text: "done" })]);
    expect(payments.charges).toHaveLength(1);
    expect(mailer.received).toHaveLength(1);
    const results = sentResults(fake.requests);
    expect(results.map((r) => [r.tool_use_id, r.is_error ?? false])).toEqual([["tu_1", false], ["tu_2", false]]);
  });

  it("a call denied from the CLI never runs: the model gets EG_APPROVAL_DENIED", async () => {
    const { gate, payments, ledgerPath } = await setup();
    const { client, fake } = await api([[toolUse("tu_1", "charge_card", { amount: 30 })], [textBlock("ok")]]);
    const tools = anthropicTools(gate, { scope, waitForApproval: { pollMs: 20 } });
    const finished = client.beta.messages.toolRunner({ model: "claude-test", max_tokens: 100, messages, tools, thread: false }).runUntilDone();
    await until(async () => (await pending(gate)).length === 1);
    const [id] = await pending(gate);
    expect((await runCli(["approvals", "deny", id!, "--db", ledgerPath])).code).toBe(0);
    await finished;
    const [result] = sentResults(fake.requests);
    expect(result?.is_error).toBe(true);
    expect(JSON.stringify(result?.content)).toContain("EG_APPROVAL_DENIED");
    expect(payments.received).toHaveLength(0);
  });

  it("without waiting, the loop pauses on waitingApprovals before the runner runs anything, and an approval for other input never releases it", async () => {
    const { gate, payments } = await setup();
    const { client } = await api([[toolUse("tu_1", "charge_card", { amount: 30 })], [textBlock("ok")]]);
    const runner = client.beta.messages.toolRunner({ model: "claude-test", max_tokens: 100, messages, tools: anthropicTools(gate, { scope }), thread: false });
    let waiting: Awaited<ReturnType<typeof waitingApprovals>> = [];
    for await (const reply of runner) {
      waiting = await waitingApprovals(gate, reply, { scope: scope() });
      if (waiting.length > 0) break;
    }
    expect(waiting.map((w) => w.state)).toEqual(["pending"]);
    expect(payments.received).toHaveLength(0);
    // Approving the same id with other input files its own request; the first stays pending.
    const other = await gate.approvalFor({ id: "tu_1", name: "charge_card", input: { amount: 3000 } }, scope());
    expect(other.state === "pending" && other.id).not.toBe(waiting[0]!.id);
    await gate.ledger.governance!.moveApproval(other.state === "pending" ? other.id : "", "pending", { to: "approved", by: "x", expiresAt: Date.now() + 60_000 }, Date.now());
    expect(await gate.runTool({ id: "tu_1", name: "charge_card", input: { amount: 30 } }, scope())).toMatchObject({ ok: false, code: "EG_AWAITING_APPROVAL" });
    expect(payments.received).toHaveLength(0);
  });

  it("a tool written for the SDK (betaZodTool), wrapped with its effect class, gets the runner's context and runs once per tool_use id", async () => {
    const payments = await startChargeService({ instant: true });
    const ids: string[] = [];
    const sdkTool = betaZodTool({
      name: "charge_card", description: "Charge", inputSchema: z.object({ amount: z.number() }),
      run: async (input, context) => {
        ids.push(context!.toolUse.id);
        return JSON.stringify(await postCharge(payments, context!.toolUse.id, input));
      },
    });
    const gate = createGate({
      tools: [fromAnthropicTool(sdkTool, { effect: "write", input: z.object({ amount: z.number() }) })],
      ledger: sqliteLedger(join(tempDir(), "l.db")), onAlert: () => {},
    });
    closers.push(() => payments.close(), () => gate.close());
    const { client } = await api([[textBlock("resuming")], [textBlock("done")]]);
    await resume(client, anthropicTools(gate, { scope }));
    await resume(client, anthropicTools(gate, { scope }));
    expect(ids).toEqual(["tu_1"]);
    expect(payments.charges).toHaveLength(1);
  });
});
