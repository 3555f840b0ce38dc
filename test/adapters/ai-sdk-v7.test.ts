/**
 * effectgate/ai-sdk with the real `ai` 7 (the dev alias `ai-v7`, Node 22 or later: the Node 24 lane)
 * and its own test double, MockLanguageModelV4. ai 7 decides approvals with the call-level
 * `toolApproval` (statuses approved | denied | user-approval | not-applicable), emits
 * `tool-approval-request` parts, and reads `tool-approval-response` parts back; the adapter's
 * `toolApproval` answers from effectgate's durable approvals. Effects are counted by real HTTP
 * downstreams on 127.0.0.1; approvals are decided by the built `effectgate` CLI in another process.
 * The same scenarios on ai 6: ai-sdk.test.ts.
 */
import { join } from "node:path";
import { generateText, InvalidToolApprovalSignatureError, isStepCount, streamText, tool, type ModelMessage } from "ai-v7";
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { aiSdkTools, approvalResponses, dropStoppedTools, fromAiSdkTool, toolApproval } from "../../src/ai-sdk.js";
import { createGate, defineTool, type Gate, type RepeatPolicy } from "../../src/index.js";
import { listApprovals, setKillSwitch } from "../../src/operator.js";
import { sqliteLedger } from "../../src/sqlite.js";
import { runCli } from "../cli/run-cli.js";
import { postCharge, startChargeService } from "../support/charge-service.js";
import { requireBuild } from "../support/processes.js";
import { newerSdkLines, newerSdkLinesNote } from "../support/sdk-lines.js";
import { tempDir } from "../support/tmp.js";
import { scriptedModel, streamingModel, text, toolCalls } from "./ai-sdk-v7-support.js";

beforeAll(() => {
  if (newerSdkLines) requireBuild();
});

// A type, not an interface: ai 7 wants a runtime context indexable by string.
type Ctx = { readonly tenant: string; readonly chat: string };
const runtimeContext: Ctx = { tenant: "acme", chat: "chat-1" };
// ai 7 hands toolApproval and prepareStep the runtime context, and each tool only its own entry of
// toolsContext, so most tests take the scope from a closure, as an app building its tools per request does.
const scope = () => ({ tenant: runtimeContext.tenant, task: runtimeContext.chat });
const prompt: ModelMessage[] = [{ role: "user", content: "charge me 30 and send a receipt" }];
const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
});

async function setup() {
  const payments = await startChargeService({ instant: true });
  const mailer = await startChargeService({ instant: true });
  const ledgerPath = join(tempDir(), "ledger.db");
  const charge = defineTool({
    name: "charge_card",
    description: "Charge the customer's card",
    effect: "write",
    input: z.object({ amount: z.number() }),
    execute: (input, ctx) => postCharge(payments, ctx.idempotencyKey, input),
  });
  const receipt = defineTool({
    name: "send_receipt",
    effect: "write",
    input: z.object({ to: z.string() }),
    execute: (input, ctx) => postCharge(mailer, ctx.idempotencyKey, { amount: 1, to: input.to }),
  });
  const balance = defineTool({ name: "balance", effect: "read", input: z.object({}), execute: () => ({ balance: 100 }) });
  const gate = createGate({
    tools: [charge, receipt, balance],
    ledger: sqliteLedger(ledgerPath),
    policy: { approvals: { rules: [{ tool: "charge_card", reason: "charges need a person" }] } },
    onAlert: () => {},
  });
  closers.push(() => payments.close(), () => mailer.close(), () => gate.close());
  const tools = aiSdkTools(gate, { scope });
  // What an ai 7 app passes generateText: the tools, the call-level approval function, the context.
  const options = { tools, toolApproval: toolApproval(gate, { scope }), runtimeContext };
  return { gate, payments, mailer, ledgerPath, tools, options };
}

async function pendingIds(gate: Gate): Promise<string[]> {
  return (await listApprovals(gate.ledger, { state: "pending" })).map((a) => a.id);
}

function toolResults(messages: readonly ModelMessage[]) {
  return messages.flatMap((m) => (m.role === "tool" ? m.content : [])).filter((p) => p.type === "tool-result");
}

