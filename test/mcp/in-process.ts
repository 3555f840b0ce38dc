/**
 * The gateway in this process, for what a child process cannot show deterministically (clocks,
 * two gateways on one ledger): the product's createMcpGateway, wired as src/root/mcp-gateway.ts
 * wires it, a real SDK McpServer as the upstream and a real SDK Client as the host, both over the
 * SDK's own InMemoryTransport, and a memory ledger whose clock the test sets.
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js";
import type { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { CallToolResultSchema, ElicitRequestSchema, type CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import type { Stores } from "../../src/contracts/stores.js";
import { compilePolicy } from "../../src/governance/compile.js";
import { parseMcpConfig } from "../../src/mcp/config.js";
import { createMcpGateway, type McpGateway } from "../../src/mcp/gateway.js";
import type { Upstream } from "../../src/mcp/upstream.js";
import type { AnyTool } from "../../src/core/tool.js";
import { createGate } from "../../src/root/create-gate.js";

/** An upstream reached over the SDK's in-memory transport (connectUpstream only starts a child or reaches a URL). */
export async function inMemoryUpstream(server: McpServer, identity: string): Promise<Upstream> {
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  await server.connect(serverSide);
  const client = new Client({ name: "effectgate-mcp-gateway", version: "0.1.0" });
  await client.connect(clientSide);
  return {
    describe: `in-memory ${identity}`,
    identity,
    listTools: async () => (await client.listTools()).tools,
    call: (call) => client.request({ method: "tools/call", params: { name: call.name, arguments: call.arguments, _meta: call.meta } }, CallToolResultSchema,
      { timeout: call.timeoutMs, ...(call.signal ? { signal: call.signal } : {}) }),
    onToolsChanged: () => undefined,
    close: () => client.close(),
  };
}

export interface InProcessHost {
  readonly gateway: McpGateway;
  call(name: string, args: Record<string, unknown>, meta?: Record<string, unknown>): Promise<CallToolResult>;
  close(): Promise<void>;
}

/** A started gateway in front of `upstream`, on `ledger`, wired as src/root/mcp-gateway.ts wires it. */
export async function startedGateway(ledger: Stores, upstream: Upstream, config: Record<string, unknown> = {}): Promise<McpGateway> {
  const parsed = parseMcpConfig(config, "(test)");
  const gateway = createMcpGateway({
    config: parsed, upstream, calls: ledger.calls, version: "0.1.0", log: () => undefined,
    makeGate(tools, approver) {
      const gate = createGate({ tools, ledger, approver, onAlert: () => undefined });
      const grants = compilePolicy(undefined, new Map<string, AnyTool>(tools.map((t) => [t.name, t])));
      return { runner: gate, isGranted: (tool, scope) => grants.isGranted(tool, scope) };
    },
  });
  await gateway.start();
  return gateway;
}

/** A started gateway in front of `upstream`, on `ledger`, with a host connected to it (one whose user approves every elicited approval, with `approveAll`). */
export async function inProcessGateway(ledger: Stores, upstream: Upstream, config: Record<string, unknown> = {}, options: { approveAll?: boolean } = {}): Promise<InProcessHost> {
  const gateway = await startedGateway(ledger, upstream, config);
  const [hostSide, gatewaySide] = InMemoryTransport.createLinkedPair();
  await gateway.connectHost(gatewaySide);
  const host = new Client({ name: "test-host", version: "1.0.0" }, { capabilities: options.approveAll ? { elicitation: {} } : {} });
  if (options.approveAll) host.setRequestHandler(ElicitRequestSchema, () => ({ action: "accept", content: { approve: true } }));
  await host.connect(hostSide);
  return {
    gateway,
    call: (name, args, meta) => host.request({ method: "tools/call", params: { name, arguments: args, ...(meta ? { _meta: meta } : {}) } }, CallToolResultSchema),
    async close() {
      await host.close();
      await gateway.close();
    },
  };
}

export const textOf = (result: CallToolResult): string =>
  result.content.map((c) => (c.type === "text" ? c.text : `[${c.type}]`)).join("\n");
