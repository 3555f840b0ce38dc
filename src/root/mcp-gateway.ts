/**
 * The MCP gateway, wired: the mcp feature (src/mcp) with a gate per version of the upstream's
 * tool list (createGate) and the governance policy's grant check (which tools the host sees).
 */
import type { Stores } from "../contracts/stores.js";
import { compilePolicy } from "../governance/compile.js";
import type { Policy } from "../governance/policy.js";
import type { McpConfig, UpstreamConfig } from "../mcp/config.js";
import { createMcpGateway, type McpGateway } from "../mcp/gateway.js";
import { connectUpstream } from "../mcp/upstream.js";
import { EffectgateError } from "../core/errors.js";
import type { AnyTool } from "../core/tool.js";
import { createGate } from "./create-gate.js";

export interface McpGatewayOptions {
  readonly config: McpConfig;
  /** The upstream server; default the config's `upstream`. */
  readonly upstream?: UpstreamConfig;
  /** The ledger (memoryLedger, sqliteLedger, postgresLedger). It stays yours to close. */
  readonly ledger: Stores;
  /** Operator messages (default: stderr, which a stdio host shows as the server's log). */
  readonly log?: (line: string) => void;
  /** The version the gateway reports to hosts and upstreams. */
  readonly version?: string;
  /** How long an approval asked through elicitation waits for the host's user (default 5 minutes). */
  readonly elicitTimeoutMs?: number;
}

export type { McpGateway };

export function mcpGateway(options: McpGatewayOptions): McpGateway {
  const { config, ledger } = options;
  const upstreamConfig = options.upstream ?? config.upstream;
  if (!upstreamConfig) {
    throw new EffectgateError("EG_BAD_OPTION", "the MCP gateway needs an upstream server: `effectgate mcp -- <command> [args]`, --upstream-url, or `upstream` in the config");
  }
  const log = options.log ?? ((line: string) => process.stderr.write(`${line}\n`));
  const version = options.version ?? "0.1.0";
  const upstream = connectUpstream(upstreamConfig, {
    clientName: "effectgate-mcp-gateway", version, log, ...(config.upstreamLimits === undefined ? {} : { limits: config.upstreamLimits }),
  });
  const policy = config.policy as Policy | string | undefined;
  return createMcpGateway({
    config, upstream, calls: ledger.calls, version, log,
    ...(options.elicitTimeoutMs === undefined ? {} : { elicitTimeoutMs: options.elicitTimeoutMs }),
    makeGate(tools, approver) {
      const gate = createGate({
        tools, ledger, approver, onAlert: (alert) => log(JSON.stringify({ alert: alert.code, message: alert.message, key: alert.key, tool: alert.tool })),
        ...(policy === undefined ? {} : { policy }),
        ...(config.timeoutMs === undefined ? {} : { timeoutMs: config.timeoutMs }),
      });
      const grants = compilePolicy(policy, new Map<string, AnyTool>(tools.map((t) => [t.name, t])));
      return { runner: gate, isGranted: (tool, scope) => grants.isGranted(tool, scope) };
    },
  });
}
