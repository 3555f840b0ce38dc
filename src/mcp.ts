/**
 * effectgate/mcp: the MCP gateway for code: any MCP server's tools behind the gate (ledger,
 * probes, governance), served to a host over stdio or Streamable HTTP. Needs the optional peer
 * `@modelcontextprotocol/sdk` (1.x). `effectgate mcp -- <command>` is the same from the command
 * line; see docs/mcp.md.
 *
 *   import { mcpGateway, loadMcpConfig } from "effectgate/mcp";
 *   import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
 *   const gateway = mcpGateway({ config: loadMcpConfig("effectgate.mcp.json"), ledger, upstream: { command: "node", args: ["server.js"] } });
 *   await gateway.start();
 *   await gateway.connectHost(new StdioServerTransport());
 */
export { mcpGateway, type McpGateway, type McpGatewayOptions } from "./root/mcp-gateway.js";
export {
  DEFAULT_DEDUPE_WINDOW_MS, DEFAULT_META_KEYS, loadMcpConfig, parseMcpConfig,
  type McpConfig, type ProbeConfig, type ToolConfig, type UpstreamConfig,
} from "./mcp/config.js";
export { classifyTool, type ToolAnnotations, type ToolClass } from "./mcp/classify.js";
export { META_FENCE, META_KEY } from "./mcp/gated-tools.js";
export { listenHttp, type ListenOptions, type Listening } from "./mcp/http.js";
