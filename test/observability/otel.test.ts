/**
 * effectgate/otel with the real OpenTelemetry SDK (sdk-trace-base 2.x, InMemorySpanExporter, the
 * async-hooks context manager): one `execute_tool {tool}` span per call with the GenAI and
 * effectgate attributes; a caller's execute_tool span is enriched, not doubled; never an input.
 */
import Anthropic from "@anthropic-ai/sdk";
import { context, trace } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from "@opentelemetry/sdk-trace-base";
import { z } from "zod";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { EffectgateError } from "../../src/core/errors.js";
import { defineTool } from "../../src/core/tool.js";
import { keyDigest, otelObserver } from "../../src/otel.js";
import { anthropicTools } from "../../src/anthropic.js";
import { startFakeMessagesApi, textBlock, toolUse } from "../adapters/fake-messages-api.js";
import { createGate } from "../../src/root/create-gate.js";
import { memoryLedger } from "../../src/stores/memory/index.js";
import { deleteAccountTool, effects, use } from "../governance/support.js";
import { durableScenarioLedger, runScenario, scope, SECRET } from "./scenario.js";
import { join } from "node:path";
import { sqliteLedger } from "../../src/stores/sqlite/index.js";
import { tempDir } from "../support/tmp.js";

const exporter = new InMemorySpanExporter();
const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
const tracer = provider.getTracer("test");

beforeAll(() => {
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
});
afterAll(async () => {
  context.disable();
  await provider.shutdown();
});
beforeEach(() => exporter.reset());

const byCallId = (spans: readonly ReadableSpan[], id: string) => spans.filter((s) => s.attributes["gen_ai.tool.call.id"] === id);

