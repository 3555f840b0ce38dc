/**
 * effectgate/otel: OpenTelemetry spans for a gate (needs `@opentelemetry/api` ^1.3 and an SDK).
 *
 *   import { createGate } from "effectgate";
 *   import { otelObserver } from "effectgate/otel";
 *   const gate = createGate({ tools, observers: [otelObserver()] });   // spans `execute_tool {tool}`
 */
export {
  otelObserver, keyDigest, type OtelOptions,
  GEN_AI_OPERATION_NAME, GEN_AI_TOOL_NAME, GEN_AI_TOOL_CALL_ID, GEN_AI_TOOL_TYPE, ERROR_TYPE,
} from "./observability/otel.js";
