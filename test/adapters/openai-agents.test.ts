/**
 * The OpenAI Agents SDK adapter, with the real `@openai/agents` package, a fake model
 * implementing its `Model` interface (agents-model.ts), a real SQLite ledger, the built
 * `effectgate` command in other processes for approvals, and the demo's real ticket service on
 * 127.0.0.1, whose own count of tickets is the ground truth.
 */
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { Agent, run, RunState, setTracingDisabled, tool, type RunContext } from "@openai/agents";
import { z } from "zod";
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { startTicketService, type Ticket, type TicketService } from "../../demo/ticket-service.js";
import { createTicketTool } from "../../demo/ticket-tool.js";
import { agentsTool, fromAgentsTool } from "../../src/openai-agents.js";
import { createGate, type Gate } from "../../src/root/create-gate.js";
import type { Condition, Policy } from "../../src/governance/policy.js";
import { decideCall, listApprovals } from "../../src/operator.js";
import { sqliteLedger } from "../../src/stores/sqlite/index.js";
import { runCli } from "../cli/run-cli.js";
import { requireBuild, runFixture } from "../support/processes.js";
import { tempDir } from "../support/tmp.js";
import { plannedModel, type PlannedCall } from "./agents-model.js";

beforeAll(() => {
  setTracingDisabled(true);
  requireBuild(); // the approval tests decide from the built CLI
});

const dir = tempDir("effectgate-agents-");
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

/** Every create_ticket call needs a person's approval unless `when` narrows it. */
const approveTickets = (when?: Condition): Policy =>
  ({ approvals: { rules: [{ tool: "create_ticket", ...(when === undefined ? {} : { when }), reason: "tickets are checked by a person" }] } });

function gateFor(service: TicketService, options: { policy?: Policy; tools?: Parameters<typeof createGate>[0]["tools"] } = {}): { gate: Gate; file: string } {
  const file = join(dir, `ledger-${++n}.db`);
  const ledger = sqliteLedger(file);
  const gate = createGate({ tools: options.tools ?? [createTicketTool(service.url)], ledger, onAlert: () => {}, ...(options.policy ? { policy: options.policy } : {}) });
  opened.push({ close: async () => { await gate.close(); await ledger.close(); } });
  return { gate, file };
}

interface Ctx { readonly tenant: string; readonly conversation: string }
const context: Ctx = { tenant: "acme", conversation: "conv-1" };
const scope = (rc: RunContext<Ctx>) => ({ tenant: rc.context.tenant, task: rc.context.conversation });
const refund: PlannedCall = { callId: "call_1", name: "create_ticket", input: { customer: "c_1", title: "refund" } };

/** Resumes a saved run from its text, as a fresh worker would, approving in the SDK whatever `approve` says. */
async function resume(agent: Agent<Ctx>, saved: string, approve = false) {
  const state = await RunState.fromString(agent, saved);
  if (approve) for (const item of state.getInterruptions()) state.approve(item);
  return run(agent, state);
}

async function pendingApprovals(file: string): Promise<{ id: string; toolUseId: string; input: unknown; state: string }[]> {
  const ls = await runCli(["approvals", "ls", "--json", "--db", file]);
  expect(ls.code, ls.stderr).toBe(0);
  return JSON.parse(ls.stdout) as { id: string; toolUseId: string; input: unknown; state: string }[];
}

