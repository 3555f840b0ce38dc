/**
 * effectgateHumanInTheLoop: LangChain's humanInTheLoopMiddleware shapes (HITLRequest interrupt,
 * HITLResponse resume) on effectgate's durable, digest-bound approvals, with the real `langchain`
 * createAgent and fakeModel, MemorySaver, a real SQLite ledger, the built `effectgate` command in
 * another process, and a payments service on 127.0.0.1 that counts every request it receives.
 */
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { AIMessage, type BaseMessage } from "@langchain/core/messages";
import { tool, type ToolRunnableConfig } from "@langchain/core/tools";
import { Command, MemorySaver } from "@langchain/langgraph";
import { createAgent, fakeModel, humanInTheLoopMiddleware, type AgentMiddleware } from "langchain";
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { createGate, defineTool, type Gate } from "../../src/index.js";
import {
  effectgateHumanInTheLoop, effectgateMiddleware, fromLangChainTool, langchainTool, type HitlRequest, type HitlResponse, type HumanInTheLoopOptions,
} from "../../src/langchain.js";
import { listApprovals } from "../../src/operator.js";
import { sqliteLedger } from "../../src/sqlite.js";
import { runCli } from "../cli/run-cli.js";
import { postCharge, startChargeService } from "../support/charge-service.js";
import { requireBuild, runFixture } from "../support/processes.js";
import { tempDir } from "../support/tmp.js";

const hitlAgent = fileURLToPath(new URL("./fixtures/langgraph-hitl-agent.mjs", import.meta.url));
beforeAll(() => requireBuild()); // approvals are decided by the built CLI; the crash test runs the built package

const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
});

const thread = (id: string) => ({ configurable: { thread_id: id } });
const mwScope = (rt: { configurable?: { thread_id?: string } }) => ({ tenant: "acme", task: String(rt.configurable?.thread_id) });
const toolScope = (config: ToolRunnableConfig) => ({ tenant: "acme", task: String(config.configurable?.thread_id) });

/** refund needs a person's approval; send_note does not. The service sees every request, keyed by call id. */
async function setup() {
  const service = await startChargeService({ instant: true });
  const file = join(tempDir(), "ledger.db");
  const refund = defineTool({
    name: "refund", description: "Refund a customer", effect: "write", input: z.object({ customer: z.string(), amount: z.number() }),
    execute: (input, ctx) => postCharge(service, ctx.idempotencyKey, input),
  });
  const note = defineTool({
    name: "send_note", description: "Send a note", effect: "write", input: z.object({ text: z.string() }),
    execute: (_input, ctx) => postCharge(service, ctx.idempotencyKey, { amount: 0 }),
  });
  const ledger = sqliteLedger(file);
  const gate = createGate({ tools: [refund, note], ledger, onAlert: () => {}, policy: { approvals: { rules: [{ tool: "refund", reason: "refunds are checked" }] } } });
  closers.push(() => service.close(), async () => { await gate.close(); await ledger.close(); });
  const tools = [langchainTool(gate, refund, { scope: toolScope }), langchainTool(gate, note, { scope: toolScope })];
  return { service, file, gate, tools };
}

type Call = { id: string; name: string; args: Record<string, unknown> };
const refundCall = (id: string, amount = 30): Call => ({ id, name: "refund", args: { customer: "c_1", amount } });
const noteCall: Call = { id: "call_note", name: "send_note", args: { text: "on its way" } };

function agentWith(tools: NonNullable<Parameters<typeof createAgent>[0]["tools"]>, middleware: AgentMiddleware[], calls: Call[], runs = 1) {
  let model = fakeModel().respondWithTools(calls);
  for (let i = 0; i < runs; i++) model = model.respond(new AIMessage("done"));
  return createAgent({ model, tools, middleware, checkpointer: new MemorySaver() });
}
const hitl = (gate: Gate, options: Partial<HumanInTheLoopOptions> = {}) => effectgateHumanInTheLoop(gate, { scope: mwScope, ...options });
const start = { messages: [{ role: "user", content: "refund c_1" }] };

const interruptsOf = (result: unknown) => (result as { __interrupt__?: { value: unknown }[] }).__interrupt__ ?? [];
const requestOf = (result: unknown) => interruptsOf(result)[0]?.value as HitlRequest | undefined;
const toolMessages = (messages: BaseMessage[]) => messages.filter((m) => m.getType() === "tool") as unknown as { tool_call_id: string; status: string; content: string }[];
const answerTo = (messages: BaseMessage[], id: string) => toolMessages(messages).find((m) => m.tool_call_id === id);
const resume = (value: unknown) => new Command({ resume: value });