function approvalRequestOf(content: readonly { type: string }[]) {
  const request = content.find((p): p is { type: "tool-approval-request"; approvalId: string; reason?: string; toolCall: { toolCallId: string } } =>
    p.type === "tool-approval-request");
  if (!request) throw new Error(`no tool-approval-request among ${content.map((p) => p.type).join(", ")}`);
  return request;
}

/** The message a client sends to approve the approval request among `content`, whatever the gate decided. */
function clientApproval(content: readonly { type: string }[]): ModelMessage {
  return { role: "tool", content: [{ type: "tool-approval-response", approvalId: approvalRequestOf(content).approvalId, approved: true }] };
}

describe(`effectgate/ai-sdk on ai 7: the SDK's own duplicate path${newerSdkLinesNote}`, { skip: !newerSdkLines }, () => {
  it("without effectgate, the same approval messages sent twice run an approved tool twice (the path exists in ai 7)", async () => {
    const payments = await startChargeService({ instant: true });
    closers.push(() => payments.close());
    const charge = tool({
      inputSchema: z.object({ amount: z.number() }),
      execute: (input, { toolCallId }) => postCharge(payments, toolCallId, input),
    });
    const model = scriptedModel([toolCalls({ id: "call_1", name: "charge_card", input: { amount: 30 } }), text("done")]);
    const options = { tools: { charge_card: charge }, toolApproval: { charge_card: "user-approval" as const } };
    const first = await generateText({ model, ...options, messages: prompt });
    const approved: ModelMessage[] = [...prompt, ...first.responseMessages, clientApproval(first.content)];
    await generateText({ model, ...options, messages: approved });
    await generateText({ model, ...options, messages: approved });
    expect(payments.charges).toHaveLength(2);
    expect(payments.received.map((r) => r.key)).toEqual(["call_1", "call_1"]);
  });

  it("through toolApproval, approved from the CLI in another process, the same messages sent twice charge once and answer alike", async () => {
    const { gate, payments, ledgerPath, options } = await setup();
    const model = scriptedModel([toolCalls({ id: "call_1", name: "charge_card", input: { amount: 30 } }), text("done")]);

    const first = await generateText({ model, ...options, messages: prompt });
    // toolApproval filed a durable request; the SDK's request names it, so a UI can show the CLI command.
    const request = approvalRequestOf(first.content);
    const [id] = await pendingIds(gate);
    expect(request).toMatchObject({ toolCall: { toolCallId: "call_1" }, reason: expect.stringContaining(`effectgate approvals approve ${id!}`) });
    expect(payments.received).toHaveLength(0);
    const conversation: ModelMessage[] = [...prompt, ...first.responseMessages];
    expect(await approvalResponses(gate, conversation, { scope })).toBeUndefined();

    const cli = await runCli(["approvals", "approve", id!, "--db", ledgerPath, "--by", "alice"]);
    expect(cli.code, cli.stderr).toBe(0);

    const responses = await approvalResponses(gate, conversation, { scope });
    expect(responses?.content).toEqual([expect.objectContaining({ type: "tool-approval-response", approvalId: request.approvalId, approved: true })]);
    const approved: ModelMessage[] = [...conversation, responses as ModelMessage];
    const second = await generateText({ model, ...options, messages: approved });
    const third = await generateText({ model, ...options, messages: approved });

    expect(payments.charges).toHaveLength(1);
    expect(payments.received).toHaveLength(1);
    const [a] = toolResults(second.responseMessages);
    const [b] = toolResults(third.responseMessages);
    expect(a?.output).toEqual({ type: "json", value: expect.objectContaining({ id: payments.charges[0]?.id }) });
    expect(b?.output).toEqual(a?.output);
    expect(gate.stats).toMatchObject({ executed: 1, replayed: 1 });
  });

  it("once a person approved, the same request sent again is approved by toolApproval and runs the call once", async () => {
    const { gate, payments, ledgerPath, options } = await setup();
    // The model asks for the same call each turn (its first step), as a client replaying the turn would see.
    const model = scriptedModel([toolCalls({ id: "call_1", name: "charge_card", input: { amount: 30 } })]);
    await generateText({ model, ...options, messages: prompt });
    const [id] = await pendingIds(gate);
    expect((await runCli(["approvals", "approve", id!, "--db", ledgerPath, "--by", "alice"])).code).toBe(0);

    // A client that retries the whole turn: the model asks for the same call again; toolApproval says approved.
    const retried = await generateText({ model, ...options, messages: prompt });
    const retriedTwice = await generateText({ model, ...options, messages: prompt });
    expect(retried.steps[0]?.content.filter((p) => p.type === "tool-approval-response")).toEqual([
      expect.objectContaining({ approved: true, reason: expect.stringContaining("approved by alice") }),
    ]);
    expect(payments.charges).toHaveLength(1);
    expect(toolResults(retriedTwice.responseMessages)[0]?.output).toEqual(toolResults(retried.responseMessages)[0]?.output);
  });
});

