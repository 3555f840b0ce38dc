/**
 * The MCP gateway: an MCP server for the host whose tools are the upstream server's tools, each
 * call passed through the gate (ledger, probes, governance) before it reaches the upstream.
 *
 * When a tool can run twice (as for the library, src/root/create-gate.ts): only when its first
 * run's outcome was lost (the upstream crashed or hung mid-call, the gateway was killed) and the
 * configured probe then said "absent" after the settle horizon, or the upstream honours the key
 * (`idempotentHint` / config `idempotent`). A repeated tools/call (a host's retry, a reconnect, a
 * restarted gateway) is answered from the ledger. Without a probe, an unknown outcome goes to a
 * person; it is never re-sent blindly.
 *
 * This module knows the gate only by the small GateRunner interface: the composition root
 * (src/root/mcp-gateway.ts) builds the gate and the grant check from the tool list.
 */
import { randomUUID } from "node:crypto";
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import { CallToolRequestSchema, ListToolsRequestSchema, type CallToolResult, type Tool as McpTool } from "@modelcontextprotocol/sdk/types.js";
import type { ToolResultBlock } from "../core/blocks.js";
import { errorMessage, messageOf } from "../core/errors.js";
import { fingerprint, type Scope } from "../core/keys.js";
import { isSettled } from "../core/states.js";
import { replayRecord } from "../gate/runtime.js";
import { ledgerIdentity, type AnyTool } from "../core/tool.js";
import type { CallStore } from "../contracts/calls.js";
import { DEFAULT_DEDUPE_WINDOW_MS, DEFAULT_META_KEYS, type McpConfig } from "./config.js";
import { elicitingApprover, type ElicitingApprover } from "./elicit.js";
import { gatedTools, gateNameOf, type GatedTool } from "./gated-tools.js";
import { forwardedMeta, hostCalls } from "./host-context.js";
import { answerInvalidParams } from "./invalid-params.js";
import { derivedKey, toolUseIdFromMeta } from "./keys.js";
import { errorToolResult, toCallToolResult } from "./results.js";
import type { Upstream } from "./upstream.js";

/** What the gateway needs of a gate. */
export interface GateRunner {
  runToolUses(content: readonly unknown[], scope: Scope): Promise<ToolResultBlock[]>;
  recover(): Promise<unknown>;
  drain(): Promise<void>;
  close(): Promise<void>;
}

/** A gate over one version of the upstream's tool list, and the policy's grant check for it. */
export interface GatedSet {
  readonly runner: GateRunner;
  isGranted(tool: AnyTool, scope: Scope): boolean;
}

export type GateMaker = (tools: readonly AnyTool[], approver: ElicitingApprover) => GatedSet;

export interface McpGatewayOptions {
  readonly config: McpConfig;
  readonly upstream: Upstream;
  /** The ledger's call store (derived keys look up earlier generations in it). */
  readonly calls: CallStore;
  readonly makeGate: GateMaker;
  readonly version: string;
  readonly log: (line: string) => void;
  /** How long an elicitation for an approval may wait for the host's user (default 5 minutes). */
  readonly elicitTimeoutMs?: number;
}

export interface McpGateway {
  /** Lists the upstream's tools and settles calls a previous gateway left unfinished (gate.recover). */
  start(): Promise<void>;
  /** Serves one host connection on `transport` (stdio, or one Streamable HTTP session). */
  /**
   * Serves one host over `transport`. `transportErrors: "quiet"` for an HTTP session: what its
   * transport reports there is a client's mistake (not JSON-RPC, a wrong Accept or Content-Type, a
   * client gone before its answer) that the transport already answered with a 4xx, so it is not
   * logged (any local process could flood the log with it).
   */
  connectHost(transport: Transport, options?: { readonly transportErrors?: "log" | "quiet" }): Promise<Server>;
  /** The scope every call is recorded under. */
  readonly scope: Scope;
  /** Host connections served now (connectHost until the connection closes): an HTTP listener's open sessions, or the one stdio host. */
  hostCount(): number;
  close(): Promise<void>;
}

