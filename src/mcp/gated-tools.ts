/**
 * Each upstream tool, as a tool of the gate: its class from annotations (or the config), its
 * input checked against its own JSON Schema before anything is sent, and an execute that calls
 * the upstream with the idempotency key and fence in `_meta` (for servers that honour them).
 */
import { createHash } from "node:crypto";
import { AjvJsonSchemaValidator } from "@modelcontextprotocol/sdk/validation/ajv";
import type { Tool as McpTool } from "@modelcontextprotocol/sdk/types.js";
import { messageOf } from "../core/errors.js";
import type { StandardSchemaV1 } from "../core/standard-schema.js";
import { defineTool, type AnyTool, type ToolContext } from "../core/tool.js";
import { classifyTool, type ToolClass } from "./classify.js";
import type { McpConfig } from "./config.js";
import { probeAnswer, probeArguments } from "./probe-map.js";
import type { Upstream } from "./upstream.js";

/** The `_meta` fields the key and the fence go upstream in. */
export const META_KEY = "io.effectgate/idempotency-key";
export const META_FENCE = "io.effectgate/fence";

/** One upstream tool as the gateway serves it. */
export interface GatedTool {
  /** The upstream's definition, shown to the host as it is. */
  readonly definition: McpTool;
  /** The gate's name for it (an MCP name the gate does not accept is mapped to one it does). */
  readonly gateName: string;
  readonly class: ToolClass;
  readonly tool: AnyTool;
}

/** What the execute of a call may add to the upstream request: the host's own `_meta`, minus what only the host side uses. */
export interface CallContextSource {
  hostMeta(): Record<string, unknown> | undefined;
}

const GATE_NAME = /^[a-zA-Z0-9_-]{1,64}$/;
/** How long past the gate's own timeout the SDK waits, so the gate's timeout (an unknown outcome) always fires first. */
const SDK_TIMEOUT_MARGIN_MS = 5_000;

export function gateNameOf(name: string): string {
  if (GATE_NAME.test(name)) return name;
  const hash = createHash("sha256").update(name).digest("hex").slice(0, 8);
  return `${name.replace(/[^a-zA-Z0-9_-]/g, "_").slice(0, 55)}_${hash}`;
}

/**
 * `upstreamId` is each tool's namespace: part of every call's fingerprint and intent, so a call of
 * one upstream is never taken for another upstream's call of a tool with the same name and arguments
 * (a key mismatch instead of its answer; no repeat window across upstreams).
 */
export function gatedTools(definitions: readonly McpTool[], config: McpConfig, upstream: Upstream, context: CallContextSource, upstreamId: string): GatedTool[] {
  const validators = new AjvJsonSchemaValidator();
  const gateTimeoutMs = config.timeoutMs ?? 30_000;
  return definitions.map((definition) => {
    const own = config.tools?.[definition.name];
    const cls = classifyTool(definition.annotations, own);
    const timeoutMs = own?.timeoutMs ?? gateTimeoutMs;
    const name = definition.name;
    const send = (args: Record<string, unknown>, ctx: ToolContext, tool: string) =>
      upstream.call({
        name: tool, arguments: args, signal: ctx.signal, timeoutMs: timeoutMs + SDK_TIMEOUT_MARGIN_MS,
        meta: { ...context.hostMeta(), [META_KEY]: ctx.idempotencyKey, [META_FENCE]: ctx.fence },
      });
    const probe = own?.probe;
    const tool = defineTool({
      name: gateNameOf(name),
      namespace: upstreamId,
      ...(definition.description === undefined ? {} : { description: definition.description }),
      effect: cls.effect,
      input: jsonSchemaInput(validators, definition),
      timeoutMs,
      downstreamIdempotent: cls.idempotent,
      ...(own?.settleMs === undefined ? {} : { settleMs: own.settleMs }),
      // Keys are chosen by the gateway (keys.ts) and arrive as the tool_use id.
      key: "tool_use_id",
      execute: (args: Record<string, unknown>, ctx: ToolContext) => send(args, ctx, name),
      ...(probe === undefined ? {} : {
        probe: async (args: Record<string, unknown>, ctx: ToolContext) =>
          probeAnswer(probe, await send(probeArguments(probe, { key: ctx.idempotencyKey, fence: ctx.fence, arguments: args }), ctx, probe.tool)),
      }),
      ...(cls.effect === "destructive" ? {
        // What the approver sees: the upstream cannot preview its own effect, so the preview is the call itself.
        dryRun: (args: Record<string, unknown>) => ({
          effect: "would_call", would_affect: { tool: name, arguments: JSON.parse(JSON.stringify(args)) as Record<string, never> }, reversible: false,
        }),
      } : {}),
    });
    return { definition, gateName: tool.name, class: cls, tool: tool as unknown as AnyTool };
  });
}

/** The tool's own inputSchema as a Standard Schema; a schema that does not compile refuses every call rather than passing anything through. */
function jsonSchemaInput(validators: AjvJsonSchemaValidator, definition: McpTool): StandardSchemaV1<Record<string, unknown>> {
  let check: (input: unknown) => { valid: boolean; errorMessage?: string | undefined };
  try {
    check = validators.getValidator(definition.inputSchema as Parameters<AjvJsonSchemaValidator["getValidator"]>[0]);
  } catch (err) {
    const why = `the upstream's inputSchema for ${definition.name} cannot be used (${messageOf(err)}), so no call of it is sent`;
    check = () => ({ valid: false, errorMessage: why });
  }
  return {
    "~standard": {
      version: 1,
      vendor: "effectgate-mcp",
      validate(value: unknown) {
        const result = check(value);
        return result.valid ? { value: value as Record<string, unknown> } : { issues: [{ message: result.errorMessage ?? "does not match the tool's inputSchema" }] };
      },
    },
  };
}
