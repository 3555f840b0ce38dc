/**
 * The OpenAI Agents SDK adapter on @openai/agents 0.20 (the dev alias `openai-agents-v020`, Node 22
 * or later: the Node 24 lane), with the SDK's own test double (ScriptedModel, functionCall,
 * assistantMessage from `@openai/agents/testing`), a real SQLite ledger, the built `effectgate`
 * command in another process for approvals, and the demo's real ticket service on 127.0.0.1, whose
 * own count of tickets is the ground truth. The same scenarios on 0.14: openai-agents.test.ts.
 */
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { Agent, run, RunState, setTracingDisabled, tool } from "openai-agents-v020";
import { z } from "zod";
import { afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { startTicketService, type TicketService } from "../../demo/ticket-service.js";
import { createTicketTool } from "../../demo/ticket-tool.js";
import { createGate, type Gate } from "../../src/root/create-gate.js";
import { defineTool } from "../../src/core/tool.js";
import type { RepeatPolicy } from "../../src/core/repeats.js";
import { assistantMessage, functionCall, modelResponder, ScriptedModel } from "openai-agents-v020/testing";
import type { Condition, Policy } from "../../src/governance/policy.js";
import { sqliteLedger } from "../../src/stores/sqlite/index.js";
import { runCli } from "../cli/run-cli.js";
import { requireBuild, runFixture } from "../support/processes.js";
import { newerSdkLines, newerSdkLinesNote } from "../support/sdk-lines.js";
import { tempDir } from "../support/tmp.js";
import { agentsTool020, plannedModel, type PlannedCall } from "./agents-v020-support.js";

// The public entry effectgate/openai-agents imports the installed @openai/agents, which here is
// 0.14: in this file that module is 0.20, so the entry runs against 0.20 exactly as a user's would.
vi.mock("@openai/agents", async () => await import("openai-agents-v020"));

beforeAll(() => {
  if (!newerSdkLines) return;
  setTracingDisabled(true);
  requireBuild(); // the approval tests decide from the built CLI
});

// Made on first use: on Node 20 every test here is skipped, and vitest then runs no afterAll to remove a folder made up front.
let made: string | undefined;
const workDir = () => (made ??= tempDir("effectgate-agents-020-"));
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

const approveTickets = (when?: Condition): Policy =>
  ({ approvals: { rules: [{ tool: "create_ticket", ...(when === undefined ? {} : { when }), reason: "tickets are checked by a person" }] } });

function gateFor(service: TicketService, policy: Policy): { gate: Gate; file: string } {
  const file = join(workDir(), `ledger-${++n}.db`);
  const ledger = sqliteLedger(file);
  const gate = createGate({ tools: [createTicketTool(service.url)], ledger, onAlert: () => {}, policy });
  opened.push({ close: async () => { await gate.close(); await ledger.close(); } });
  return { gate, file };
}

interface Ctx { readonly tenant: string; readonly conversation: string }
const context: Ctx = { tenant: "acme", conversation: "conv-1" };
const scope = (rc: { context: Ctx }) => ({ tenant: rc.context.tenant, task: rc.context.conversation });
const refund: PlannedCall = { callId: "call_1", name: "create_ticket", input: { customer: "c_1", title: "refund" } };

function agentWith(gate: Gate, service: TicketService, calls: readonly PlannedCall[]) {
  return new Agent<Ctx>({ name: "support", model: plannedModel(calls), tools: [agentsTool020<Ctx>(gate, createTicketTool(service.url), { scope })] });
}

/** Resumes a saved run from its text, as a fresh worker would, approving in the SDK whatever `approve` says. */
async function resume(agent: Agent<Ctx>, saved: string, approve = false) {
  const state = await RunState.fromString(agent, saved);
  if (approve) for (const item of state.getInterruptions()) state.approve(item);
  return run(agent, state);
}

async function approvalsIn(file: string): Promise<{ id: string; toolUseId: string; input: unknown; state: string }[]> {
  const ls = await runCli(["approvals", "ls", "--json", "--db", file]);
  expect(ls.code, ls.stderr).toBe(0);
  return JSON.parse(ls.stdout) as { id: string; toolUseId: string; input: unknown; state: string }[];
}

describe(`@openai/agents 0.20: resuming one saved RunState twice${newerSdkLinesNote}`, { skip: !newerSdkLines }, () => {
  it("the public entry is what runs here, on 0.20: the module it imports its tool() from is 0.20's", async () => {
    const entrySdk = await import("@openai/agents");
    expect(entrySdk.tool).toBe(tool);
  });

  it("without effectgate, the SDK runs the approved tool twice under the same call id (the path exists in 0.20)", async () => {
    const service = await ticketService();
    const ids: string[] = [];
    const bare = tool({
      name: "create_ticket", description: "Open a support ticket", needsApproval: true,
      parameters: z.object({ customer: z.string(), title: z.string() }),
      async execute(input, _rc, details) {
        ids.push(details?.toolCall?.callId ?? "?");
        const res = await fetch(`${service.url}/tickets`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(input) });
        return res.json();
      },
    });
    const agent = new Agent<Ctx>({ name: "support", model: plannedModel([refund]), tools: [bare] });
    const first = await run(agent, "open a ticket", { context });
    expect(first.interruptions).toHaveLength(1);
    const saved = first.state.toString();
    await resume(agent, saved, true);
    await resume(agent, saved, true);
    expect(ids).toEqual(["call_1", "call_1"]);
    expect(service.tickets).toHaveLength(2);
  });

  it("through the adapter, approved from `effectgate approvals approve` in another process, the tool runs once and both resumes get that ticket", async () => {
    const service = await ticketService();
    const { gate, file } = gateFor(service, approveTickets());
    const agent = agentWith(gate, service, [refund]);

    const first = await run(agent, "open a ticket", { context });
    expect(first.interruptions.map((i) => i.rawItem)).toMatchObject([{ callId: "call_1" }]);
    const saved = first.state.toString();
    const [request] = await approvalsIn(file);
    expect(request).toMatchObject({ toolUseId: "call_1", input: refund.input, state: "pending" });

    // Not approved yet: a resume interrupts again and runs nothing.
    expect((await resume(agent, saved)).interruptions).toHaveLength(1);
    expect(service.tickets).toHaveLength(0);

    const approve = await runCli(["approvals", "approve", request!.id, "--db", file, "--by", "alice"]);
    expect(approve.code, approve.stderr).toBe(0);

    const a = await resume(agent, saved);
    const b = await resume(agent, saved);
    expect(service.tickets).toHaveLength(1);
    expect(service.tickets[0]?.idempotencyKey).toBe("call_1");
    expect(a.interruptions).toHaveLength(0);
    expect(a.finalOutput).toContain('"id":"T-1"');
    expect(b.finalOutput).toBe(a.finalOutput);
    expect(gate.stats).toMatchObject({ executed: 1, replayed: 1 });
  });
});