describe("effectgateHumanInTheLoop: LangChain's HITL shapes on effectgate's durable approvals", () => {
  it("pauses with a HITLRequest naming effectgate's request; approved from the CLI in another process, a resume with any value runs the call once", async () => {
    const { service, file, gate, tools } = await setup();
    const agent = agentWith(tools, [hitl(gate)], [refundCall("call_refund"), noteCall]);
    const paused = await agent.invoke(start, thread("t1"));
    const request = requestOf(paused);
    const [pending] = await listApprovals(gate.ledger, { state: "pending" });
    expect(request?.actionRequests).toEqual([expect.objectContaining({ name: "refund", args: { customer: "c_1", amount: 30 }, callId: "call_refund", approvalId: pending!.id, state: "pending", reasons: ["refunds are checked"] })]);
    expect(request?.actionRequests[0]?.description).toContain(`effectgate approvals approve ${pending!.id}`);
    expect(request?.reviewConfigs).toEqual([{ actionName: "refund", allowedDecisions: ["approve", "edit", "reject"] }]);
    // Paused after the model, before any tool: nothing ran (as with LangChain's own middleware).
    expect(service.received).toHaveLength(0);

    const cli = await runCli(["approvals", "approve", pending!.id, "--db", file, "--by", "alice"]);
    expect(cli.code, cli.stderr).toBe(0);
    const done = await agent.invoke(resume("decided in the CLI"), thread("t1"));
    expect(service.received.map((r) => r.key).sort()).toEqual(["call_note", "call_refund"]);
    expect(answerTo(done.messages, "call_refund")).toMatchObject({ status: "success" });
    expect((await gate.ledger.governance!.getApproval(pending!.id))).toMatchObject({ state: "consumed", decidedBy: "alice" });
  });

  it("a HITLResponse approve is recorded in effectgate's store as that reviewer's decision, and the call runs once", async () => {
    const { service, gate, tools } = await setup();
    const agent = agentWith(tools, [hitl(gate)], [refundCall("call_refund")]);
    const paused = await agent.invoke(start, thread("t2"));
    const id = requestOf(paused)!.actionRequests[0]!.approvalId;
    const response: HitlResponse = { decisions: [{ type: "approve" }], by: "alice" };
    const done = await agent.invoke(resume(response), thread("t2"));
    expect(service.received.map((r) => r.key)).toEqual(["call_refund"]);
    expect(await gate.ledger.governance!.getApproval(id)).toMatchObject({ state: "consumed", decidedBy: "alice" });
    expect(done.messages.at(-1)?.content).toBe("done");
  });

  it("a reject is recorded as a denial with its message; the call never runs and the model reads why; the rest of the batch runs", async () => {
    const { service, gate, tools } = await setup();
    const agent = agentWith(tools, [hitl(gate)], [refundCall("call_refund"), noteCall]);
    await agent.invoke(start, thread("t3"));
    const done = await agent.invoke(resume({ decisions: [{ type: "reject", message: "not this month" }], by: "bob" }), thread("t3"));
    expect(service.received.map((r) => r.key)).toEqual(["call_note"]);
    const answer = answerTo(done.messages, "call_refund");
    expect(answer?.status).toBe("error");
    expect(answer?.content).toMatch(/^EG_APPROVAL_DENIED: bob denied this refund call .*not this month/);
  });

  it("a call denied from the CLI never runs, even when the resume says approve: the store's decision stands", async () => {
    const { service, file, gate, tools } = await setup();
    const agent = agentWith(tools, [hitl(gate)], [refundCall("call_refund")]);
    const paused = await agent.invoke(start, thread("t4"));
    const id = requestOf(paused)!.actionRequests[0]!.approvalId;
    expect((await runCli(["approvals", "deny", id, "--db", file, "--by", "bob"])).code).toBe(0);
    const done = await agent.invoke(resume({ decisions: [{ type: "approve" }], by: "mallory" }), thread("t4"));
    expect(service.received).toHaveLength(0);
    expect(answerTo(done.messages, "call_refund")?.content).toMatch(/^EG_APPROVAL_DENIED: bob denied/);
    expect(await gate.ledger.governance!.getApproval(id)).toMatchObject({ state: "denied", decidedBy: "bob" });
  });

  it("an edit denies the original request and approves the edited call for its new input only, which runs once with it", async () => {
    const { service, gate, tools } = await setup();
    const agent = agentWith(tools, [hitl(gate)], [refundCall("call_refund", 300)]);
    const paused = await agent.invoke(start, thread("t5"));
    const original = requestOf(paused)!.actionRequests[0]!.approvalId;
    const done = await agent.invoke(resume({ decisions: [{ type: "edit", editedAction: { name: "refund", args: { customer: "c_1", amount: 30 } } }], by: "carol" }), thread("t5"));
    expect(service.charges.map((c) => [c.key, c.amount])).toEqual([["call_refund", 30]]);
    expect(await gate.ledger.governance!.getApproval(original)).toMatchObject({ state: "denied", decidedBy: "carol" });
    const consumed = await listApprovals(gate.ledger, { state: "consumed" });
    expect(consumed).toEqual([expect.objectContaining({ toolUseId: "call_refund", decidedBy: "carol" })]);
    expect(answerTo(done.messages, "call_refund")).toMatchObject({ status: "success" });
  });

  it("an approval for other input never releases the call: the graph pauses again", async () => {
    const { service, gate, tools } = await setup();
    const agent = agentWith(tools, [hitl(gate)], [refundCall("call_refund", 30)]);
    const paused = await agent.invoke(start, thread("t6"));
    const id = requestOf(paused)!.actionRequests[0]!.approvalId;
    // Someone approves the same call id with input of their own (3000): that is another request.
    const other = await gate.approvalFor({ id: "call_refund", name: "refund", input: { customer: "c_1", amount: 3000 } }, mwScope(thread("t6")));
    expect(other.state === "pending" && other.id).not.toBe(id);
    await gate.ledger.governance!.moveApproval(other.state === "pending" ? other.id : "", "pending", { to: "approved", by: "x", expiresAt: Date.now() + 60_000 }, Date.now());
    const again = await agent.invoke(resume("go"), thread("t6"));
    expect(requestOf(again)?.actionRequests.map((a) => [a.approvalId, a.state])).toEqual([[id, "pending"]]);
    expect(service.received).toHaveLength(0);
  });

  it("several calls waiting at once are one interrupt; decisions map onto them in order, one decided from the CLI meanwhile keeps its decision", async () => {
    const { service, file, gate, tools } = await setup();
    const agent = agentWith(tools, [hitl(gate)], [refundCall("call_a", 10), refundCall("call_b", 20), refundCall("call_c", 30)]);
    const paused = await agent.invoke(start, thread("t7"));
    const actions = requestOf(paused)!.actionRequests;
    expect(actions.map((a) => a.callId)).toEqual(["call_a", "call_b", "call_c"]);
    // call_b is denied in the CLI before the UI's answer arrives, which still lists all three.
    expect((await runCli(["approvals", "deny", actions[1]!.approvalId, "--db", file, "--by", "ops"])).code).toBe(0);
    const done = await agent.invoke(resume({ decisions: [{ type: "approve" }, { type: "approve" }, { type: "reject", message: "too much" }], by: "dana" }), thread("t7"));
    expect(service.received.map((r) => r.key)).toEqual(["call_a"]);
    expect(answerTo(done.messages, "call_b")?.content).toMatch(/^EG_APPROVAL_DENIED: ops denied/);
    expect(answerTo(done.messages, "call_c")?.content).toMatch(/^EG_APPROVAL_DENIED: dana denied .*too much/);
  });

  it("a resume whose decisions do not match the actions under review is refused, and nothing runs", async () => {
    const { service, gate, tools } = await setup();
    const agent = agentWith(tools, [hitl(gate)], [refundCall("call_a"), refundCall("call_b")]);
    await agent.invoke(start, thread("t8"));
    await expect(agent.invoke(resume({ decisions: [{ type: "approve" }] }), thread("t8"))).rejects.toThrow(/1 decisions for 2 actions/);
    expect(service.received).toHaveLength(0);
    expect(await listApprovals(gate.ledger, { state: "pending" })).toHaveLength(2);
  });

  it("acceptDecisions: false records no decision from the resume: the graph pauses again until the CLI decides", async () => {
    const { service, file, gate, tools } = await setup();
    const agent = agentWith(tools, [hitl(gate, { acceptDecisions: false })], [refundCall("call_refund")]);
    const paused = await agent.invoke(start, thread("t9"));
    const id = requestOf(paused)!.actionRequests[0]!.approvalId;
    const again = await agent.invoke(resume({ decisions: [{ type: "approve" }], by: "client" }), thread("t9"));
    expect(requestOf(again)?.actionRequests[0]?.state).toBe("pending");
    expect(service.received).toHaveLength(0);
    expect((await runCli(["approvals", "approve", id, "--db", file, "--by", "alice"])).code).toBe(0);
    await agent.invoke(resume("decided"), thread("t9"));
    expect(service.received.map((r) => r.key)).toEqual(["call_refund"]);
  });

  it("refuses an interruptOn entry for a tool the gate does not have", async () => {
    const { gate } = await setup();
    expect(() => hitl(gate, { interruptOn: { delete_all: true } })).toThrow(/interruptOn names "delete_all", which is not a gate tool/);
  });
});

