/**
 * OpenTelemetry spans from the gate's observer interface, with @opentelemetry/api (an optional
 * peer: only this module imports it). One span per gated call, named `execute_tool {tool}` as the
 * GenAI semantic conventions name tool execution, with their attributes and effectgate's own.
 * When the caller already opened an `execute_tool` span for this tool (the Anthropic SDK's tool
 * runner does), that span is enriched instead of a second one being made. Inputs and results are
 * never recorded; the key only as a digest.
 */
import { createHash } from "node:crypto";
import { context, SpanKind, SpanStatusCode, trace, type Attributes, type Span, type Tracer } from "@opentelemetry/api";
import type { GateObserver, ObservedCall, ObservedOutcome } from "../gate/observe.js";

// The few GenAI attribute names used, copied rather than imported from the incubating semantic-conventions entry.
export const GEN_AI_OPERATION_NAME = "gen_ai.operation.name";
export const GEN_AI_TOOL_NAME = "gen_ai.tool.name";
export const GEN_AI_TOOL_CALL_ID = "gen_ai.tool.call.id";
export const GEN_AI_TOOL_TYPE = "gen_ai.tool.type";
export const ERROR_TYPE = "error.type";
const OPERATION = "execute_tool";

export interface OtelOptions {
  /** The tracer to start spans with (default: `trace.getTracer("effectgate")` from the global provider). */
  readonly tracer?: Tracer;
  /**
   * Whether to enrich a caller's active `execute_tool` span for the same tool instead of starting
   * a child span (default true). A span's name is readable on SDK spans; another span is never touched.
   */
  readonly enrichActive?: boolean;
}

/**
 * The caller's active span, when it is the tool-execution span of this very call: named
 * `execute_tool {tool}` as the GenAI conventions name it, or saying so in its attributes
 * (`gen_ai.operation.name` execute_tool for this tool, and this call id if it names one): the
 * Anthropic SDK's tool runner names its span `anthropic.custom_tool_use {tool}`. SDK spans expose
 * `name` and `attributes`; a span that does not is never taken for one.
 */
function activeToolSpan(call: ObservedCall): Span | undefined {
  const span = trace.getActiveSpan();
  if (!span?.isRecording()) return undefined;
  const { name, attributes } = span as { name?: unknown; attributes?: Readonly<Record<string, unknown>> };
  if (name === `${OPERATION} ${call.tool}`) return span;
  if (attributes?.[GEN_AI_OPERATION_NAME] !== OPERATION || attributes[GEN_AI_TOOL_NAME] !== call.tool) return undefined;
  const id = attributes[GEN_AI_TOOL_CALL_ID];
  return id === undefined || id === call.toolUseId ? span : undefined;
}

function startAttributes(call: ObservedCall): Attributes {
  return {
    [GEN_AI_OPERATION_NAME]: OPERATION,
    [GEN_AI_TOOL_NAME]: call.tool,
    [GEN_AI_TOOL_CALL_ID]: call.toolUseId,
    [GEN_AI_TOOL_TYPE]: "function",
    ...(call.effect === undefined ? {} : { "effectgate.effect_class": call.effect }),
  };
}

/** A short digest of tenant + key: joins spans of one call across replays and workers without showing the key. */
export function keyDigest(tenant: string, key: string): string {
  return createHash("sha256").update(JSON.stringify([tenant, key])).digest("hex").slice(0, 16);
}

function endAttributes(call: ObservedCall, outcome: ObservedOutcome): Attributes {
  return {
    "effectgate.outcome": outcome.outcome,
    ...(outcome.state === undefined ? {} : { "effectgate.state": outcome.state }),
    ...(outcome.approvalId === undefined ? {} : { "effectgate.approval_id": outcome.approvalId }),
    ...(outcome.key === undefined ? {} : { "effectgate.key_digest": keyDigest(call.tenant, outcome.key) }),
    ...(outcome.probes.length === 0 ? {} : { "effectgate.probe_outcomes": [...outcome.probes] }),
    ...(outcome.errorType === undefined ? {} : { [ERROR_TYPE]: outcome.errorType }),
  };
}

export function otelObserver(options: OtelOptions = {}): GateObserver {
  const tracer = options.tracer ?? trace.getTracer("effectgate");
  return {
    callStarted(call) {
      const existing = options.enrichActive === false ? undefined : activeToolSpan(call);
      const span = existing ?? tracer.startSpan(`${OPERATION} ${call.tool}`, { kind: SpanKind.INTERNAL, attributes: startAttributes(call) }, context.active());
      if (existing) existing.setAttributes(startAttributes(call));
      const spanContext = trace.setSpan(context.active(), span);
      return {
        // The tool runs inside the span, so its own spans (an HTTP call downstream) are its children.
        within: (work) => context.with(spanContext, work),
        end(outcome) {
          span.setAttributes(endAttributes(call, outcome));
          if (outcome.isError && outcome.outcome !== "waiting") span.setStatus({ code: SpanStatusCode.ERROR, message: outcome.errorType ?? "error" });
          if (!existing) span.end(); // an enriched span is its owner's to end
        },
      };
    },
  };
}