describe(`@openai/agents 0.20: approvals through the SDK's approval surface${newerSdkLinesNote}`, { skip: !newerSdkLines }, () => {
  it("a call denied from the CLI never runs, even when the SDK's own state approves it; the model is told", async () => {
    const service = await ticketService();
    const { gate, file } = gateFor(service, approveTickets());
    const agent = agentWith(gate, service, [refund]);
    const saved = (await run(agent, "open a ticket", { context })).state.toString();
    const [request] = await approvalsIn(file);
    const deny = await runCli(["approvals", "deny", request!.id, "--db", file, "--by", "bob", "--note", "not this customer"]);
    expect(deny.code, deny.stderr).toBe(0);

    const denied = await resume(agent, saved, true);
    expect(service.tickets).toHaveLength(0);
    expect(denied.finalOutput).toMatch(/create_ticket: EG_APPROVAL_DENIED: bob denied/);
  });

  it("approving in the SDK alone does not release a call effectgate holds for a person", async () => {
    const service = await ticketService();
    const { gate } = gateFor(service, approveTickets());
    const agent = agentWith(gate, service, [refund]);
    const saved = (await run(agent, "open a ticket", { context })).state.toString();
    const result = await resume(agent, saved, true);
    expect(service.tickets).toHaveLength(0);
    expect(result.finalOutput).toMatch(/create_ticket: EG_AWAITING_APPROVAL: /);
  });

  it("an approval for other input never releases the call: a saved state whose arguments changed asks again", async () => {
    const service = await ticketService();
    const { gate, file } = gateFor(service, approveTickets());
    const agent = agentWith(gate, service, [refund]);
    const saved = (await run(agent, "open a ticket", { context })).state.toString();
    const [request] = await approvalsIn(file);
    expect((await runCli(["approvals", "approve", request!.id, "--db", file])).code).toBe(0);

    // Someone edits the saved run: same call id, other arguments.
    const tampered = saved.replaceAll('\\"title\\":\\"refund\\"', '\\"title\\":\\"refund everything\\"');
    expect(tampered).not.toBe(saved);
    const result = await resume(agent, tampered, true);
    expect(service.tickets).toHaveLength(0);
    expect(result.finalOutput).toMatch(/EG_AWAITING_APPROVAL/);
    const requests = (await approvalsIn(file)).filter((r) => r.state === "pending");
    expect(requests.map((r) => r.input)).toEqual([{ customer: "c_1", title: "refund everything" }]);
  });

  it("in a parallel batch, the call waiting for approval interrupts while the others run once and are answered", async () => {
    const service = await ticketService();
    const { gate, file } = gateFor(service, approveTickets({ field: "title", eq: "refund" }));
    const hello: PlannedCall = { callId: "call_2", name: "create_ticket", input: { customer: "c_2", title: "hello" } };
    const agent = agentWith(gate, service, [refund, hello]);

    const first = await run(agent, "open two tickets", { context });
    expect(first.interruptions.map((i) => (i.rawItem as { callId: string }).callId)).toEqual(["call_1"]);
    expect(service.tickets.map((t) => t.idempotencyKey)).toEqual(["call_2"]);
    const saved = first.state.toString();

    const [request] = await approvalsIn(file);
    expect((await runCli(["approvals", "approve", request!.id, "--db", file])).code).toBe(0);
    const done = await resume(agent, saved);
    const again = await resume(agent, saved);
    expect(service.tickets.map((t) => t.idempotencyKey)).toEqual(["call_2", "call_1"]);
    expect(done.finalOutput).toMatch(/create_ticket: .*"id":"T-2"[\s\S]*create_ticket: .*"id":"T-1"/);
    expect(again.finalOutput).toBe(done.finalOutput);
  });
});