describe("an edit survives its resume being delivered again (issue 23, defect 8): the edit is read back from the store on every run", () => {
  const edit = { decisions: [{ type: "edit", editedAction: { name: "refund", args: { customer: "c_1", amount: 30 } } }], by: "carol" } satisfies HitlResponse;

  it("a resume delivered twice (a second run from the same interrupted checkpoint) sends the edited call on again, answered from its record", async () => {
    const { service, gate, tools } = await setup();
    const agent = agentWith(tools, [hitl(gate)], [refundCall("call_refund", 300)], 2);
    await agent.invoke(start, thread("d1"));
    const interrupted = (await agent.graph.getState(thread("d1"))).config.configurable?.checkpoint_id as string;
    const first = await agent.invoke(resume(edit), thread("d1"));
    expect(answerTo(first.messages, "call_refund")).toMatchObject({ status: "success" });
    // The runner delivers the same resume again: LangGraph resumes the interrupted checkpoint once more, every call now decided.
    const again = await agent.invoke(resume(edit), { configurable: { thread_id: "d1", checkpoint_id: interrupted } });
    const answer = answerTo(again.messages, "call_refund");
    expect(answer?.content).not.toMatch(/EG_KEY_MISMATCH|EG_APPROVAL_DENIED/);
    expect(answer).toMatchObject({ status: "success", content: answerTo(first.messages, "call_refund")!.content });
    expect(service.charges.map((c) => [c.key, c.amount])).toEqual([["call_refund", 30]]);
  });

  it("a resume delivered again after its worker was SIGKILLed with the decisions stored runs the approved edit, once, and consumes its approval", async () => {
    const service = await startChargeService({ instant: true });
    closers.push(() => service.close());
    const dir = tempDir();
    const job = { ledger: join(dir, "ledger.db"), checkpoints: join(dir, "checkpoints.db"), payments: service.url };
    const started = await runFixture(hitlAgent, { ...job, mode: "start" }, { cwd: dir, label: "hitl agent (start)" });
    expect(started.code, started.stderr).toBe(0);
    expect(started.lines.at(-1)).toMatchObject({ interrupted: true });
    const killed = await runFixture(hitlAgent, { ...job, mode: "review", kill: true }, { cwd: dir, label: "hitl agent (review, killed)" });
    expect(killed.signal, killed.stderr).toBe("SIGKILL");
    expect(service.received).toHaveLength(0); // killed before the tools ran

    const redelivered = await runFixture(hitlAgent, { ...job, mode: "review" }, { cwd: dir, label: "hitl agent (review again)" });
    expect(redelivered.code, redelivered.stderr).toBe(0);
    const out = redelivered.lines.at(-1) as { tool: { status: string; content: string }; final: string };
    expect(out.tool.content).not.toMatch(/EG_APPROVAL_DENIED/);
    expect(out.tool).toMatchObject({ status: "success" });
    expect(out.tool.content).toContain(service.charges[0]!.id);
    expect(service.charges.map((c) => [c.key, c.amount])).toEqual([["call_refund", 30]]);
    const ledger = sqliteLedger(job.ledger);
    closers.push(() => ledger.close());
    const approvals = await listApprovals(ledger, { tenant: "acme" });
    expect(approvals.map((a) => [a.state, (a.input as { amount: number }).amount, a.decidedBy])).toEqual([["denied", 300, "carol"], ["consumed", 30, "carol"]]);
    expect(out.final).toBe("done");
  });
});

