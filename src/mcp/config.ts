/**
 * `effectgate.mcp.json`: how the gateway treats an upstream MCP server's tools. An untrusted
 * server's annotations are only hints, so every class, key rule and probe can be set here per
 * tool. Validated whole when the gateway starts: a mistake is refused by field, never guessed.
 */
import { readFileSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { z } from "zod";
import { EffectgateError, messageOf } from "../core/errors.js";

/** The `_meta` fields hosts put a tool-use id in, looked at in this order (configurable: `keys.meta`). */
export const DEFAULT_META_KEYS = [
  "io.effectgate/idempotency-key", "io.effectgate/tool-use-id", "claudecode/toolUseId", "toolUseId", "tool_use_id", "toolCallId", "tool_call_id",
] as const;

/** Two identical calls without a tool-use id within this long are one call (`keys.dedupeWindowMs`). */
export const DEFAULT_DEDUPE_WINDOW_MS = 10 * 60_000;

const name = z.string({ error: "must be a string" }).min(1, { error: "must not be empty" });
const millis = z.number({ error: "must be a number of milliseconds" }).finite().nonnegative({ error: "must be 0 or more" });
const positiveMillis = z.number({ error: "must be a number of milliseconds" }).finite().positive({ error: "must be greater than 0" });
const dotPath = z.string({ error: "must be a dot path such as \"structuredContent.status\" or \"content.0.text\"" }).min(1);

const probe = z.strictObject({
  /** The upstream tool asked "did this call happen?", e.g. find_ticket_by_key. */
  tool: name,
  /** Its arguments: "${key}", "${fence}" and "${arguments.<path>}" are replaced; anything else is sent as written. */
  arguments: z.record(z.string(), z.unknown()).optional(),
  /** Where in the probe's result its answer is (default structuredContent.status). */
  status: dotPath.optional(),
  /** The values at `status` that mean each answer (compared as JSON). Anything else is an error of the probe. */
  done: z.array(z.unknown()).min(1, { error: "must list at least one value" }),
  absent: z.array(z.unknown()).min(1, { error: "must list at least one value" }),
  running: z.array(z.unknown()).optional(),
});

const toolConfig = z.strictObject({
  effect: z.enum(["read", "write", "destructive"], { error: "must be one of read, write, destructive" }).optional(),
  /** The upstream applies a repeated idempotency key once (overrides `idempotentHint`). */
  idempotent: z.boolean({ error: "must be true or false" }).optional(),
  settleMs: millis.optional(),
  timeoutMs: positiveMillis.optional(),
  /** "derived": ignore any tool-use id and key this tool's calls by their arguments. */
  key: z.enum(["auto", "derived"], { error: "must be \"auto\" or \"derived\"" }).optional(),
  probe: probe.optional(),
});

const upstream = z.union([
  z.strictObject({
    command: name,
    args: z.array(z.string()).optional(),
    env: z.record(z.string(), z.string()).optional(),
    cwd: z.string().optional(),
  }),
  z.strictObject({ url: z.url({ error: "must be an http(s) URL" }), headers: z.record(z.string(), z.string()).optional() }),
], { error: "must be { command, args? } or { url, headers? }" });

const bytes = z.number({ error: "must be a number of bytes" }).int({ error: "must be a whole number of bytes" }).positive({ error: "must be greater than 0" });

/** What the gateway writes to a stdio upstream (src/mcp/upstream-queue.ts, docs/mcp.md "Limits"). */
const upstreamLimits = z.strictObject({
  /** The largest message written to the upstream (default 10 MiB − 64 KiB): a larger call is refused, not sent. */
  maxMessageBytes: bytes.optional(),
  /** The most bytes waiting for the upstream to read (default 16 MiB): a call past it is refused, not sent. */
  maxQueuedBytes: bytes.optional(),
  /** An upstream that read nothing of a waiting write for this long (default 30 s) is closed and started again. */
  stallMs: positiveMillis.optional(),
});

const configSchema = z.strictObject({
  $schema: z.string().optional(),
  /** Ledger records are kept per tenant. */
  tenant: name.optional(),
  /** The task the gateway's calls belong to: stable across reconnects, so a host's repeat is recognised. */
  task: name.optional(),
  agent: name.optional(),
  session: name.optional(),
  /**
   * The upstream's identity in the ledger: part of every derived key and of each call's fingerprint
   * and intent, so gateways sharing a ledger in front of different servers never answer each other's
   * calls. Default: a hash of the upstream's command and arguments, or of its URL (defaultUpstreamId).
   */
  upstreamId: name.max(128, { error: "must be at most 128 characters (it is part of every derived key)" }).optional(),
  timeoutMs: positiveMillis.optional(),
  keys: z.strictObject({
    meta: z.array(name).optional(),
    dedupeWindowMs: millis.optional(),
  }).optional(),
  /** A governance policy (docs/governance.md), inline or the path of an effectgate.policy.json (relative to this file). */
  policy: z.union([z.string().min(1), z.record(z.string(), z.unknown())]).optional(),
  tools: z.record(z.string(), toolConfig).optional(),
  upstream: upstream.optional(),
  upstreamLimits: upstreamLimits.optional(),
});

export type ProbeConfig = z.infer<typeof probe>;
export type ToolConfig = z.infer<typeof toolConfig>;
export type UpstreamConfig = z.infer<typeof upstream>;
export type UpstreamLimitsConfig = z.infer<typeof upstreamLimits>;
export type McpConfig = z.infer<typeof configSchema>;

/** Checks a config object; `source` names it in errors. Relative policy paths resolve against `baseDir`. */
export function parseMcpConfig(value: unknown, source: string, baseDir = process.cwd()): McpConfig {
  const parsed = configSchema.safeParse(value);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((i) => `${i.path.length > 0 ? i.path.join(".") : "(top level)"}: ${i.message}`);
    throw new EffectgateError("EG_BAD_OPTION", `the MCP gateway config ${source} is not valid: ${problems.join("; ")}. Nothing was started.`);
  }
  const config = parsed.data;
  for (const [tool, spec] of Object.entries(config.tools ?? {})) {
    if (spec.effect === "read" && spec.probe) {
      throw new EffectgateError("EG_BAD_OPTION", `the MCP gateway config ${source}: tools.${tool} is a read tool and has a probe; reads are never probed (remove one)`);
    }
  }
  return typeof config.policy === "string" ? { ...config, policy: resolve(baseDir, config.policy) } : config;
}

export function loadMcpConfig(path: string): McpConfig {
  const file = resolve(path);
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (err) {
    const why = (err as NodeJS.ErrnoException).code === "ENOENT" ? "the file does not exist" : messageOf(err);
    throw new EffectgateError("EG_BAD_OPTION", `cannot read the MCP gateway config ${file}: ${why}. Nothing was started.`);
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw new EffectgateError("EG_BAD_OPTION", `the MCP gateway config ${file} is not valid JSON: ${messageOf(err)}. Nothing was started.`);
  }
  return parseMcpConfig(value, file, dirname(file));
}