describe(`@openai/agents 0.20: a worker SIGKILLed right after the tool's effect${newerSdkLinesNote}`, { skip: !newerSdkLines }, () => {
  const worker = fileURLToPath(new URL("./fixtures/agents-worker.mjs", import.meta.url));
  const runWorker = (job: Record<string, unknown>) => runFixture(worker, { sdk: "0.20", ...job }, { cwd: workDir(), label: `agents 0.20 worker (${String(job.mode)})` });

  it("is resumed from its saved RunState in a fresh process: the ticket was made once and the agent gets that ticket", async () => {
    const service = await ticketService();
    const files = { ledger: join(workDir(), `crash-${++n}.db`), state: join(workDir(), `run-state-${n}.json`) };
    const started = await runWorker({ mode: "start", ...files, url: service.url });
    expect(started, started.stderr).toMatchObject({ code: 0, lines: [{ saved: 1 }] });
    const [request] = await approvalsIn(files.ledger);
    expect((await runCli(["approvals", "approve", request!.id, "--db", files.ledger])).code).toBe(0);

    const crashed = await runWorker({ mode: "crash", ...files, url: service.url, point: "after_execute" });
    expect(crashed.signal, crashed.stderr).toBe("SIGKILL");
    expect(crashed.lines).toEqual([]);
    expect(service.tickets).toHaveLength(1); // the effect happened; its outcome was never recorded

    const resumed = await runWorker({ mode: "resume", ...files, url: service.url });
    expect(resumed, resumed.stderr).toMatchObject({ code: 0, signal: null });
    const out = resumed.lines.at(-1) as { finalOutput: string; interruptions: number; stats: { executed: number }; sdk: string };
    expect(out.sdk).toMatch(/^0\.20\./);
    expect(service.tickets).toHaveLength(1);
    expect(JSON.parse(out.finalOutput)).toEqual(service.tickets[0]);
    expect(out).toMatchObject({ interruptions: 0, stats: { executed: 0 } }); // settled by the probe, not run again
  });
});

