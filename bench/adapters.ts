/**
 * What each SDK adapter adds to one gated write, against the same tool run bare by the same SDK.
 * A standalone script, never part of the tests:
 *
 *   npm run bench:adapters   (or, after a build: npx tsc -p tsconfig.bench.json && node --expose-gc dist-bench/bench/adapters.js [--calls=300] [--rounds=5])
 *
 * One "call" is one agent turn through the real SDK and its offline test double: the model asks
 * for `charge_card` under a new call id, the SDK runs the tool, the model answers. The AI SDK runs
 * MockLanguageModelV3, the Anthropic tool runner a fake Messages API on 127.0.0.1 (two HTTP
 * round trips per turn), the OpenAI Agents SDK a fake Model, LangChain's createAgent fakeModel.
 * The tool's effect is an in-process counter, so the difference between a row and its bare row is
 * the adapter and the gate (a claim and a completion on the ledger), not a downstream.
 *
 * A last group without any SDK times gate.runTool itself against calling the effect directly: the
 * part of each adapter's overhead that is the gate's write path (on SQLite, two fsync'd commits).
 *
 * Rows: bare (the SDK's own tool), the adapter on the memory ledger, the adapter on SQLite
 * (durability "fsync", the default). Rounds interleave every SDK and row (the rows' order turning
 * each round), so machine drift (the VM is shared) hits them alike; p50 and p99 are over every
 * measured call of all rounds. The run checks that every turn made exactly one charge.
 */
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import { join } from "node:path";
import Anthropic from "@anthropic-ai/sdk";
import { betaZodTool } from "@anthropic-ai/sdk/helpers/beta/zod";
import { AIMessage, type BaseMessage } from "@langchain/core/messages";
import { tool as langchainToolOf } from "@langchain/core/tools";
import { Agent, run, setTracingDisabled, tool as agentsToolOf, Usage, type Model, type ModelRequest } from "@openai/agents";
import { generateText, stepCountIs, tool as aiToolOf, type ToolSet } from "ai";
import { MockLanguageModelV3 } from "ai/test";
import { createAgent, fakeModel } from "langchain";
import { z } from "zod";
import { aiSdkTools } from "../src/ai-sdk.js";
import { anthropicTools } from "../src/anthropic.js";
import { createGate, defineTool, memoryLedger, type Gate, type Stores } from "../src/index.js";
import { langchainTool } from "../src/langchain.js";
import { agentsTool } from "../src/openai-agents.js";
import { sqliteLedger } from "../src/sqlite.js";
import { startFakeMessagesApi, textBlock, toolUse } from "../test/adapters/fake-messages-api.js";
import { positiveIntFlag as flag } from "./lib/flags.js";
import { collectGarbage, fmtUs, summarize, table, usSince } from "./lib/stats.js";

const CALLS = flag("calls", 300);
const ROUNDS = flag("rounds", 5);
const WARM = Math.max(5, Math.floor(CALLS / 10));

setTracingDisabled(true);
const scope = { tenant: "acme", task: "bench" };
const schema = z.object({ amount: z.number() });
let charged = 0;
/** The effect: an in-process counter (the same for the bare and the gated tool). */
const chargeOnce = (amount: number, key: string) => ({ id: `ch_${++charged}`, amount, key });
let nextId = 0;
const newCallId = (sdk: string) => `${sdk}_${++nextId}`;

type Row = "bare" | "memory" | "sqlite";
type Turn = () => Promise<unknown>;
/** One SDK: a turn for each row (the tools differ, the SDK and its double are the same). */
type Sdk = { readonly name: string; readonly turns: Record<Row, Turn>; readonly labels?: Record<Row, string>; close?(): Promise<void> };

const dir = mkdtempSync(join(os.tmpdir(), "effectgate-bench-adapters-"));
const ledgers: Stores[] = [];
const gates: Gate[] = [];
function gateOn(row: "memory" | "sqlite", sdk: string): Gate {
  const ledger = row === "memory" ? memoryLedger() : sqliteLedger(join(dir, `${sdk}.db`));
  const gate = createGate({
    tools: [defineTool({ name: "charge_card", description: "Charge the card", effect: "write", input: schema, execute: (input, ctx) => chargeOnce(input.amount, ctx.idempotencyKey) })],
    ledger, onAlert: () => {},
  });
  ledgers.push(ledger);
  gates.push(gate);
  return gate;
}

