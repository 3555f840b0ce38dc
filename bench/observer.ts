/**
 * What the observers cost per gated call: the same write call on a memory ledger (so the store's
 * cost does not hide the observer's) with no observer, with effectgate/prometheus (real
 * prom-client), with effectgate/otel (real OTel SDK, spans exported to a sink that drops them),
 * and with both. Configurations are interleaved round by round so drift hits all alike.
 *
 *   npm run bench:observe      (or, after a build: npx tsc -p tsconfig.bench.json && node dist-bench/bench/observer.js [--calls 4000] [--rounds 7])
 */
import { performance } from "node:perf_hooks";
import { BasicTracerProvider, SimpleSpanProcessor, type SpanExporter } from "@opentelemetry/sdk-trace-base";
import { z } from "zod";
import { defineTool } from "../src/core/tool.js";
import type { GateObserver } from "../src/gate/observe.js";
import { otelObserver } from "../src/otel.js";
import { prometheusObserver } from "../src/prometheus.js";
import { createGate } from "../src/root/create-gate.js";
import { memoryLedger } from "../src/stores/memory/index.js";

const arg = (name: string, fallback: string) => {
  const i = process.argv.indexOf(`--${name}`);
  return Number(i >= 0 ? (process.argv[i + 1] ?? fallback) : fallback);
};
const CALLS = arg("calls", "4000");
const ROUNDS = arg("rounds", "7");

const tool = defineTool({
  name: "open_ticket", effect: "write", input: z.object({ customer: z.string(), title: z.string() }),
  execute: (input, ctx) => ({ id: `T-${ctx.idempotencyKey}`, customer: input.customer }),
});
const sink: SpanExporter = { export: (_spans, done) => done({ code: 0 }), shutdown: async () => {} };
const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(sink)] });

const configs: Record<string, () => GateObserver[]> = {
  none: () => [],
  prometheus: () => [prometheusObserver()],
  otel: () => [otelObserver({ tracer: provider.getTracer("bench") })],
  both: () => [prometheusObserver(), otelObserver({ tracer: provider.getTracer("bench") })],
};

/** Microseconds per call, for CALLS sequential calls on a fresh gate. */
async function round(observers: GateObserver[], tag: string): Promise<number> {
  const gate = createGate({ tools: [tool], ledger: memoryLedger(), observers, onAlert: () => {} });
  const scope = { tenant: "acme", task: "bench" };
  for (let i = 0; i < 200; i++) await gate.runToolUses([{ type: "tool_use", id: `w${tag}${i}`, name: "open_ticket", input: { customer: "c", title: "warm" } }], scope);
  const start = performance.now();
  for (let i = 0; i < CALLS; i++) {
    await gate.runToolUses([{ type: "tool_use", id: `toolu_${tag}_${i}`, name: "open_ticket", input: { customer: `cus_${i % 97}`, title: "Order arrived damaged" } }], scope);
  }
  const us = ((performance.now() - start) * 1000) / CALLS;
  await gate.close();
  return us;
}

const results: Record<string, number[]> = Object.fromEntries(Object.keys(configs).map((k) => [k, []]));
for (let r = 0; r < ROUNDS; r++) {
  for (const [name, make] of Object.entries(configs)) results[name]!.push(await round(make(), `${r}${name}`));
}
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? Number.NaN;
const base = median(results.none!);
console.log(`node ${process.version}, ${CALLS} sequential write calls per round, ${ROUNDS} rounds, memory ledger; medians of the rounds`);
console.log("observers    µs/call   overhead µs/call");
for (const name of Object.keys(configs)) {
  const m = median(results[name]!);
  console.log(`${name.padEnd(12)} ${m.toFixed(1).padStart(7)}   ${name === "none" ? "-" : (m - base).toFixed(1).padStart(6)}`);
}
await provider.shutdown();
