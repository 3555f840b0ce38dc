/** The trivial upstream MCP server the gateway bench (bench/mcp.ts) fronts: two tools that do nothing but answer. */
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { z } from "zod";

const server = new McpServer({ name: "bench-upstream", version: "1.0.0" });
let notes = 0;
server.registerTool("echo", { inputSchema: { text: z.string() }, annotations: { readOnlyHint: true } },
  ({ text }) => ({ content: [{ type: "text", text }] }));
server.registerTool("write_note", { inputSchema: { text: z.string() }, annotations: { destructiveHint: false } },
  ({ text }) => ({ content: [{ type: "text", text: `note ${++notes}: ${text}` }] }));
process.stdin.on("end", () => process.exit(0));
await server.connect(new StdioServerTransport());