interface ToolSet {
  readonly byName: ReadonlyMap<string, GatedTool>;
  readonly gate: GatedSet;
  inflight: number;
  retired: boolean;
  closing: boolean;
}

export function createMcpGateway(options: McpGatewayOptions): McpGateway {
  const { config, upstream, log } = options;
  const scope: Scope = {
    tenant: config.tenant ?? "default", task: config.task ?? "mcp",
    ...(config.agent === undefined ? {} : { agent: config.agent }),
    ...(config.session === undefined ? {} : { session: config.session }),
  };
  const metaKeys = config.keys?.meta ?? DEFAULT_META_KEYS;
  const windowMs = config.keys?.dedupeWindowMs ?? DEFAULT_DEDUPE_WINDOW_MS;
  const upstreamId = config.upstreamId ?? upstream.identity;
  const approver = elicitingApprover({ timeoutMs: options.elicitTimeoutMs ?? 5 * 60_000 });
  const hosts = new Set<Server>();
  let current: ToolSet | undefined;
  let refreshing: Promise<void> = Promise.resolve();

  async function buildSet(): Promise<ToolSet> {
    const definitions = await upstream.listTools();
    const tools = gatedTools(definitions, config, upstream, { hostMeta: () => forwardedMeta(hostCalls.getStore()?.meta) }, upstreamId);
    for (const name of Object.keys(config.tools ?? {})) {
      if (!definitions.some((d) => d.name === name)) log(`config names tool ${JSON.stringify(name)}, which the upstream ${upstream.describe} does not offer`);
    }
    return { byName: new Map(tools.map((t) => [t.definition.name, t])), gate: options.makeGate(tools.map((t) => t.tool), approver), inflight: 0, retired: false, closing: false };
  }

  /** An old set's gate closes once its last call has answered. */
  function retire(set: ToolSet): void {
    set.retired = true;
    if (set.inflight > 0 || set.closing) return;
    set.closing = true;
    void set.gate.runner.drain().then(() => set.gate.runner.close()).catch((err: unknown) => log(`closing an old gate: ${messageOf(err)}`));
  }

  function refresh(): Promise<void> {
    refreshing = refreshing.then(async () => {
      try {
        const next = await buildSet();
        const old = current;
        current = next;
        if (old) retire(old);
        for (const host of hosts) await host.sendToolListChanged().catch(() => undefined);
      } catch (err) {
        log(`the upstream's tool list changed but could not be read again (${messageOf(err)}); keeping the tools it had`);
      }
    });
    return refreshing;
  }

  upstream.onToolsChanged(() => void refresh());

  function visible(set: ToolSet): McpTool[] {
    return [...set.byName.values()]
      .filter((t) => t.class.effect === "read" || set.gate.isGranted(t.tool, scope))
      .map((t) => t.definition);
  }

  async function keyOf(gated: GatedTool, args: unknown, meta: Record<string, unknown> | undefined): Promise<string> {
    const fromHost = config.tools?.[gated.definition.name]?.key === "derived" ? undefined : toolUseIdFromMeta(meta, metaKeys);
    if (fromHost !== undefined) return fromHost;
    // A read never touches the ledger: any id answers it.
    if (gated.class.effect === "read") return `read-${randomUUID()}`;
    return derivedKey(options.calls, upstreamId, scope, gated.definition.name, args, windowMs);
  }

  /**
   * The recorded answer of a call of a tool the upstream no longer lists (renamed, removed): by
   * the host's id or the derived key, as it was called, when its record is settled and was made
   * by this upstream's tool of that name with these arguments. Undefined otherwise: then the
   * tool truly is unknown and nothing was executed.
   */
  async function heldAnswer(name: string, args: unknown, meta: Record<string, unknown> | undefined): Promise<CallToolResult | undefined> {
    const key = (config.tools?.[name]?.key === "derived" ? undefined : toolUseIdFromMeta(meta, metaKeys))
      ?? await derivedKey(options.calls, upstreamId, scope, name, args, windowMs);
    const record = await options.calls.get(scope.tenant, key);
    const tool = gateNameOf(name);
    if (!record || record.tool !== tool || !isSettled(record.state)) return undefined;
    if (record.fingerprint !== fingerprint(ledgerIdentity({ name: tool, namespace: upstreamId }), args)) return undefined;
    return toCallToolResult(replayRecord(key, record));
  }

  async function callTool(server: Server, name: string, args: Record<string, unknown>, meta: Record<string, unknown> | undefined): Promise<CallToolResult> {
    const set = current;
    if (!set) return errorToolResult(errorMessage("EG_UNKNOWN_TOOL", `the gateway has not read the upstream's tools yet. Nothing was executed; call again.`));
    const gated = set.byName.get(name);
    if (!gated) {
      // A call the ledger holds is answered from its record, even when the upstream no longer lists its tool.
      const held = await heldAnswer(name, args, meta).catch(() => undefined);
      if (held) return held;
      return errorToolResult(errorMessage("EG_UNKNOWN_TOOL",
        `the upstream MCP server (${upstream.describe}) has no tool named ${JSON.stringify(name)}. ` +
          `Its tools: ${visible(set).map((t) => t.name).join(", ") || "none"}. Nothing was executed.`));
    }
    set.inflight++;
    try {
      const key = await keyOf(gated, args, meta);
      const blocks = await hostCalls.run({ server, meta }, () =>
        set.gate.runner.runToolUses([{ type: "tool_use", id: key, name: gated.gateName, input: args }], scope));
      const block = blocks[0];
      if (!block) return errorToolResult(errorMessage("EG_BAD_CONTENT", `the gate gave no answer for ${name}. Nothing was executed.`));
      return toCallToolResult(block);
    } catch (err) {
      // Only the gate's refusals before a start reach here (a bad scope, a ledger that cannot be read for the key).
      return errorToolResult(`${messageOf(err)}${/Nothing was executed|not started/.test(messageOf(err)) ? "" : " The tool was not started by this request."}`);
    } finally {
      set.inflight--;
      if (set.retired) retire(set);
    }
  }

  return {
    scope,
    hostCount: () => hosts.size,
    async start() {
      current = await buildSet();
      const summary = await current.gate.runner.recover();
      log(`effectgate mcp: ${current.byName.size} upstream tools from ${upstream.describe}; recovery: ${JSON.stringify(summary)}`);
    },
    async connectHost(transport, hostOptions = {}) {
      const server = new Server({ name: "effectgate", version: options.version }, {
        capabilities: { tools: { listChanged: true } },
        instructions: `Tools of ${upstream.describe}, through effectgate: a repeated call is answered from a ledger, never run twice; ` +
          `a refused or waiting call returns an error result that says why and what to do.`,
      });
      server.setRequestHandler(ListToolsRequestSchema, () => ({ tools: current ? visible(current) : [] }));
      server.setRequestHandler(CallToolRequestSchema, (request) =>
        callTool(server, request.params.name, request.params.arguments ?? {}, request.params._meta as Record<string, unknown> | undefined));
      hosts.add(server);
      server.onclose = () => hosts.delete(server);
      // What a stdio host's transport reports (a message that is not JSON-RPC, a broken pipe) is said on stderr; an HTTP
      // session's are the client's own mistakes, already answered with a 4xx (connectHost's transportErrors).
      server.onerror = hostOptions.transportErrors === "quiet" ? () => undefined : (err) => log(`effectgate mcp: the host connection: ${messageOf(err)}`);
      await server.connect(transport);
      // A request of the wrong shape gets -32602 and a sentence, not the SDK's -32603 with zod's issue list.
      answerInvalidParams(transport, (err) => server.onerror?.(err instanceof Error ? err : new Error(String(err))));
      return server;
    },
    async close() {
      for (const host of [...hosts]) await host.close().catch(() => undefined);
      await refreshing;
      if (current) {
        await current.gate.runner.drain();
        await current.gate.runner.close();
      }
      await upstream.close();
    },
  };
}
