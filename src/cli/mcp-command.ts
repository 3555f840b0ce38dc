/** The `effectgate mcp` command's options and help (its work is in mcp.ts, loaded only when it runs). */
import { InvalidArgumentError, Option, type Command } from "commander";
import { DEFAULT_SERVER_LIMITS } from "../core/local-server.js";
// Constants only, from a module that imports nothing: this file loads with every command, never the SDK.
import { DEFAULT_MAX_SESSIONS, DEFAULT_SESSION_IDLE_MS } from "../mcp/limits.js";
import { DEFAULT_LEDGER_PATH } from "./defaults.js";
// Type only: mcp.ts itself is loaded when the command runs.
import type { McpCommandOptions } from "./mcp.js";

export function addMcpCommand(program: Command, exitCodes: string): void {
  program
    .command("mcp")
    .description("an MCP gateway: serve another MCP server's tools to a host through the gate (each call recorded before it runs, repeats answered from the ledger, governance applied)")
    // The upstream command is read from the excess arguments, not declared: a declared argument
    // would widen the command column of \`effectgate --help\` for every command.
    .usage("[options] -- <upstream command> [args...]")
    .allowExcessArguments()
    .option("--config <path>", "the gateway's config file (effect classes, keys, probes, policy): see docs/mcp.md")
    .addOption(new Option("--db <path>", "the SQLite ledger file (created when missing)").env("EFFECTGATE_DB").default(DEFAULT_LEDGER_PATH))
    .option("--listen <host:port>", "serve Streamable HTTP at http://host:port/mcp instead of stdio (e.g. 127.0.0.1:8931); every request needs the token")
    .addOption(new Option("--token <token>", "the bearer token HTTP clients must send (default: a random one, printed on stderr)").env("EFFECTGATE_MCP_TOKEN"))
    .option("--upstream-url <url>", "an upstream MCP server over Streamable HTTP instead of a command")
    .option("--upstream-id <id>", "the upstream's identity in the ledger, part of every key (default: the config's upstreamId, else a hash of the upstream command and args, or of the URL)")
    .option("--session-idle-ms <ms>", "--listen: a session without an open request for this long is closed (hosts close without a DELETE)", positiveInt, DEFAULT_SESSION_IDLE_MS)
    .option("--max-sessions <n>", "--listen: sessions open at once; one more replaces the one idle longest, or gets 503 when none is idle", positiveInt, DEFAULT_MAX_SESSIONS)
    .option("--headers-timeout-ms <ms>", "--listen: how long a client may take to send a request's headers", positiveInt, DEFAULT_SERVER_LIMITS.headersTimeoutMs)
    .option("--request-timeout-ms <ms>", "--listen: how long a client may take to send a whole request; a response stream is not bound by it", positiveInt, DEFAULT_SERVER_LIMITS.requestTimeoutMs)
    .option("--keep-alive-timeout-ms <ms>", "--listen: how long an idle kept-alive connection stays open", positiveInt, DEFAULT_SERVER_LIMITS.keepAliveTimeoutMs)
    .option("--max-connections <n>", "--listen: connections open at once; one more is closed at once", positiveInt, DEFAULT_SERVER_LIMITS.maxConnections)
    .option("--tenant <tenant>", "the tenant the calls are recorded under (default: the config's, else \"default\")")
    .option("--task <task>", "the task the calls are recorded under (default: the config's, else \"mcp\")")
    .passThroughOptions()
    .addHelpText("after", `
The host starts \`effectgate mcp -- <the original server command>\` instead of the server itself.
The gateway starts the upstream as a child process (stdio), re-exposes its tools and passes
every call through the gate:
  classes   from the tools' annotations (readOnlyHint → read, destructiveHint: false → write,
            otherwise destructive), overridable per tool in --config
  keys      a tool-use id the host puts in _meta, else derived from the upstream, the task, the
            tool and the arguments (a dedupe window apart, counted from settlement); sent upstream
            in _meta as io.effectgate/idempotency-key with io.effectgate/fence
  upstream  its identity (--upstream-id, default a hash of the command and args or of the URL)
            is part of every key and fingerprint: gateways sharing a ledger (--db, --pg) in front
            of different servers never answer each other's calls; give two gateways in front of
            one server (started with other arguments) the same --upstream-id
  refusals  not granted, over quota, waiting for approval, unknown outcome: an isError result
            that says why and what to do; tools not granted are hidden from tools/list
  approvals destructive calls ask the host's user (elicitation) when the host can, else wait
            for \`effectgate approvals approve ID\` (nothing runs meanwhile)

HTTP (--listen): every request needs the token; a Host other than a loopback name (when bound to
a loopback address) or an Origin other than the listener's own is refused with 403; a first body
over 4 MiB gets 413; sessions are closed after --session-idle-ms without an open request and are
capped by --max-sessions. stdio: one message over 10 MiB is refused; the gateway then exits 1
with the reason, so the host starts it again (see docs/mcp.md, "Limits").

Examples:
  effectgate mcp -- npx -y @modelcontextprotocol/server-everything
  effectgate mcp --config effectgate.mcp.json --db /var/lib/agent/mcp.db -- node server.js
  effectgate mcp --listen 127.0.0.1:8931 --token "$TOKEN" -- python server.py
  effectgate mcp --upstream-url http://127.0.0.1:9000/mcp

Host configuration (an mcpServers entry):
  { "command": "npx", "args": ["-y", "-p", "effectgate", "-p", "@modelcontextprotocol/sdk",
    "effectgate", "mcp", "--db", "/home/me/.effectgate/mcp.db", "--", "node", "server.js"] }

Needs the package @modelcontextprotocol/sdk (1.x) beside effectgate. Reference: docs/mcp.md.
${exitCodes}`)
    .action(async (opts: McpCommandOptions, command: Command) => {
      const { runMcp } = await import("./mcp.js");
      await runMcp(command.args, opts);
    });
}

function positiveInt(value: string): number {
  const n = Number(value);
  if (!/^\d+$/.test(value.trim()) || !Number.isSafeInteger(n) || n < 1) throw new InvalidArgumentError("it must be a whole number of at least 1.");
  return n;
}
