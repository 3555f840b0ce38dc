/**
 * The LangChain / LangGraph adapter, with the real `@langchain/core`, `@langchain/langgraph`
 * (`ToolNode`, `MemorySaver`, `interrupt`) and `langchain` (`createAgent`, `toolRetryMiddleware`,
 * `fakeModel`) packages, a real SQLite ledger, the built `effectgate` command in other processes
 * for approvals, and the demo's real ticket service on 127.0.0.1, whose own count is the truth.
 */
import { join } from "node:path";
import { AIMessage, type BaseMessage } from "@langchain/core/messages";
import { tool, type ToolRunnableConfig } from "@langchain/core/tools";
import { Command, END, interrupt, MemorySaver, MessagesAnnotation, START, StateGraph } from "@langchain/langgraph";
import { ToolNode } from "@langchain/langgraph/prebuilt";
import { createAgent, fakeModel, toolRetryMiddleware, type AgentMiddleware } from "langchain";
import { z } from "zod";
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { startTicketService, type Ticket, type TicketService } from "../../demo/ticket-service.js";
import { createTicketTool } from "../../demo/ticket-tool.js";
import { defineTool } from "../../src/core/tool.js";
import type { Policy } from "../../src/governance/policy.js";
import { effectgateMiddleware, fromLangChainTool, langchainTool, NO_RETRYABLE_TOOL, retryableTools } from "../../src/langchain.js";
import { createGate, type Gate } from "../../src/root/create-gate.js";
import { sqliteLedger } from "../../src/stores/sqlite/index.js";
import { runCli } from "../cli/run-cli.js";
import { requireBuild } from "../support/processes.js";
import { tempDir } from "../support/tmp.js";

beforeAll(() => requireBuild()); // the approval tests decide from the built CLI

const dir = tempDir("effectgate-langchain-");
let n = 0;
const opened: { close(): Promise<void> }[] = [];
afterEach(async () => {
  for (const o of opened.splice(0).reverse()) await o.close();
});

async function ticketService(): Promise<TicketService> {
  const service = await startTicketService();
  opened.push(service);
  return service;
}

function gateFor(tools: Parameters<typeof createGate>[0]["tools"], policy?: Policy): { gate: Gate; file: string } {
  const file = join(dir, `ledger-${++n}.db`);
  const ledger = sqliteLedger(file);
  const gate = createGate({ tools, ledger, onAlert: () => {}, ...(policy ? { policy } : {}) });
  opened.push({ close: async () => { await gate.close(); await ledger.close(); } });
  return { gate, file };
}

/** A refund ticket needs a person's approval; other tickets do not. */
const refundsApproved: Policy = { approvals: { rules: [{ tool: "create_ticket", when: { field: "title", eq: "refund" }, reason: "refunds are checked" }] } };
const scope = (config: ToolRunnableConfig) => ({ tenant: "acme", task: String(config.configurable?.thread_id) });
const thread = (id: string) => ({ configurable: { thread_id: id } });

async function post(url: string, input: unknown): Promise<Ticket> {
  const res = await fetch(`${url}/tickets`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(input) });
  return (await res.json()) as Ticket;
}

/** A one-node graph: a ToolNode over `tools`, checkpointed in memory, fed one AI message holding a batch of two calls. */
function toolGraph(tools: ConstructorParameters<typeof ToolNode>[0]) {
  return new StateGraph(MessagesAnnotation)
    .addNode("tools", new ToolNode(tools))
    .addEdge(START, "tools")
    .addEdge("tools", END)
    .compile({ checkpointer: new MemorySaver() });
}
const batch = () => new AIMessage({
  content: "",
  tool_calls: [
    { id: "call_hello", name: "create_ticket", args: { customer: "c_1", title: "hello" } },
    { id: "call_refund", name: "create_ticket", args: { customer: "c_1", title: "refund" } },
  ],
});
/** The interrupts a paused graph run returned (`__interrupt__`, not in the state's type). */
const interruptsOf = (result: unknown) => (result as { __interrupt__?: { value: unknown }[] }).__interrupt__ ?? [];
/** A message's text (the adapter answers with text content). */
const text = (m: BaseMessage | undefined) => (typeof m?.content === "string" ? m.content : JSON.stringify(m?.content));
const contents = (messages: BaseMessage[]) => messages.slice(1).map(text);