describe(`@openai/agents 0.20: a re-planned ticket under a new call id${newerSdkLinesNote}`, { skip: !newerSdkLines }, () => {
  const ask = { customer: "c_1", title: "refund" };
  /** A model that asks for the ticket, and once it has the result asks for it again under a new call id, then reports both. */
  function replanning(): ScriptedModel {
    const respond = modelResponder((call) => {
      const items = Array.isArray(call.request.input) ? call.request.input : [];
      const answered = items.filter((i) => i.type === "function_call_result").length;
      if (answered < 2) return [functionCall("create_ticket", ask, { callId: `call_${answered + 1}`, id: `fc_${answered + 1}` })];
      return [assistantMessage("done", { id: "msg_final" })];
    });
    return new ScriptedModel([respond, respond, respond, respond]);
  }
  function agentFor(service: TicketService, action: RepeatPolicy["action"]) {
    const file = join(workDir(), `ledger-${++n}.db`);
    const tickets = defineTool({ ...createTicketTool(service.url), repeats: { action } });
    const gate = createGate({ tools: [tickets], ledger: sqliteLedger(file), onAlert: () => {} });
    opened.push({ close: () => gate.close() });
    return { gate, file, agent: new Agent<Ctx>({ name: "support", model: replanning(), tools: [agentsTool020<Ctx>(gate, tickets, { scope })] }) };
  }
  const outputsOf = (result: { newItems: readonly { type: string }[] }) =>
    result.newItems.filter((i) => i.type === "tool_call_output_item").map((i) => String((i as unknown as { output: unknown }).output));

  it("collapse: one ticket; the second output is the first ticket after the line saying it was not made again", async () => {
    const service = await ticketService();
    const { agent } = agentFor(service, "collapse");
    const outputs = outputsOf(await run(agent, "refund me", { context }));
    expect(service.tickets).toHaveLength(1);
    expect(outputs).toHaveLength(2);
    expect(outputs[1]).toMatch(/^\[effectgate: this create_ticket call repeats call call_1 \(same input, completed .*\); it was not executed again\. That call's result:\]\n/);
    expect(outputs[1]!.endsWith(outputs[0]!)).toBe(true);
  });

  it("approve: the repeat is an interruption of the run; approved from the CLI, the resumed run makes the second ticket once", async () => {
    const service = await ticketService();
    const { agent, file } = agentFor(service, "approve");
    const first = await run(agent, "refund me", { context });
    expect(service.tickets).toHaveLength(1);
    expect(first.interruptions.map((i) => (i.rawItem as { callId: string }).callId)).toEqual(["call_2"]);
    const [request] = (await approvalsIn(file)).filter((a) => a.state === "pending");
    expect(request?.toolUseId).toBe("call_2");
    expect((await runCli(["approvals", "approve", request!.id, "--db", file])).code).toBe(0);
    const saved = first.state.toString();
    await resume(agent, saved);
    await resume(agent, saved);
    expect(service.tickets.map((t) => t.idempotencyKey)).toEqual(["call_1", "call_2"]);
  });
});