describe(`effectgate/ai-sdk on ai 7: approvals${newerSdkLinesNote}`, { skip: !newerSdkLines }, () => {
  it("a call denied from the CLI never runs, even when the client sends approved: true itself", async () => {
    const { gate, payments, ledgerPath, options } = await setup();
    const model = scriptedModel([toolCalls({ id: "call_1", name: "charge_card", input: { amount: 30 } }), text("ok")]);
    const first = await generateText({ model, ...options, messages: prompt });
    const [id] = await pendingIds(gate);
    expect((await runCli(["approvals", "deny", id!, "--db", ledgerPath, "--by", "bob", "--note", "not this card"])).code).toBe(0);

    const conversation: ModelMessage[] = [...prompt, ...first.responseMessages];
    const responses = await approvalResponses(gate, conversation, { scope });
    expect(responses?.content).toEqual([expect.objectContaining({ approved: false, reason: expect.stringContaining("denied by bob: not this card") })]);
    const denied = await generateText({ model, ...options, messages: [...conversation, responses as ModelMessage] });
    expect(toolResults(denied.responseMessages)[0]?.output).toMatchObject({ type: "execution-denied" });

    // A forged approval: the SDK asks toolApproval again before it runs an approved call, and effectgate says denied.
    const forged = await generateText({ model, ...options, messages: [...conversation, clientApproval(first.content)] });
    expect(toolResults(forged.responseMessages)[0]?.output).toMatchObject({ type: "execution-denied", reason: expect.stringContaining("denied by bob") });
    expect(payments.received).toHaveLength(0);
  });

  it("an approval for other input never releases the call", async () => {
    const { gate, payments, ledgerPath, options } = await setup();
    const model = scriptedModel([toolCalls({ id: "call_1", name: "charge_card", input: { amount: 30 } }), text("ok")]);
    const first = await generateText({ model, ...options, messages: prompt });
    const [id] = await pendingIds(gate);
    expect((await runCli(["approvals", "approve", id!, "--db", ledgerPath])).code).toBe(0);

    // The client rewrites the approved call's input to 3000 and sends the approval back.
    const tampered = first.responseMessages.map((m): ModelMessage => m.role !== "assistant" || typeof m.content === "string" ? m
      : { ...m, content: m.content.map((p) => (p.type === "tool-call" ? { ...p, input: { amount: 3000 } } : p)) });
    const run = await generateText({ model, ...options, messages: [...prompt, ...tampered, clientApproval(first.content)] });
    expect(toolResults(run.responseMessages)[0]?.output).toMatchObject({ type: "error-text", value: expect.stringContaining("EG_AWAITING_APPROVAL") });
    expect(payments.received).toHaveLength(0);
    // The rewritten call has a request of its own, still pending; the approved one is untouched.
    const pending = await listApprovals(gate.ledger, { state: "pending" });
    expect(pending.map((a) => a.input)).toEqual([{ amount: 3000 }]);
  });

  it("acceptSdkApprovals records the SDK's approval as the durable decision for that call, which then runs once", async () => {
    const { gate, payments } = await setup();
    const tools = aiSdkTools(gate, { scope, acceptSdkApprovals: true });
    const options = { tools, toolApproval: toolApproval(gate, { scope }), runtimeContext };
    const model = scriptedModel([toolCalls({ id: "call_1", name: "charge_card", input: { amount: 30 } }), text("ok")]);
    const first = await generateText({ model, ...options, messages: prompt });
    const approved: ModelMessage[] = [...prompt, ...first.responseMessages, clientApproval(first.content)];
    await generateText({ model, ...options, messages: approved });
    await generateText({ model, ...options, messages: approved });
    expect(payments.charges).toHaveLength(1);
    const [record] = await listApprovals(gate.ledger, { state: "consumed" });
    expect(record?.decidedBy).toBe("ai-sdk");
  });

  it("in a parallel batch, the call that waits for approval does not hold up the others, which run once", async () => {
    const { gate, payments, mailer, ledgerPath, options } = await setup();
    const model = scriptedModel([
      toolCalls({ id: "call_1", name: "charge_card", input: { amount: 30 } }, { id: "call_2", name: "send_receipt", input: { to: "a@b.c" } }),
      text("ok"),
    ]);
    const first = await generateText({ model, ...options, messages: prompt });
    expect(mailer.charges).toHaveLength(1);
    expect(payments.received).toHaveLength(0);
    expect(toolResults(first.responseMessages).map((p) => p.toolCallId)).toEqual(["call_2"]);
    expect(approvalRequestOf(first.content).toolCall.toolCallId).toBe("call_1");

    const [id] = await pendingIds(gate);
    expect((await runCli(["approvals", "approve", id!, "--db", ledgerPath])).code).toBe(0);
    const conversation: ModelMessage[] = [...prompt, ...first.responseMessages];
    const responses = await approvalResponses(gate, conversation, { scope });
    const done = await generateText({ model, ...options, messages: [...conversation, responses as ModelMessage] });
    await generateText({ model, ...options, messages: [...conversation, responses as ModelMessage] });
    expect(payments.charges).toHaveLength(1);
    expect(mailer.received).toHaveLength(1);
    expect(toolResults(done.responseMessages).map((p) => p.toolCallId)).toEqual(["call_1"]);
  });

  it("without toolApproval, the tools' own needsApproval (deprecated in ai 7) still puts the call before a person", async () => {
    const { gate, payments, ledgerPath, tools } = await setup();
    const model = scriptedModel([toolCalls({ id: "call_1", name: "charge_card", input: { amount: 30 } }), text("ok")]);
    const first = await generateText({ model, tools, runtimeContext, messages: prompt });
    approvalRequestOf(first.content);
    const [id] = await pendingIds(gate);
    expect((await runCli(["approvals", "approve", id!, "--db", ledgerPath])).code).toBe(0);
    const conversation: ModelMessage[] = [...prompt, ...first.responseMessages];
    const responses = await approvalResponses(gate, conversation, { scope });
    await generateText({ model, tools, runtimeContext, messages: [...conversation, responses as ModelMessage] });
    await generateText({ model, tools, runtimeContext, messages: [...conversation, responses as ModelMessage] });
    expect(payments.charges).toHaveLength(1);
  });
});

