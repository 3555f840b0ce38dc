/**
 * What the MCP gateway (effectgate/mcp) adds to one tools/call. A standalone script, never part
 * of the tests:
 *
 *   npm run bench:mcp            (or: npx tsc -p tsconfig.bench.json && node --expose-gc dist-bench/bench/mcp.js)
 *
 * A host (the SDK's own Client) calls a trivial upstream MCP server (bench/mcp-upstream.ts, a
 * child process over stdio) directly, then through the gateway, one call at a time. The host
 * reaches the gateway over the SDK's in-memory transport, so the difference between the rows is
 * the gateway's own cost: its schema check, key choice, ledger writes and the second JSON-RPC hop
 * is not counted twice (the gateway → upstream hop replaces the direct one).
 *
 * Flags: --calls=N measured calls per row (default 1000), after N/10 warm-up calls.
 */
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js";
import { memoryLedger, type Stores } from "../src/index.js";
import { mcpGateway, parseMcpConfig } from "../src/mcp.js";
import { sqliteLedger } from "../src/sqlite.js";
import { positiveIntFlag } from "./lib/flags.js";
import { collectGarbage, fmtUs, summarize, table, timeAsync, type Summary } from "./lib/stats.js";

const CALLS = positiveIntFlag("calls", 1000);
const UPSTREAM = fileURLToPath(new URL("./mcp-upstream.js", import.meta.url));
const upstreamCommand = { command: process.execPath, args: [UPSTREAM] };

type Call = (client: Client, i: number) => Promise<unknown>;
const calls = {
  read: (c, i) => c.callTool({ name: "echo", arguments: { text: `r${i}` } }),
  write: (c, i) => c.callTool({ name: "write_note", arguments: { text: `w${i}` }, _meta: { toolUseId: `toolu_${i}` } }),
  replay: (c) => c.callTool({ name: "write_note", arguments: { text: "same" }, _meta: { toolUseId: "toolu_same" } }),
  derived: (c, i) => c.callTool({ name: "write_note", arguments: { text: `d${i}` } }),
  // A host's repeat of a settled call without a tool-use id: the key lookup finds the settled generation and reads the ledger's clock for the window.
  derivedReplay: (c) => c.callTool({ name: "write_note", arguments: { text: "same-derived" } }),
} satisfies Record<string, Call>;

async function measure(client: Client, call: Call, offset: number): Promise<Summary> {
  const warm = Math.max(1, Math.floor(CALLS / 10));
  for (let i = 0; i < warm; i++) await call(client, offset + 1_000_000 + i);
  collectGarbage();
  return summarize(await timeAsync(CALLS, (i) => call(client, offset + i)));
}

async function direct(): Promise<Record<"read" | "write", Summary>> {
  const client = new Client({ name: "bench-host", version: "1" });
  await client.connect(new StdioClientTransport(upstreamCommand));
  try {
    return { read: await measure(client, calls.read, 0), write: await measure(client, calls.write, 0) };
  } finally {
    await client.close();
  }
}

async function throughGateway(ledger: Stores, which: (keyof typeof calls)[]): Promise<Map<string, Summary>> {
  const gateway = mcpGateway({ config: parseMcpConfig({}, "bench"), upstream: upstreamCommand, ledger, log: () => undefined });
  await gateway.start();
  const [hostSide, gatewaySide] = InMemoryTransport.createLinkedPair();
  await gateway.connectHost(gatewaySide);
  const client = new Client({ name: "bench-host", version: "1" });
  await client.connect(hostSide);
  const out = new Map<string, Summary>();
  try {
    for (const [n, name] of which.entries()) out.set(name, await measure(client, calls[name], n * 10_000_000));
  } finally {
    await client.close();
    await gateway.close();
    await ledger.close();
  }
  return out;
}

const dir = mkdtempSync(join(os.tmpdir(), "effectgate-bench-mcp-"));
try {
  const bare = await direct();
  const rows: string[][] = [];
  const row = (label: string, s: Summary | undefined, base: Summary) => {
    if (!s) return;
    const d = s.median - base.median;
    rows.push([label, fmtUs(s.median), fmtUs(s.p99), s === base ? "—" : `${d >= 0 ? "+" : "−"}${fmtUs(Math.abs(d))}`]);
  };
  row("direct, read (echo)", bare.read, bare.read);
  row("direct, write (write_note)", bare.write, bare.write);
  const memory = await throughGateway(memoryLedger(), ["read", "write", "replay", "derived", "derivedReplay"]);
  row("gateway, read", memory.get("read"), bare.read);
  row("gateway, memory ledger, write, new tool-use id", memory.get("write"), bare.write);
  row("gateway, memory ledger, write, replay", memory.get("replay"), bare.write);
  row("gateway, memory ledger, write, derived key", memory.get("derived"), bare.write);
  row("gateway, memory ledger, write, derived key, repeat (window)", memory.get("derivedReplay"), bare.write);
  const fsync = await throughGateway(sqliteLedger(join(dir, "fsync.db")), ["write", "replay"]);
  row("gateway, SQLite fsync, write, new tool-use id", fsync.get("write"), bare.write);
  row("gateway, SQLite fsync, write, replay", fsync.get("replay"), bare.write);
  const processDurable = await throughGateway(sqliteLedger(join(dir, "process.db"), { durability: "process" }), ["write", "derived", "derivedReplay"]);
  row("gateway, SQLite process, write, new tool-use id", processDurable.get("write"), bare.write);
  row("gateway, SQLite process, write, derived key", processDurable.get("derived"), bare.write);
  row("gateway, SQLite process, write, derived key, repeat (window)", processDurable.get("derivedReplay"), bare.write);
  process.stdout.write(`MCP gateway overhead per tools/call, ${CALLS} calls per row, one at a time (node ${process.version}, ${os.cpus().length} cores)\n\n`);
  process.stdout.write(`${table(["setup", "median", "p99", "median − direct"], rows)}\n`);
} finally {
  rmSync(dir, { recursive: true, force: true });
}