function aiSdk(): Sdk {
  const usage = { inputTokens: { total: 1, noCache: 1, cacheRead: undefined, cacheWrite: undefined }, outputTokens: { total: 1, text: 1, reasoning: undefined } };
  // A fresh mock per turn: MockLanguageModelV3 keeps every call it gets.
  const model = () => new MockLanguageModelV3({
    doGenerate: async ({ prompt }) => prompt.at(-1)?.role === "tool"
      ? { content: [{ type: "text", text: "charged" }], finishReason: { unified: "stop", raw: undefined }, usage, warnings: [] }
      : { content: [{ type: "tool-call", toolCallId: newCallId("ai"), toolName: "charge_card", input: JSON.stringify({ amount: 30 }) }], finishReason: { unified: "tool-calls", raw: undefined }, usage, warnings: [] },
  });
  const turn = (tools: ToolSet): Turn => () => generateText({ model: model(), tools, messages: [{ role: "user", content: "charge me 30" }], stopWhen: stepCountIs(3) });
  const bare = aiToolOf({ inputSchema: schema, execute: (input, { toolCallId }) => chargeOnce(input.amount, toolCallId) });
  return {
    name: "Vercel AI SDK (ai 6, MockLanguageModelV3)",
    turns: {
      bare: turn({ charge_card: bare }),
      memory: turn(aiSdkTools(gateOn("memory", "ai"), { scope: () => scope })),
      sqlite: turn(aiSdkTools(gateOn("sqlite", "ai"), { scope: () => scope })),
    },
  };
}

async function anthropic(): Promise<Sdk> {
  const api = await startFakeMessagesApi((request) => {
    const last = request.messages.at(-1);
    const answered = Array.isArray(last?.content) && last.content.some((b: { type?: string }) => b.type === "tool_result");
    return answered ? [textBlock("charged")] : [toolUse(newCallId("toolu"), "charge_card", { amount: 30 })];
  });
  const client = new Anthropic({ apiKey: "bench", baseURL: api.url, maxRetries: 0 });
  type Tools = Parameters<Anthropic["beta"]["messages"]["toolRunner"]>[0]["tools"];
  const turn = (tools: Tools): Turn => () =>
    client.beta.messages.toolRunner({ model: "claude-test", max_tokens: 100, messages: [{ role: "user", content: "charge me 30" }], tools }).runUntilDone();
  const bare = betaZodTool({ name: "charge_card", description: "Charge the card", inputSchema: schema, run: (input, context) => JSON.stringify(chargeOnce(input.amount, context!.toolUse.id)) });
  return {
    name: "Anthropic SDK tool runner (1.15, fake Messages API on 127.0.0.1)",
    turns: {
      bare: turn([bare]),
      memory: turn(anthropicTools(gateOn("memory", "anthropic"), { scope: () => scope })),
      sqlite: turn(anthropicTools(gateOn("sqlite", "anthropic"), { scope: () => scope })),
    },
    // The requests it kept are dropped with it.
    close: () => api.close(),
  };
}

function openaiAgents(): Sdk {
  // Asks for a charge until the request holds a function_call_result, then answers.
  const model: Model = {
    async getResponse(request: ModelRequest) {
      const items = Array.isArray(request.input) ? request.input : [];
      if (items.some((i) => i.type === "function_call_result")) {
        return { usage: new Usage(), output: [{ type: "message", id: "msg_1", role: "assistant", status: "completed", content: [{ type: "output_text", text: "charged" }] }] };
      }
      const callId = newCallId("call");
      return { usage: new Usage(), output: [{ type: "function_call", id: `fc_${callId}`, callId, name: "charge_card", status: "completed", arguments: JSON.stringify({ amount: 30 }) }] };
    },
    async *getStreamedResponse() {
      throw new Error("the bench model does not stream");
    },
  };
  const agentWith = (tools: Agent["tools"]) => new Agent({ name: "bench", model, tools });
  const turn = (agent: Agent): Turn => () => run(agent, "charge me 30");
  const bare = agentsToolOf({ name: "charge_card", description: "Charge the card", parameters: schema, execute: (input, _rc, details) => chargeOnce(input.amount, String(details?.toolCall?.callId)) });
  const gated = (row: "memory" | "sqlite") => {
    const gate = gateOn(row, "agents");
    return agentsTool(gate, gate.tools.get("charge_card")!, { scope: () => scope });
  };
  return {
    name: "OpenAI Agents SDK (0.14, a fake Model)",
    turns: { bare: turn(agentWith([bare])), memory: turn(agentWith([gated("memory")])), sqlite: turn(agentWith([gated("sqlite")])) },
  };
}