describe(`effectgate/ai-sdk on ai 7: context, prepareStep and wrapped SDK tools${newerSdkLinesNote}`, { skip: !newerSdkLines }, () => {
  it("the scope comes from the tool's own context (toolsContext) in toolApproval and execute alike, not from the runtime context", async () => {
    const { gate, payments, ledgerPath } = await setup();
    // A scope from the context given, never a default: a call scoped by the wrong context would land on another task.
    const strictScope = ({ context }: { context: Ctx | undefined }) => {
      if (context === undefined) throw new Error("no context reached the scope function");
      return { tenant: context.tenant, task: context.chat };
    };
    const options = { tools: aiSdkTools<Ctx>(gate, { scope: strictScope }), toolApproval: toolApproval<Ctx>(gate, { scope: strictScope }) };
    const toolsContext = { charge_card: { tenant: "acme", chat: "chat-9" } };
    const model = scriptedModel([toolCalls({ id: "call_1", name: "charge_card", input: { amount: 30 } }), text("ok")]);
    const first = await generateText({ model, ...options, toolsContext, runtimeContext: { tenant: "acme", chat: "runtime-chat" }, messages: prompt });
    const [request] = await listApprovals(gate.ledger, { state: "pending" });
    expect(request).toMatchObject({ tenant: "acme", task: "chat-9", toolUseId: "call_1" });
    expect((await runCli(["approvals", "approve", request!.id, "--db", ledgerPath])).code).toBe(0);
    const conversation: ModelMessage[] = [...prompt, ...first.responseMessages];
    const responses = await approvalResponses(gate, conversation, { scope: strictScope, context: toolsContext.charge_card });
    await generateText({ model, ...options, toolsContext, runtimeContext: { tenant: "acme", chat: "runtime-chat" }, messages: [...conversation, responses as ModelMessage] });
    expect(payments.charges).toHaveLength(1);
    const [record] = await listApprovals(gate.ledger, { state: "consumed" });
    expect(record?.id).toBe(request!.id);
  });

  it("dropStoppedTools offers the model no write tool while a kill switch is on", async () => {
    const { gate, tools } = await setup();
    await setKillSwitch(gate.ledger, true, { tenant: "acme" }, { by: "ops", reason: "incident" });
    const model = scriptedModel([text("nothing to do")]);
    const prepareStep = dropStoppedTools(gate, tools, { scope });
    await generateText({ model, tools, runtimeContext, messages: prompt, prepareStep });
    expect(model.doGenerateCalls[0]?.tools?.map((t) => t.name)).toEqual(["balance"]);

    await setKillSwitch(gate.ledger, false, { tenant: "acme" }, { by: "ops" });
    await generateText({ model, tools, runtimeContext, messages: prompt, prepareStep });
    expect(model.doGenerateCalls[1]?.tools?.map((t) => t.name).sort()).toEqual(["balance", "charge_card", "send_receipt"]);
  });

  it("a tool written for ai 7, wrapped with its effect class, keeps its context schema and context-made description, and runs once per toolCallId", async () => {
    const payments = await startChargeService({ instant: true });
    const seen: { toolCallId: string; messages: number; context: unknown }[] = [];
    const sdkCharge = tool({
      description: ({ context }) => `Charge a card of ${context.tenant}`,
      inputSchema: z.object({ amount: z.number() }),
      // The SDK validates the tool's context with it before execute sees it (here: trims the chat id).
      contextSchema: z.object({ tenant: z.string(), chat: z.string().trim() }),
      execute: async (input, options) => {
        seen.push({ toolCallId: options.toolCallId, messages: options.messages.length, context: options.context });
        return postCharge(payments, options.toolCallId, input);
      },
    });
    const gate = createGate({ tools: [fromAiSdkTool("charge_card", sdkCharge, { effect: "write" })], ledger: sqliteLedger(join(tempDir(), "l.db")), onAlert: () => {} });
    closers.push(() => payments.close(), () => gate.close());
    const tools = aiSdkTools<Ctx>(gate, { scope });
    const toolsContext = { charge_card: { tenant: "acme", chat: "  chat-9 " } };
    const model = scriptedModel([toolCalls({ id: "call_9", name: "charge_card", input: { amount: 5 } }), text("ok")]);
    await generateText({ model, tools, toolsContext, messages: prompt });
    await generateText({ model, tools, toolsContext, messages: prompt });
    expect(payments.charges).toHaveLength(1);
    expect(seen).toEqual([{ toolCallId: "call_9", messages: 1, context: { tenant: "acme", chat: "chat-9" } }]);
    expect(model.doGenerateCalls[0]?.tools).toEqual([expect.objectContaining({ name: "charge_card", description: "Charge a card of acme" })]);
  });
});