async function approvalsOf(file: string): Promise<{ id: string; toolUseId: string; state: string }[]> {
  const ls = await runCli(["approvals", "ls", "--all", "--json", "--db", file]);
  expect(ls.code, ls.stderr).toBe(0);
  return JSON.parse(ls.stdout) as { id: string; toolUseId: string; state: string }[];
}

describe("a ToolNode batch where one call interrupts", () => {
  it("without effectgate, LangGraph re-runs the sibling on resume, same call id (the duplicate path)", async () => {
    const service = await ticketService();
    const ids: string[] = [];
    // Every post, awaited before counting: the interrupted pass does not wait for its sibling's request.
    const posts: Promise<Ticket>[] = [];
    const bare = tool(async (input: { customer: string; title: string }, config: ToolRunnableConfig) => {
      if (input.title === "refund") interrupt({ question: "refund?" });
      ids.push(String(config.toolCall?.id));
      const posted = post(service.url, input);
      posts.push(posted);
      return JSON.stringify(await posted);
    }, { name: "create_ticket", description: "Open a ticket", schema: z.object({ customer: z.string(), title: z.string() }) });
    const graph = toolGraph([bare]);
    const first = await graph.invoke({ messages: [batch()] }, thread("t1"));
    expect(interruptsOf(first)).toHaveLength(1);
    await graph.invoke(new Command({ resume: "yes" }), thread("t1"));
    await Promise.all(posts);
    expect(ids).toEqual(["call_hello", "call_hello", "call_refund"]);
    expect(service.tickets).toHaveLength(3);
  });

  it("through the adapter, approved from the CLI in another process: the sibling ran once, the approved call once, each answered", async () => {
    const service = await ticketService();
    const createTicket = createTicketTool(service.url);
    const { gate, file } = gateFor([createTicket], refundsApproved);
    const graph = toolGraph([langchainTool(gate, createTicket, { scope })]);

    const first = await graph.invoke({ messages: [batch()] }, thread("t1"));
    const [paused] = interruptsOf(first);
    expect(paused?.value).toMatchObject({ type: "effectgate_approval", callId: "call_refund", tool: "create_ticket", reasons: ["refunds are checked"] });
    // (The sibling's run may still be under way: an interrupted node does not wait for it. Its resumed twin waits for it.)
    expect(service.tickets.map((t) => t.idempotencyKey)).not.toContain("call_refund");

    const [request] = await approvalsOf(file);
    expect(request).toMatchObject({ toolUseId: "call_refund", state: "pending", id: (paused?.value as { approvalId: string }).approvalId });
    expect((await runCli(["approvals", "approve", request!.id, "--db", file, "--by", "alice"])).code).toBe(0);

    const done = await graph.invoke(new Command({ resume: "approved in the CLI" }), thread("t1"));
    expect(service.tickets.map((t) => t.idempotencyKey)).toEqual(["call_hello", "call_refund"]);
    expect(contents(done.messages)).toEqual([expect.stringContaining('"idempotencyKey":"call_hello"'), expect.stringContaining('"idempotencyKey":"call_refund"')]);
    expect(gate.stats).toMatchObject({ executed: 2, replayed: 1 });
  });

  it("a decision carried by the resume is recorded in effectgate's store; a denial there means the call never runs", async () => {
    const service = await ticketService();
    const createTicket = createTicketTool(service.url);
    const { gate, file } = gateFor([createTicket], refundsApproved);
    const graph = toolGraph([langchainTool(gate, createTicket, { scope })]);
    await graph.invoke({ messages: [batch()] }, thread("t2"));

    const done = await graph.invoke(new Command({ resume: { approve: false, by: "bob", note: "no refunds today" } }), thread("t2"));
    expect(service.tickets.map((t) => t.idempotencyKey)).toEqual(["call_hello"]);
    const answers = done.messages.slice(1);
    expect(answers[1]).toMatchObject({ status: "error", tool_call_id: "call_refund" });
    expect(text(answers[1])).toMatch(/^EG_APPROVAL_DENIED: bob denied/);
    expect((await approvalsOf(file)).map((a) => a.state)).toEqual(["denied"]);
  });

  it("a tool already written for LangChain, wrapped with its effect class, gets the same protection", async () => {
    const service = await ticketService();
    const ids: string[] = [];
    const mine = tool(async (input: { customer: string; title: string }, config: ToolRunnableConfig) => {
      ids.push(String(config.configurable?.thread_id));
      return post(service.url, input);
    }, { name: "create_ticket", description: "Open a ticket", schema: z.object({ customer: z.string(), title: z.string() }) });
    const wrapped = fromLangChainTool(mine, { effect: "write" });
    const { gate, file } = gateFor([wrapped], refundsApproved);
    const graph = toolGraph([langchainTool(gate, wrapped, { scope })]);
    await graph.invoke({ messages: [batch()] }, thread("t3"));
    const [request] = await approvalsOf(file);
    expect((await runCli(["approvals", "approve", request!.id, "--db", file])).code).toBe(0);
    await graph.invoke(new Command({ resume: "ok" }), thread("t3"));
    expect(service.tickets).toHaveLength(2);
    expect(ids).toEqual(["t3", "t3"]); // the user's tool saw the graph's config
  });
});