function langchain(): Sdk {
  // createAgent's fakeModel answers from a queue: each turn gets a fresh one, a factory per step.
  const step = (messages: BaseMessage[]) => messages.at(-1)?.getType() === "tool"
    ? new AIMessage("charged")
    : new AIMessage({ content: "", tool_calls: [{ id: newCallId("lc"), name: "charge_card", args: { amount: 30 }, type: "tool_call" }] });
  type Tools = NonNullable<Parameters<typeof createAgent>[0]["tools"]>;
  const turn = (tools: Tools): Turn => () =>
    createAgent({ model: fakeModel().respond(step).respond(step), tools }).invoke({ messages: [{ role: "user", content: "charge me 30" }] });
  const bare = langchainToolOf(async (input: { amount: number }, config) => JSON.stringify(chargeOnce(input.amount, String(config.toolCall?.id))),
    { name: "charge_card", description: "Charge the card", schema });
  const gated = (row: "memory" | "sqlite") => {
    const gate = gateOn(row, "langchain");
    return langchainTool(gate, gate.tools.get("charge_card")!, { scope: () => scope });
  };
  return { name: "LangChain createAgent (langchain 1.5, fakeModel)", turns: { bare: turn([bare]), memory: turn([gated("memory")]), sqlite: turn([gated("sqlite")]) } };
}

/** No SDK: the gate's own call (what every adapter's tool calls), against calling the effect directly. */
function gateAlone(): Sdk {
  const call = (gate: Gate): Turn => () => gate.runTool({ id: newCallId("toolu"), name: "charge_card", input: { amount: 30 } }, scope);
  return {
    name: "no SDK: gate.runTool, the call every adapter makes",
    turns: { bare: async () => chargeOnce(30, newCallId("direct")), memory: call(gateOn("memory", "alone")), sqlite: call(gateOn("sqlite", "alone")) },
    labels: { bare: "the effect, called directly", memory: "gate.runTool, memory ledger", sqlite: "gate.runTool, sqlite ledger" },
  };
}

const sdks: Sdk[] = [aiSdk(), await anthropic(), openaiAgents(), langchain(), gateAlone()];
const rows: Row[] = ["bare", "memory", "sqlite"];
const samples = new Map<string, number[]>();
const loadAtStart = os.loadavg();
process.stderr.write(`${sdks.length} SDKs x ${rows.length} rows, ${ROUNDS} rounds of ${CALLS} turns (after ${WARM} warm-up turns each)\n`);
// Every SDK's code is compiled by the JIT before anything is measured.
for (const sdk of sdks) for (const row of rows) for (let i = 0; i < WARM; i++) await sdk.turns[row]();
for (let r = 0; r < ROUNDS; r++) {
  for (const sdk of sdks) {
    // The rows' order turns with the round, so none always runs first.
    for (const row of [...rows.slice(r % rows.length), ...rows.slice(0, r % rows.length)]) {
      const turn = sdk.turns[row];
      for (let i = 0; i < WARM; i++) await turn();
      collectGarbage();
      const out = samples.get(`${sdk.name}/${row}`) ?? [];
      for (let i = 0; i < CALLS; i++) {
        const start = process.hrtime.bigint();
        await turn();
        out.push(usSince(start));
      }
      samples.set(`${sdk.name}/${row}`, out);
    }
  }
  process.stderr.write(`round ${r + 1}/${ROUNDS} done\n`);
}
const loadAtEnd = os.loadavg();

const fmtLoad = (l: number[]) => l.map((x) => x.toFixed(1)).join(" / ");
console.log(`node ${process.version}, ${os.cpus().length} CPUs (${os.cpus()[0]?.model ?? "?"}), load average (1/5/15 min) ${fmtLoad(loadAtStart)} at the start, ${fmtLoad(loadAtEnd)} at the end`);
console.log(`${ROUNDS} rounds x ${CALLS} turns per row, interleaved; one turn = model asks, SDK runs charge_card, model answers; SQLite durability "fsync" in ${dir}\n`);
for (const sdk of sdks) {
  const summary = Object.fromEntries(rows.map((row) => [row, summarize(Float64Array.from(samples.get(`${sdk.name}/${row}`) ?? []))])) as Record<Row, ReturnType<typeof summarize>>;
  const bare = summary.bare.median;
  console.log(sdk.name);
  console.log(table(["row", "p50 per call", "p99", "p50 overhead", "p50 ratio"], rows.map((row) => [
    sdk.labels?.[row] ?? (row === "bare" ? "bare SDK tool" : `adapter, ${row} ledger`),
    fmtUs(summary[row].median), fmtUs(summary[row].p99),
    row === "bare" ? "-" : fmtUs(summary[row].median - bare),
    // Against an in-process function call a ratio says nothing.
    sdk.labels ? "-" : row === "bare" ? "1.00x" : `${(summary[row].median / bare).toFixed(2)}x`,
  ])));
  console.log("");
}
// Every turn must have run the tool once (bare) or made one gated charge: a turn answered with an error measured nothing.
const expected = sdks.length * rows.length * (ROUNDS + 1) * WARM + sdks.length * rows.length * ROUNDS * CALLS;
if (charged !== expected) throw new Error(`${charged} charges for ${expected} turns: some turns did not run the tool once`);

for (const sdk of sdks) await sdk.close?.();
for (const gate of gates) await gate.close();
for (const ledger of ledgers) await ledger.close();
rmSync(dir, { recursive: true, force: true });
