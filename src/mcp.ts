/**
 * effectgate/mcp: the MCP gateway for code: any MCP server's tools behind the gate (ledger,
 * probes, governance), served to a host over stdio or Streamable HTTP. Needs the optional peer
 * `@modelcontextprotocol/sdk` (1.x). `effectgate mcp -- <command>` is the same from the command
 * line; see docs/mcp.md.
 *
 *   import { BoundedStdioServerTransport, mcpGateway, loadMcpConfig } from "effectgate/mcp";
 *   const gateway = mcpGateway({ config: loadMcpConfig("effectgate.mcp.json"), ledger, upstream: { command: "node", args: ["server.js"] } });
 *   await gateway.start();
 *   await gateway.connectHost(new BoundedStdioServerTransport({ log, onUnanswerable: (why) => { log(why); process.exit(1); } }));
 */
export { mcpGateway, type McpGateway, type McpGatewayOptions } from "./root/mcp-gateway.js";
export {
  DEFAULT_DEDUPE_WINDOW_MS, DEFAULT_META_KEYS, loadMcpConfig, parseMcpConfig,
  type McpConfig, type ProbeConfig, type ToolConfig, type UpstreamConfig,
} from "./mcp/config.js";
export { classifyTool, type ToolAnnotations, type ToolClass } from "./mcp/classify.js";
export { META_FENCE, META_KEY } from "./mcp/gated-tools.js";
export { listenHttp, type ListenOptions, type Listening } from "./mcp/http.js";
export {
  DEFAULT_MAX_SESSIONS, DEFAULT_SESSION_IDLE_MS, DEFAULT_UPSTREAM_MAX_MESSAGE_BYTES, DEFAULT_UPSTREAM_MAX_QUEUED_BYTES, DEFAULT_UPSTREAM_STALL_MS,
  MAX_HTTP_BODY_BYTES, MAX_STDIO_MESSAGE_BYTES,
} from "./mcp/limits.js";
export { defaultUpstreamId } from "./mcp/keys.js";
export { BoundedStdioServerTransport, type BoundedStdioOptions } from "./mcp/stdio.js";