describe(`effectgate/ai-sdk on ai 7: streamText${newerSdkLinesNote}`, { skip: !newerSdkLines }, () => {
  it("through toolApproval, approved from the CLI, the same approval messages streamed twice charge once and stream the same result", async () => {
    const { gate, payments, ledgerPath, options } = await setup();
    const model = streamingModel([toolCalls({ id: "call_1", name: "charge_card", input: { amount: 30 } }), text("done")]);
    const first = streamText({ model, ...options, messages: prompt });
    const request = approvalRequestOf(await first.content);
    expect(request.toolCall.toolCallId).toBe("call_1");
    const [id] = await pendingIds(gate);
    expect((await runCli(["approvals", "approve", id!, "--db", ledgerPath, "--by", "alice"])).code).toBe(0);
    const conversation: ModelMessage[] = [...prompt, ...(await first.responseMessages)];
    const responses = await approvalResponses(gate, conversation, { scope });
    const approved: ModelMessage[] = [...conversation, responses as ModelMessage];
    const streamedResults = async () => {
      const parts: unknown[] = [];
      for await (const part of streamText({ model, ...options, messages: approved }).fullStream) if (part.type === "tool-result") parts.push(part.output);
      return parts;
    };
    const a = await streamedResults();
    const b = await streamedResults();
    expect(payments.charges).toHaveLength(1);
    expect(a).toEqual([expect.objectContaining({ id: payments.charges[0]?.id })]);
    expect(b).toEqual(a);
  });

  it("a streaming tool's preliminary results reach the stream on the first run; a replay streams only the recorded result", async () => {
    const ran: number[] = [];
    const sdkTool = tool({
      inputSchema: z.object({ n: z.number() }),
      async *execute(input) {
        for (let i = 1; i <= input.n; i++) {
          ran.push(i);
          yield { step: i };
        }
      },
    });
    const gate = createGate({ tools: [fromAiSdkTool("count_up", sdkTool, { effect: "write" })], ledger: sqliteLedger(join(tempDir(), "l.db")), onAlert: () => {} });
    closers.push(() => gate.close());
    const tools = aiSdkTools(gate, { scope });
    const streamed = async () => {
      const model = streamingModel([toolCalls({ id: "s1", name: "count_up", input: { n: 3 } }), text("counted")]);
      const parts: { preliminary: boolean; output: unknown }[] = [];
      for await (const part of streamText({ model, tools, messages: prompt, stopWhen: isStepCount(3) }).fullStream) {
        if (part.type === "tool-result") parts.push({ preliminary: part.preliminary === true, output: part.output });
      }
      return parts;
    };
    // ai 7 streams every value the execute yields as a preliminary tool-result and then the last as the result.
    // The adapter yields the tool's chunks as they come and then the recorded result, which is the last.
    const prelim = (step: number) => ({ preliminary: true, output: { step } });
    const final = { preliminary: false, output: { step: 3 } };
    expect(await streamed()).toEqual([prelim(1), prelim(2), prelim(3), prelim(3), final]);
    expect(await streamed()).toEqual([prelim(3), final]);
    expect(ran).toEqual([1, 2, 3]);
  });
});