describe("toolRetryMiddleware (retries every error of every tool by default)", () => {
  /** A ticket service reply lost after the ticket was made: the request landed, the client saw a reset. */
  const lostReply = () => Object.assign(new Error("socket hang up"), { code: "ECONNRESET" });

  async function runAgent(tools: NonNullable<Parameters<typeof createAgent>[0]["tools"]>) {
    const model = fakeModel()
      .respondWithTools([{ id: "call_1", name: "create_ticket", args: { customer: "c_1", title: "router" } }])
      .respond(new AIMessage("done"));
    // Cast: LangChain's middleware types do not compile under exactOptionalPropertyTypes.
    const retry = toolRetryMiddleware({ initialDelayMs: 1, jitter: false }) as unknown as AgentMiddleware;
    const agent = createAgent({ model, tools, middleware: [retry] });
    return agent.invoke({ messages: [{ role: "user", content: "my router is down" }] }, thread("retry"));
  }

  it("without effectgate, re-runs a write whose reply was lost: three tickets", async () => {
    const service = await ticketService();
    const bare = tool(async (input: { customer: string; title: string }) => {
      await post(service.url, input);
      throw lostReply();
    }, { name: "create_ticket", description: "Open a ticket", schema: z.object({ customer: z.string(), title: z.string() }) });
    await runAgent([bare]);
    expect(service.tickets).toHaveLength(3);
  });

  it("through the adapter, the lost reply is settled by the probe: one ticket, and the agent gets it", async () => {
    const service = await ticketService();
    const flaky = defineTool({
      name: "create_ticket", description: "Open a ticket", effect: "write", settleMs: 300,
      input: z.object({ customer: z.string(), title: z.string() }),
      async execute(input, ctx) {
        const res = await fetch(`${service.url}/tickets`, {
          method: "POST", headers: { "content-type": "application/json", "idempotency-key": ctx.idempotencyKey }, body: JSON.stringify(input),
        });
        await res.json();
        throw lostReply();
      },
      async probe(_input, ctx) {
        const { tickets } = (await (await fetch(`${service.url}/tickets?key=${ctx.idempotencyKey}`)).json()) as { tickets: Ticket[] };
        return tickets[0] ? { status: "done", result: tickets[0] } : { status: "absent" };
      },
    });
    const { gate } = gateFor([flaky]);
    const result = await runAgent([langchainTool(gate, flaky, { scope })]);
    expect(service.tickets).toHaveLength(1);
    const answer = result.messages.find((m) => m.getType() === "tool");
    expect(text(answer)).toContain('"id":"T-1"');
  });
});