describe("effectgate/otel", () => {
  it("one execute_tool span per call with the GenAI attributes, effectgate's outcome, state, approval and key digest; errors marked", async () => {
    await runScenario([otelObserver({ tracer })]);
    const spans = exporter.getFinishedSpans();
    expect(spans).toHaveLength(7);
    const [first, second] = byCallId(spans, "toolu_mail");
    expect(first?.name).toBe("execute_tool send_email");
    expect(first?.attributes).toEqual({
      "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "send_email", "gen_ai.tool.call.id": "toolu_mail", "gen_ai.tool.type": "function",
      "effectgate.effect_class": "write", "effectgate.outcome": "executed", "effectgate.state": "completed", "effectgate.key_digest": keyDigest("acme", "toolu_mail"),
    });
    expect(second?.attributes["effectgate.outcome"]).toBe("replayed");
    const waiting = byCallId(spans, "toolu_del")[0]!;
    expect(waiting.attributes).toMatchObject({ "effectgate.outcome": "waiting", "error.type": "EG_AWAITING_APPROVAL", "effectgate.effect_class": "destructive" });
    expect(waiting.attributes["effectgate.approval_id"]).toMatch(/^apr_[0-9a-f]{24}$/);
    expect(waiting.status.code).toBe(0); // waiting is not an error
    const failed = byCallId(spans, "toolu_flaky")[0]!;
    expect(failed.attributes).toMatchObject({ "effectgate.outcome": "executed", "effectgate.state": "failed", "error.type": "EG_TOOL_FAILED" });
    expect(failed.status.code).toBe(2);
    expect(byCallId(spans, "toolu_charge")[0]!.attributes).toMatchObject({ "effectgate.outcome": "probed", "effectgate.state": "completed", "effectgate.probe_outcomes": ["done"] });
    expect(byCallId(spans, "toolu_mail2")[0]!.attributes).toMatchObject({ "effectgate.outcome": "refused", "error.type": "EG_KILL_SWITCH" });
    expect(byCallId(spans, "toolu_bad")[0]!.attributes).toMatchObject({ "effectgate.outcome": "refused", "error.type": "EG_INVALID_INPUT" });
    // Never an input or a raw key in any attribute.
    const values = JSON.stringify(spans.map((s) => s.attributes));
    expect(values).not.toContain(SECRET);
    expect(values).not.toContain("acc_1");
  });

  it("on a SQLite ledger, the same spans: one per call, each with the outcome the call came to", async () => {
    const ledger = sqliteLedger(join(tempDir(), "ledger.db"));
    try {
      await runScenario([otelObserver({ tracer })], {}, durableScenarioLedger(ledger));
    } finally {
      await ledger.close();
    }
    const outcomes = exporter.getFinishedSpans().map((s) => `${String(s.attributes["gen_ai.tool.call.id"])} ${String(s.attributes["effectgate.outcome"])} ${String(s.attributes["effectgate.state"] ?? "-")}`);
    expect(outcomes).toEqual([
      "toolu_mail executed completed", "toolu_mail replayed completed", "toolu_bad refused -", "toolu_del waiting -",
      "toolu_flaky executed failed", "toolu_charge probed completed", "toolu_mail2 refused -",
    ]);
  });

  it("enriches the caller's own execute_tool span for the same tool instead of adding a second; another active span becomes the parent", async () => {
    const ledger = memoryLedger();
    let downstreamParent: string | undefined;
    const tool = defineTool({
      name: "send_email", effect: "write", input: z.object({ to: z.string() }),
      async execute(input) {
        // The tool's own span (an HTTP call downstream, say) is a child of the call's span.
        const span = tracer.startSpan("POST /messages");
        downstreamParent = (span as unknown as ReadableSpan).parentSpanContext?.spanId;
        span.end();
        return { sent: input.to };
      },
    });
    const gate = createGate({ tools: [tool], ledger, observers: [otelObserver({ tracer })], onAlert: () => {} });
    await tracer.startActiveSpan("execute_tool send_email", async (sdkSpan) => {
      await gate.runToolUses([use("toolu_1", "send_email", { to: "a" })], scope);
      sdkSpan.end();
    });
    let turnId = "";
    await tracer.startActiveSpan("agent turn", async (turn) => {
      turnId = turn.spanContext().spanId;
      await gate.runToolUses([use("toolu_2", "send_email", { to: "b" })], scope);
      turn.end();
    });
    await gate.close();
    const spans = exporter.getFinishedSpans();
    const first = spans.filter((s) => s.name === "execute_tool send_email" && s.attributes["gen_ai.tool.call.id"] === "toolu_1");
    expect(first).toHaveLength(1);
    expect(first[0]!.attributes).toMatchObject({ "gen_ai.tool.name": "send_email", "effectgate.outcome": "executed" });
    expect(spans.filter((s) => s.name === "execute_tool send_email")).toHaveLength(2);
    const second = spans.find((s) => s.attributes["gen_ai.tool.call.id"] === "toolu_2")!;
    expect(second.parentSpanContext?.spanId).toBe(turnId);
    expect(downstreamParent).toBe(second.spanContext().spanId);
    expect(trace.getActiveSpan()).toBeUndefined();
  });

  it("under the real Anthropic SDK tool runner, its own tool span (anthropic.custom_tool_use, gen_ai execute_tool) is enriched, not doubled", async () => {
    const fake = await startFakeMessagesApi([[toolUse("tu_1", "send_email", { to: "a" })], [textBlock("sent")]]);
    const tool = defineTool({ name: "send_email", effect: "write", input: z.object({ to: z.string() }), execute: (input) => ({ sent: input.to }) });
    const gate = createGate({ tools: [tool], ledger: memoryLedger(), observers: [otelObserver({ tracer })], onAlert: () => {} });
    const client = new Anthropic({ apiKey: "test-key", baseURL: fake.url, maxRetries: 0, openTelemetry: { tracerProvider: provider, traces: { enabled: true } } });
    try {
      await client.beta.messages.toolRunner({
        model: "claude-test", max_tokens: 100, messages: [{ role: "user", content: "mail a" }], tools: anthropicTools(gate, { scope: () => scope }),
      });
    } finally {
      await gate.close();
      await fake.close();
    }
    const toolSpans = exporter.getFinishedSpans().filter((s) => s.attributes["gen_ai.operation.name"] === "execute_tool");
    expect(toolSpans.map((s) => s.name)).toEqual(["anthropic.custom_tool_use send_email"]);
    expect(toolSpans[0]!.attributes).toMatchObject({
      "gen_ai.tool.name": "send_email", "gen_ai.tool.call.id": "tu_1", "effectgate.effect_class": "write", "effectgate.outcome": "executed", "effectgate.state": "completed",
    });
  });

  it("the approval id is what governance filed, decided and consumed, not a string found in the answer", async () => {
    const ledger = memoryLedger();
    const fx = effects();
    // A tool that relays another system's refusal verbatim: its failure reads like an approval answer and names an id.
    const relay = defineTool({
      name: "relay_request", effect: "write", input: z.object({}),
      async execute() {
        fx.log.push("relay_request:-");
        throw new EffectgateError("EG_APPROVAL_DENIED", "the upstream agent's call was denied (approval apr_0123456789abcdef01234567)");
      },
    });
    const gate = createGate({ tools: [deleteAccountTool(fx), relay], ledger, observers: [otelObserver({ tracer })], onAlert: () => {} });
    const [asked] = await gate.runToolUses([use("toolu_del", "delete_account", { account: "acc_1" })], scope);
    const filed = (await ledger.governance!.listApprovals({ state: "pending" }))[0]!;
    expect(asked!.content).toMatch(/^EG_AWAITING_APPROVAL/);
    await ledger.governance!.moveApproval(filed.id, "pending", { to: "approved", by: "alice" }, Date.now());
    const [ran] = await gate.runToolUses([use("toolu_del", "delete_account", { account: "acc_1" })], scope);
    const [relayed] = await gate.runToolUses([use("toolu_relay", "relay_request", {})], scope);
    await gate.close();

    const spans = exporter.getFinishedSpans();
    const [waiting, executed] = byCallId(spans, "toolu_del");
    expect(waiting!.attributes).toMatchObject({ "effectgate.outcome": "waiting", "effectgate.approval_id": filed.id });
    // It ran under the approval it consumed; its answer is the tool's result, which names no approval.
    expect(ran).toMatchObject({ is_error: false, content: '{"deleted":"acc_1"}' });
    expect(executed!.attributes).toMatchObject({ "effectgate.outcome": "executed", "effectgate.state": "completed", "effectgate.approval_id": filed.id });
    expect((await ledger.governance!.getApproval(filed.id))?.state).toBe("consumed");
    // The relayed refusal starts with an approval code and names an apr_ id, but no approval of this gate was involved.
    expect(relayed!.content).toMatch(/^EG_APPROVAL_DENIED: .*apr_0123456789abcdef01234567/);
    const relaySpan = byCallId(spans, "toolu_relay")[0]!;
    expect(relaySpan.attributes).toMatchObject({ "effectgate.outcome": "executed", "error.type": "EG_APPROVAL_DENIED" });
    expect(relaySpan.attributes["effectgate.approval_id"]).toBeUndefined();
    expect(fx.log).toEqual(["delete_account:toolu_del", "relay_request:-"]);
  });
});