describe("LangChain's own humanInTheLoopMiddleware in front of effectgate", () => {
  it("its approve is not effectgate's: the call pauses again at effectgate's own interrupt and does not run", async () => {
    const service = await startChargeService({ instant: true });
    const mine = tool(async (input: { customer: string; amount: number }, config: ToolRunnableConfig) => JSON.stringify(await postCharge(service, String(config.toolCall?.id), input)),
      { name: "refund", description: "Refund", schema: z.object({ customer: z.string(), amount: z.number() }) });
    const ledger = sqliteLedger(join(tempDir(), "ledger.db"));
    const gate = createGate({ tools: [fromLangChainTool(mine, { effect: "write" })], ledger, onAlert: () => {}, policy: { approvals: { rules: [{ tool: "refund" }] } } });
    closers.push(() => service.close(), async () => { await gate.close(); await ledger.close(); });
    // Casts: LangChain's middleware types do not compile under exactOptionalPropertyTypes (its config type reads as never).
    const stock = (humanInTheLoopMiddleware as (config: unknown) => unknown)({ interruptOn: { refund: true } }) as AgentMiddleware;
    const agent = agentWith([mine], [stock, effectgateMiddleware(gate, { scope: mwScope })], [refundCall("call_refund")]);
    await agent.invoke(start, thread("s1"));
    const after = await agent.invoke(resume({ decisions: [{ type: "approve" }] }), thread("s1"));
    expect(interruptsOf(after)[0]?.value).toMatchObject({ type: "effectgate_approval", callId: "call_refund" });
    expect(service.received).toHaveLength(0);
  });
});