describe("effectgateMiddleware for createAgent, over tools already written for LangChain", () => {
  /** create_ticket as the user wrote it: the ticket lands, then the reply is lost (a reset). Counts its runs. */
  function lossyTicketTool(service: TicketService, runs: string[]) {
    return tool(async (input: { customer: string; title: string }, config: ToolRunnableConfig) => {
      runs.push(String(config.toolCall?.id));
      await post(service.url, { ...input, title: `${input.title} [${String(config.toolCall?.id)}]` });
      throw Object.assign(new Error("socket hang up"), { code: "ECONNRESET" });
    }, { name: "create_ticket", description: "Open a ticket", schema: z.object({ customer: z.string(), title: z.string() }) });
  }
  /** Asks the service for the ticket the call made (its title carries the call id, the only key this tool sends). */
  const probeByTitle = (service: TicketService) => async (_input: unknown, ctx: { toolUseId: string }) => {
    const made = service.tickets.find((t) => t.title.endsWith(`[${ctx.toolUseId}]`));
    return made ? { status: "done" as const, result: made } : { status: "absent" as const };
  };
  const mwScope = (rt: { configurable?: { thread_id?: string } }) => ({ tenant: "acme", task: String(rt.configurable?.thread_id) });

  async function runAgent(tools: NonNullable<Parameters<typeof createAgent>[0]["tools"]>, middleware: AgentMiddleware[]) {
    const model = fakeModel()
      .respondWithTools([{ id: "call_1", name: "create_ticket", args: { customer: "c_1", title: "router" } }])
      .respond(new AIMessage("done"));
    return createAgent({ model, tools, middleware }).invoke({ messages: [{ role: "user", content: "my router is down" }] }, thread("mw"));
  }
  const retryAll = () => toolRetryMiddleware({ initialDelayMs: 1, jitter: false }) as unknown as AgentMiddleware;

  it("with toolRetryMiddleware outside it (retrying every error): the lost reply is settled by the probe, the tool ran once", async () => {
    const service = await ticketService();
    const runs: string[] = [];
    const mine = lossyTicketTool(service, runs);
    const { gate } = gateFor([fromLangChainTool(mine, { effect: "write", settleMs: 300, probe: probeByTitle(service) })]);
    const result = await runAgent([mine], [retryAll(), effectgateMiddleware(gate, { scope: mwScope })]);
    expect(runs).toEqual(["call_1"]);
    expect(service.tickets).toHaveLength(1);
    expect(text(result.messages.find((m) => m.getType() === "tool"))).toContain('"id":"T-1"');
  });

  it("with a retry inside it restricted by retryableTools(gate): the write is not retried", async () => {
    const service = await ticketService();
    const runs: string[] = [];
    const mine = lossyTicketTool(service, runs);
    const { gate } = gateFor([fromLangChainTool(mine, { effect: "write", settleMs: 300, probe: probeByTitle(service) })]);
    const inner = toolRetryMiddleware({ tools: retryableTools(gate), initialDelayMs: 1, jitter: false }) as unknown as AgentMiddleware;
    // toolRetryMiddleware reads an empty list as "every tool": a gate without reads gives a name no tool has.
    expect(retryableTools(gate)).toEqual([NO_RETRYABLE_TOOL]);
    await runAgent([mine], [effectgateMiddleware(gate, { scope: mwScope }), inner]);
    expect(runs).toEqual(["call_1"]);
    expect(service.tickets).toHaveLength(1);
  });

  it("an unrestricted retry inside it would re-run the write within one gated run (why the order and retryableTools matter)", async () => {
    const service = await ticketService();
    const runs: string[] = [];
    const mine = lossyTicketTool(service, runs);
    const { gate } = gateFor([fromLangChainTool(mine, { effect: "write", settleMs: 300, probe: probeByTitle(service) })]);
    await runAgent([mine], [effectgateMiddleware(gate, { scope: mwScope }), retryAll()]);
    expect(runs).toEqual(["call_1", "call_1", "call_1"]);
  });
});
