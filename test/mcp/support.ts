/** Driving the built `effectgate mcp` as a host would: the SDK's own Client over stdio or HTTP, the fixture upstream behind it. */
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { CallToolResultSchema, type CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { CLI } from "../cli/run-cli.js";
import { tempDir } from "../support/tmp.js";

export const UPSTREAM = fileURLToPath(new URL("./fixtures/upstream.mjs", import.meta.url));

/** One test's files: the ledger, the upstream's effects and control files, the gateway config. */
export interface Workspace {
  readonly dir: string;
  readonly db: string;
  readonly effectsFile: string;
  readonly controlFile: string;
  readonly configFile: string;
  /** The effects the upstream applied, as it recorded them. */
  effects(tool?: string): { n: number; tool: string; args: Record<string, unknown>; key: string | null; fence: number | null }[];
  control(modes: Record<string, string>): void;
  env(): Record<string, string>;
}

export function workspace(config: Record<string, unknown> = {}): Workspace {
  const dir = tempDir();
  const ws: Workspace = {
    dir,
    db: join(dir, "ledger.db"),
    effectsFile: join(dir, "effects.jsonl"),
    controlFile: join(dir, "control.json"),
    configFile: join(dir, "effectgate.mcp.json"),
    effects: (tool) => (existsSync(ws.effectsFile) ? readFileSync(ws.effectsFile, "utf8").split("\n").filter((l) => l !== "") : [])
      .map((l) => JSON.parse(l) as ReturnType<Workspace["effects"]>[number]).filter((e) => tool === undefined || e.tool === tool),
    control: (modes) => writeFileSync(ws.controlFile, JSON.stringify(modes)),
    env: () => ({ UPSTREAM_EFFECTS: ws.effectsFile, UPSTREAM_CONTROL: ws.controlFile }),
  };
  writeFileSync(ws.configFile, JSON.stringify(config));
  return ws;
}

export interface Host {
  readonly client: Client;
  /** The gateway's pid. */
  readonly pid: number;
  stderr(): string;
  call(name: string, args: Record<string, unknown>, meta?: Record<string, unknown>, options?: { timeout?: number }): Promise<CallToolResult>;
  close(): Promise<void>;
}

function env(extra: Record<string, string>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) if (v !== undefined && k !== "EFFECTGATE_DB" && k !== "EFFECTGATE_PG_URL") out[k] = v;
  return { ...out, ...extra };
}

export function hostOf(client: Client, pid: number, stderr: () => string, close: () => Promise<void>): Host {
  return {
    client, pid, stderr, close,
    call: (name, args, meta, options) => client.request(
      { method: "tools/call", params: { name, arguments: args, ...(meta ? { _meta: meta } : {}) } },
      CallToolResultSchema, options ?? {},
    ),
  };
}

/** Starts `effectgate mcp --config … --db … -- node upstream.mjs` as a host does, and connects to it. */
export async function startGateway(ws: Workspace, options: { capabilities?: Client["registerCapabilities"] extends (c: infer C) => void ? C : never; setup?: (client: Client) => void; args?: string[]; ledgerArgs?: string[] } = {}): Promise<Host> {
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [CLI, "mcp", "--config", ws.configFile, ...(options.ledgerArgs ?? ["--db", ws.db]), ...(options.args ?? []), "--", process.execPath, UPSTREAM],
    env: env(ws.env()), cwd: ws.dir, stderr: "pipe",
  });
  let stderr = "";
  transport.stderr?.on("data", (chunk: Buffer) => (stderr += chunk.toString("utf8")));
  const client = new Client({ name: "test-host", version: "1.0.0" }, { capabilities: options.capabilities ?? {} });
  options.setup?.(client);
  await client.connect(transport);
  const pid = transport.pid;
  if (pid === null) throw new Error("the gateway did not start");
  return hostOf(client, pid, () => stderr, () => client.close());
}

export const text = (result: CallToolResult): string =>
  result.content.map((c) => (c.type === "text" ? c.text : `[${c.type}]`)).join("\n");