describe("resuming one saved RunState twice", () => {
  it("without effectgate, the SDK runs the approved tool twice under the same call id (the duplicate path)", async () => {
    const service = await ticketService();
    const ids: string[] = [];
    const bare = tool({
      name: "create_ticket", description: "Open a support ticket", needsApproval: true,
      parameters: z.object({ customer: z.string(), title: z.string() }),
      async execute(input, _rc, details) {
        ids.push(details?.toolCall?.callId ?? "?");
        const res = await fetch(`${service.url}/tickets`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(input) });
        return (await res.json());
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
    const { gate, file } = gateFor(service, { policy: approveTickets() });
    const agent = new Agent<Ctx>({ name: "support", model: plannedModel([refund]), tools: [agentsTool(gate, createTicketTool(service.url), { scope })] });

    const first = await run(agent, "open a ticket", { context });
    expect(first.interruptions.map((i) => i.rawItem)).toMatchObject([{ callId: "call_1" }]);
    const saved = first.state.toString();
    // The SDK's interruption filed effectgate's durable request, keyed by the SDK's call id.
    const [request] = await pendingApprovals(file);
    expect(request).toMatchObject({ toolUseId: "call_1", input: refund.input, state: "pending" });

    // Not approved yet: a resume interrupts again and runs nothing.
    expect((await resume(agent, saved)).interruptions).toHaveLength(1);
    expect(service.tickets).toHaveLength(0);

    const approve = await runCli(["approvals", "approve", request!.id, "--db", file, "--by", "alice"]);
    expect(approve.code, approve.stderr).toBe(0);

    // The same saved state resumed twice (no SDK-side approval needed: the SDK asks needsApproval again).
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

describe("approvals through the SDK's approval surface", () => {
  it("a call denied from the CLI never runs, even when the SDK's own state approves it; the model is told", async () => {
    const service = await ticketService();
    const { gate, file } = gateFor(service, { policy: approveTickets() });
    const agent = new Agent<Ctx>({ name: "support", model: plannedModel([refund]), tools: [agentsTool(gate, createTicketTool(service.url), { scope })] });
    const saved = (await run(agent, "open a ticket", { context })).state.toString();
    const [request] = await pendingApprovals(file);
    const deny = await runCli(["approvals", "deny", request!.id, "--db", file, "--by", "bob", "--note", "not this customer"]);
    expect(deny.code, deny.stderr).toBe(0);

    const denied = await resume(agent, saved, true);
    expect(service.tickets).toHaveLength(0);
    expect(denied.finalOutput).toMatch(/create_ticket: EG_APPROVAL_DENIED: bob denied/);
  });

  it("approving in the SDK alone does not release a call effectgate holds for a person", async () => {
    const service = await ticketService();
    const { gate } = gateFor(service, { policy: approveTickets() });
    const agent = new Agent<Ctx>({ name: "support", model: plannedModel([refund]), tools: [agentsTool(gate, createTicketTool(service.url), { scope })] });
    const saved = (await run(agent, "open a ticket", { context })).state.toString();
    const result = await resume(agent, saved, true);
    expect(service.tickets).toHaveLength(0);
    expect(result.finalOutput).toMatch(/create_ticket: EG_AWAITING_APPROVAL: /);
  });

  it("an approval for other input never releases the call: a saved state whose arguments changed asks again", async () => {
    const service = await ticketService();
    const { gate, file } = gateFor(service, { policy: approveTickets() });
    const agent = new Agent<Ctx>({ name: "support", model: plannedModel([refund]), tools: [agentsTool(gate, createTicketTool(service.url), { scope })] });
    const saved = (await run(agent, "open a ticket", { context })).state.toString();
    const [request] = await pendingApprovals(file);
    expect((await runCli(["approvals", "approve", request!.id, "--db", file])).code).toBe(0);

    // Someone edits the saved run: same call id, other arguments.
    const tampered = saved.replaceAll("refund", "refund everything");
    expect(tampered).not.toBe(saved);
    const result = await resume(agent, tampered, true);
    expect(service.tickets).toHaveLength(0);
    // Answered with its own, new request; approved in the SDK, it still waits for effectgate's.
    expect(result.finalOutput).toMatch(/EG_AWAITING_APPROVAL/);
    const requests = await pendingApprovals(file);
    expect(requests.map((r) => r.input)).toEqual([{ customer: "c_1", title: "refund everything" }]);
  });

  it("in a parallel batch, the call waiting for approval interrupts while the others run once and are answered", async () => {
    const service = await ticketService();
    const { gate, file } = gateFor(service, { policy: approveTickets({ field: "title", eq: "refund" }) });
    const hello: PlannedCall = { callId: "call_2", name: "create_ticket", input: { customer: "c_2", title: "hello" } };
    const agent = new Agent<Ctx>({ name: "support", model: plannedModel([refund, hello]), tools: [agentsTool(gate, createTicketTool(service.url), { scope })] });

    const first = await run(agent, "open two tickets", { context });
    expect(first.interruptions.map((i) => (i.rawItem as { callId: string }).callId)).toEqual(["call_1"]);
    expect(service.tickets.map((t) => t.idempotencyKey)).toEqual(["call_2"]);
    const saved = first.state.toString();

    const [request] = await pendingApprovals(file);
    expect((await runCli(["approvals", "approve", request!.id, "--db", file])).code).toBe(0);
    const done = await resume(agent, saved);
    const again = await resume(agent, saved);
    expect(service.tickets.map((t) => t.idempotencyKey)).toEqual(["call_2", "call_1"]);
    expect(done.finalOutput).toMatch(/create_ticket: .*"id":"T-2"[\s\S]*create_ticket: .*"id":"T-1"/);
    expect(again.finalOutput).toBe(done.finalOutput);
  });
});

describe("wrapping a tool already written for the SDK", () => {
  it("gets its effect class from fromAgentsTool, runs the user's execute with the SDK's run context, once per call id", async () => {
    const service = await ticketService();
    const seen: { tenant: string | undefined; callId: string | undefined }[] = [];
    const source = {
      name: "create_ticket",
      description: "Open a support ticket",
      parameters: z.object({ customer: z.string(), title: z.string() }),
      async execute(input: { customer: string; title: string }, rc?: RunContext<unknown>, details?: { toolCall?: { callId: string } }) {
        seen.push({ tenant: (rc?.context as Ctx | undefined)?.tenant, callId: details?.toolCall?.callId });
        const res = await fetch(`${service.url}/tickets`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(input) });
        return (await res.json()) as Ticket;
      },
    };
    const wrapped = fromAgentsTool(source, { effect: "write" });
    const { gate } = gateFor(service, { tools: [wrapped], policy: approveTickets() });
    const agent = new Agent<Ctx>({ name: "support", model: plannedModel([refund]), tools: [agentsTool(gate, wrapped, { scope })] });
    const saved = (await run(agent, "open a ticket", { context })).state.toString();
    const [request] = await listApprovals(gate.ledger, { state: "pending" });
    await decideCall(gate.ledger, request!.id, { approve: true, by: "alice" });
    await resume(agent, saved);
    await resume(agent, saved);
    expect(service.tickets).toHaveLength(1);
    expect(seen).toEqual([{ tenant: "acme", callId: "call_1" }]);
  });

  it("refuses a tool the gate does not have when the agent is built", async () => {
    const service = await ticketService();
    const { gate } = gateFor(service);
    const other = createTicketTool(service.url);
    expect(() => agentsTool(gate, { ...other, name: "open_ticket" }, { scope })).toThrow(/not among the gate's tools/);
  });
});

describe("a worker SIGKILLed right after the tool's effect", () => {
  const worker = fileURLToPath(new URL("./fixtures/agents-worker.mjs", import.meta.url));
  const runWorker = (job: Record<string, unknown>) => runFixture(worker, job, { cwd: dir, label: `agents worker (${String(job.mode)})` });

  it("is resumed from its saved RunState in a fresh process: the ticket was made once and the agent gets that ticket", async () => {
    const service = await ticketService();
    const files = { ledger: join(dir, `crash-${++n}.db`), state: join(dir, `run-state-${n}.json`) };
    const started = await runWorker({ mode: "start", ...files, url: service.url });
    expect(started, started.stderr).toMatchObject({ code: 0, lines: [{ saved: 1 }] });
    const [request] = JSON.parse((await runCli(["approvals", "ls", "--json", "--db", files.ledger])).stdout) as { id: string }[];
    expect((await runCli(["approvals", "approve", request!.id, "--db", files.ledger])).code).toBe(0);

    const crashed = await runWorker({ mode: "crash", ...files, url: service.url, point: "after_execute" });
    expect(crashed.signal, crashed.stderr).toBe("SIGKILL");
    expect(crashed.lines).toEqual([]);
    expect(service.tickets).toHaveLength(1); // the effect happened; its outcome was never recorded

    const resumed = await runWorker({ mode: "resume", ...files, url: service.url });
    expect(resumed, resumed.stderr).toMatchObject({ code: 0, signal: null });
    const out = resumed.lines.at(-1) as { finalOutput: string; interruptions: number; stats: { executed: number } };
    expect(service.tickets).toHaveLength(1);
    expect(JSON.parse(out.finalOutput)).toEqual(service.tickets[0]);
    expect(out).toMatchObject({ interruptions: 0, stats: { executed: 0 } }); // settled by the probe, not run again
  });
});
