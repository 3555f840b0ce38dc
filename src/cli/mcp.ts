/**
 * `effectgate mcp`: runs the gateway until the host goes away (stdio: stdin closes) or the
 * process is told to stop (SIGINT / SIGTERM), then closes the upstream and the ledger.
 * In stdio mode stdout carries only MCP messages; everything else goes to stderr.
 */
import { randomBytes } from "node:crypto";
import { messageOf } from "../core/errors.js";
import type { Stores } from "../contracts/stores.js";
import { sqliteLedger } from "../stores/sqlite/index.js";
import { CliError, EXIT_FAILURE, EXIT_USAGE } from "./errors.js";
import { chosenTarget } from "./open-ledger.js";

/** The options of `effectgate mcp` (declared in mcp-command.ts). */
export interface McpCommandOptions {
  readonly db: string;
  readonly config?: string;
  readonly listen?: string;
  readonly token?: string;
  readonly upstreamUrl?: string;
  readonly upstreamId?: string;
  readonly sessionIdleMs: number;
  readonly maxSessions: number;
  readonly headersTimeoutMs: number;
  readonly requestTimeoutMs: number;
  readonly keepAliveTimeoutMs: number;
  readonly maxConnections: number;
  readonly tenant?: string;
  readonly task?: string;
}

export async function runMcp(upstreamArgs: readonly string[], opts: McpCommandOptions): Promise<void> {
  const entry = await import("../mcp.js").catch((err: unknown) => {
    throw new CliError(`effectgate mcp needs the package @modelcontextprotocol/sdk (1.x): npm install @modelcontextprotocol/sdk (${messageOf(err)})`, EXIT_FAILURE);
  });
  const config = opts.config === undefined ? entry.parseMcpConfig({}, "(no config)") : entry.loadMcpConfig(opts.config);
  const [command, ...args] = upstreamArgs;
  if (command !== undefined && opts.upstreamUrl !== undefined) throw new CliError("give the upstream as a command after -- or as --upstream-url, not both", EXIT_USAGE);
  const upstream = opts.upstreamUrl !== undefined ? { url: opts.upstreamUrl } : command !== undefined ? { command, args } : config.upstream;
  if (!upstream) throw new CliError("no upstream MCP server: effectgate mcp -- <command> [args], --upstream-url URL, or `upstream` in --config", EXIT_USAGE);
  const listen = opts.listen === undefined ? undefined : parseListen(opts.listen);

  const ledger = await openLedger(opts.db);
  const log = (line: string) => process.stderr.write(`${line}\n`);
  const gateway = entry.mcpGateway({
    config: {
      ...config, ...(opts.tenant === undefined ? {} : { tenant: opts.tenant }), ...(opts.task === undefined ? {} : { task: opts.task }),
      // Checked by the config's own rule (non-empty, at most 128 characters).
      ...(opts.upstreamId === undefined ? {} : entry.parseMcpConfig({ upstreamId: opts.upstreamId }, "--upstream-id")),
    },
    upstream, ledger, log, version: "0.1.0",
  });
  let stopping: Promise<void> | undefined;
  let listening: { readonly url: string; close(): Promise<void> } | undefined;
  const stop = () => (stopping ??= (async () => {
    await listening?.close();
    await gateway.close();
    await ledger.close();
  })());
  try {
    await gateway.start();
  } catch (err) {
    await stop();
    throw new CliError(`the gateway could not start: ${messageOf(err)}`, EXIT_FAILURE);
  }
  /** Why the gateway cannot go on (its stdio session broke): it exits 1 with this, so the host starts it again. */
  let failure: string | undefined;
  let fail = (reason: string) => void reason;
  const finished = new Promise<void>((resolve) => {
    const end = () => void stop().then(resolve, resolve);
    fail = (reason) => {
      failure ??= reason;
      end();
    };
    process.once("SIGINT", end);
    process.once("SIGTERM", end);
    // stdio: the host closing our stdin is the end of the session.
    if (!listen) process.stdin.once("end", end);
  });
  if (listen) {
    const token = opts.token ?? randomBytes(24).toString("base64url");
    const { sessionIdleMs, maxSessions, headersTimeoutMs, requestTimeoutMs, keepAliveTimeoutMs, maxConnections } = opts;
    listening = await entry.listenHttp(gateway, { ...listen, token, sessionIdleMs, maxSessions, headersTimeoutMs, requestTimeoutMs, keepAliveTimeoutMs, maxConnections }, log);
    log(`effectgate mcp: listening on ${listening.url}${opts.token === undefined ? ` with token ${token}` : " (token from --token / EFFECTGATE_MCP_TOKEN)"}`);
  } else {
    await gateway.connectHost(new entry.BoundedStdioServerTransport({ log, onUnanswerable: fail }));
  }
  await finished;
  if (failure !== undefined) throw new CliError(`${failure}; exiting so the host starts the gateway again`, EXIT_FAILURE);
}

async function openLedger(db: string): Promise<Stores> {
  const target = chosenTarget(db);
  if (target.kind === "file") return sqliteLedger(target.path);
  const { postgresLedger } = await import("../stores/postgres/index.js").catch((err: unknown) => {
    throw new CliError(`--pg needs the \`pg\` package: npm install pg (${messageOf(err)})`, EXIT_FAILURE);
  });
  return postgresLedger({ connectionString: target.url }, target.schema ? { schema: target.schema } : {});
}

function parseListen(value: string): { host: string; port: number } {
  const m = /^(?:\[([^\]]+)\]|([^:]+)):(\d{1,5})$/.exec(value) ?? /^()()(\d{1,5})$/.exec(value);
  const port = m ? Number(m[3]) : NaN;
  if (!m || !(port >= 0 && port <= 65535)) throw new CliError(`--listen ${JSON.stringify(value)} must be host:port, e.g. 127.0.0.1:8931 (or a port alone, on 127.0.0.1)`, EXIT_USAGE);
  return { host: m[1] || m[2] || "127.0.0.1", port };
}