describe(`effectgate/ai-sdk on ai 7: signed approvals (experimental_toolApprovalSecret)${newerSdkLinesNote}`, { skip: !newerSdkLines }, () => {
  const secret = "approval-signing-secret-for-tests";

  it("the SDK signs the request; the responses approvalResponses builds pass its check, and the call runs once", async () => {
    const { gate, payments, ledgerPath, options } = await setup();
    const model = scriptedModel([toolCalls({ id: "call_1", name: "charge_card", input: { amount: 30 } }), text("done")]);
    const signed = { ...options, experimental_toolApprovalSecret: secret };
    const first = await generateText({ model, ...signed, messages: prompt });
    expect(approvalRequestOf(first.content)).toMatchObject({ signature: expect.any(String) });
    const [id] = await pendingIds(gate);
    expect((await runCli(["approvals", "approve", id!, "--db", ledgerPath, "--by", "alice"])).code).toBe(0);
    const conversation: ModelMessage[] = [...prompt, ...first.responseMessages];
    const approved: ModelMessage[] = [...conversation, (await approvalResponses(gate, conversation, { scope })) as ModelMessage];
    await generateText({ model, ...signed, messages: approved });
    await generateText({ model, ...signed, messages: approved });
    expect(payments.charges).toHaveLength(1);
  });

  it("a client that changes the approved call's input is stopped by the SDK's signature check, and by the gate's digest without one", async () => {
    const run = async (withSecret: boolean) => {
      const { gate, payments, ledgerPath, options } = await setup();
      const model = scriptedModel([toolCalls({ id: "call_1", name: "charge_card", input: { amount: 30 } }), text("done")]);
      const given = withSecret ? { ...options, experimental_toolApprovalSecret: secret } : options;
      const first = await generateText({ model, ...given, messages: prompt });
      const [id] = await pendingIds(gate);
      expect((await runCli(["approvals", "approve", id!, "--db", ledgerPath, "--by", "alice"])).code).toBe(0);
      const conversation: ModelMessage[] = [...prompt, ...first.responseMessages];
      const responses = (await approvalResponses(gate, conversation, { scope })) as ModelMessage;
      // The client rewrites the amount in the assistant message that holds the approved call.
      const forged = JSON.parse(JSON.stringify(conversation).replace('"amount":30', '"amount":3000')) as ModelMessage[];
      return { payments, result: generateText({ model, ...given, messages: [...forged, responses] }) };
    };
    const signed = await run(true);
    await expect(signed.result).rejects.toThrow(InvalidToolApprovalSignatureError);
    expect(signed.payments.received).toHaveLength(0);
    // Without a secret the SDK lets the changed call through; the person approved amount 30, so the gate charges nothing.
    const unsigned = await run(false);
    const steps = (await unsigned.result).steps.flatMap((st) => st.content);
    expect(unsigned.payments.received).toHaveLength(0);
    expect(steps.filter((p) => p.type === "tool-result")).toEqual([]);
  });
});

