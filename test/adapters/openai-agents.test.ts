/**
 * The OpenAI Agents SDK adapter, with the real `@openai/agents` package, a fake model
 * implementing its `Model` interface (agents-model.ts), a real SQLite ledger and the demo's real
 * ticket service on 127.0.0.1, whose own count of tickets is the ground truth.
 */
import { join } from "node:path";
import { Agent, run, RunState, setTracingDisabled, tool } from "@openai/agents";
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { startTicketService, type TicketService } from "../../demo/ticket-service.js";
import { agentsTool } from "../../src/openai-agents.js";
import { createGate, type Gate } from "../../src/root/create-gate.js";
import { sqliteLedger } from "../../src/stores/sqlite/index.js";
import { tempDir } from "../support/tmp.js";
import { plannedModel } from "./agents-model.js";
import { postTicket, ticketInput, ticketTool } from "./ticket-tool.js";

beforeAll(() => setTracingDisabled(true));

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

function gateFor(service: TicketService, file = join(dir, `ledger-${++n}.db`)): Gate {
  const gate = createGate({ tools: [ticketTool(service.url)], ledger: sqliteLedger(file), onAlert: () => {} });
  opened.push({ close: async () => { await gate.close(); await gate.ledger.close(); } });
  return gate;
}

interface Ctx { readonly tenant: string; readonly conversation: string }
const context: Ctx = { tenant: "acme", conversation: "conv-1" };
const scope = (rc: { context: Ctx }) => ({ tenant: rc.context.tenant, task: rc.context.conversation });
const plan = [{ callId: "call_1", name: "create_ticket", input: { customer: "c_1", title: "refund" } }];

describe("resuming one saved RunState twice", () => {
  it("without effectgate, the SDK runs the approved tool twice under the same call id (the duplicate path)", async () => {
    const service = await ticketService();
    const ids: string[] = [];
    const bare = tool({
      name: "create_ticket", description: "Open a support ticket", parameters: ticketInput, needsApproval: true,
      async execute(input, _rc, details) {
        ids.push(details?.toolCall?.callId ?? "?");
        return postTicket(service.url, input, null);
      },
    });
    const agent = new Agent<Ctx>({ name: "support", model: plannedModel(plan), tools: [bare] });
    const first = await run(agent, "open a ticket", { context });
    expect(first.interruptions).toHaveLength(1);
    const saved = first.state.toString();
    for (let round = 0; round < 2; round++) {
      const state = await RunState.fromString(agent, saved);
      for (const item of state.getInterruptions()) state.approve(item);
      await run(agent, state);
    }
    expect(ids).toEqual(["call_1", "call_1"]);
    expect(service.tickets).toHaveLength(2);
  });

  it("through the adapter the tool runs once, and both resumed runs get that one ticket", async () => {
    const service = await ticketService();
    const gate = gateFor(service);
    const gated = agentsTool<Ctx>(gate, ticketTool(service.url), { scope });
    const agent = new Agent<Ctx>({ name: "support", model: plannedModel(plan), tools: [{ ...gated, needsApproval: async () => true }] });
    const first = await run(agent, "open a ticket", { context });
    expect(first.interruptions).toHaveLength(1);
    const saved = first.state.toString();
    const outputs: unknown[] = [];
    for (let round = 0; round < 2; round++) {
      const state = await RunState.fromString(agent, saved);
      for (const item of state.getInterruptions()) state.approve(item);
      outputs.push((await run(agent, state)).finalOutput);
    }
    expect(service.tickets).toHaveLength(1);
    expect(service.tickets[0]?.idempotencyKey).toBe("call_1");
    expect(outputs[0]).toContain('"id":"T-1"');
    expect(outputs[1]).toBe(outputs[0]);
    expect(gate.stats).toMatchObject({ executed: 1, replayed: 1 });
  });
});