describe(`effectgate/ai-sdk on ai 7: a re-planned charge under a new call id${newerSdkLinesNote}`, { skip: !newerSdkLines }, () => {
  async function repeatsSetup(action: RepeatPolicy["action"]) {
    const payments = await startChargeService({ instant: true });
    const charge = defineTool({
      name: "charge_card", effect: "write", input: z.object({ amount: z.number() }), repeats: { action },
      execute: (input, ctx) => postCharge(payments, ctx.idempotencyKey, input),
    });
    const ledgerPath = join(tempDir(), "l.db");
    const gate = createGate({ tools: [charge], ledger: sqliteLedger(ledgerPath), onAlert: () => {} });
    closers.push(() => payments.close(), () => gate.close());
    const model = scriptedModel([toolCalls({ id: "call_1", name: "charge_card", input: { amount: 30 } }), toolCalls({ id: "call_2", name: "charge_card", input: { amount: 30 } }), text("done")]);
    return { gate, payments, model, ledgerPath, options: { tools: aiSdkTools(gate, { scope }), toolApproval: toolApproval(gate, { scope }), runtimeContext } };
  }

  it("collapse: charged once; the output is the first charge, and the model's tool message says it was not run", async () => {
    const { payments, model, options } = await repeatsSetup("collapse");
    const result = await generateText({ model, ...options, messages: prompt, stopWhen: isStepCount(5) });
    expect(payments.charges).toHaveLength(1);
    const outputs = result.steps.flatMap((s) => s.toolResults).map((r) => r.output);
    expect(outputs).toHaveLength(2);
    expect(outputs[1]).toEqual(outputs[0]);
    const [first, second] = toolResults(result.responseMessages).map((p) => p.output as { type: string; value: unknown });
    expect(first).toEqual({ type: "json", value: outputs[0] });
    expect(second?.type).toBe("text");
    expect(String(second?.value)).toMatch(/^\[effectgate: this charge_card call repeats call call_1 \(same input, completed .*\); it was not executed again\. That call's result:\]\n\{/);
  });

  it("approve: toolApproval puts the repeat before a person, naming the first call; approved from the CLI it is charged once more", async () => {
    const { gate, payments, model, ledgerPath, options } = await repeatsSetup("approve");
    const first = await generateText({ model, ...options, messages: prompt, stopWhen: isStepCount(5) });
    expect(payments.charges).toHaveLength(1);
    const request = approvalRequestOf(first.content);
    expect(request.toolCall.toolCallId).toBe("call_2");
    const [pending] = await listApprovals(gate.ledger, { state: "pending" });
    expect(pending?.reasons).toEqual([expect.stringMatching(/^it repeats call call_1 of this task/)]);
    expect((await runCli(["approvals", "approve", pending!.id, "--db", ledgerPath, "--by", "alice"])).code).toBe(0);
    const conversation: ModelMessage[] = [...prompt, ...first.responseMessages];
    const approved: ModelMessage[] = [...conversation, (await approvalResponses(gate, conversation, { scope })) as ModelMessage];
    await generateText({ model, ...options, messages: approved, stopWhen: isStepCount(5) });
    await generateText({ model, ...options, messages: approved, stopWhen: isStepCount(5) });
    expect(payments.charges).toHaveLength(2);
  });
});
