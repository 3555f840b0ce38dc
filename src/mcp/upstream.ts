/**
 * The upstream MCP server the gateway fronts: a child process over stdio (or a server over
 * Streamable HTTP), reached through the SDK's own Client. It starts again on the next call when
 * it has died; a call that was running when it died has an unknown outcome, never "failed".
 *
 * What a failed request says about the effect (read by the gate's classifyError):
 * - the upstream is down and could not be started: not sent (UpstreamDown, nothing happened);
 * - a stdio upstream's call refused before any of it was written (over upstreamLimits, or still
 *   queued when the upstream went): not sent (UpstreamDown); one whose writing had started: unknown;
 * - a JSON-RPC "invalid params", "method not found", "invalid request" or "parse error": the
 *   upstream refused it (ToolRejected, nothing happened);
 * - the connection closed mid-call (a crash), no answer, an internal error, or an answer that is
 *   not a tool result (garbage): unknown (OutcomeUnknown): the gate probes, never blind-retries.
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import { CallToolResultSchema, ErrorCode, McpError, ToolListChangedNotificationSchema, type CallToolResult, type Tool as McpTool } from "@modelcontextprotocol/sdk/types.js";
import { messageOf } from "../core/errors.js";
import { OutcomeUnknown, ToolRejected } from "../core/outcome.js";
import type { UpstreamConfig, UpstreamLimitsConfig } from "./config.js";
import { defaultUpstreamId } from "./keys.js";
import { DEFAULT_UPSTREAM_MAX_MESSAGE_BYTES, DEFAULT_UPSTREAM_MAX_QUEUED_BYTES, DEFAULT_UPSTREAM_STALL_MS } from "./limits.js";
import { MaybeSent, NotSent } from "./upstream-queue.js";
import { BoundedStdioClientTransport } from "./upstream-stdio.js";

/** The upstream could not be reached, so the request was never sent. `code` is one classifyError reads as "not sent". */
export class UpstreamDown extends Error {
  override readonly name = "UpstreamDown";
  readonly code = "ECONNREFUSED";
}

export interface UpstreamCall {
  readonly name: string;
  readonly arguments: Record<string, unknown>;
  readonly meta: Record<string, unknown>;
  readonly signal?: AbortSignal;
  /** The SDK's own request timeout; the gate's timeout (via `signal`) normally fires first. */
  readonly timeoutMs: number;
}

export interface Upstream {
  /** Where the upstream is, for messages: the command line or the URL. */
  readonly describe: string;
  /** Who the upstream is in the ledger when the config names nobody (`upstreamId`): defaultUpstreamId of its config. */
  readonly identity: string;
  listTools(): Promise<McpTool[]>;
  call(call: UpstreamCall): Promise<CallToolResult>;
  /** Called when the upstream says its tool list changed. */
  onToolsChanged(listener: () => void): void;
  close(): Promise<void>;
}

const REFUSED = new Set<number>([ErrorCode.InvalidParams, ErrorCode.MethodNotFound, ErrorCode.InvalidRequest, ErrorCode.ParseError]);
const CONNECTION_CLOSED: number = ErrorCode.ConnectionClosed;
const REQUEST_TIMEOUT: number = ErrorCode.RequestTimeout;

export function connectUpstream(config: UpstreamConfig, options: { clientName: string; version: string; log: (line: string) => void; limits?: UpstreamLimitsConfig }): Upstream {
  const describe = "url" in config ? config.url : [config.command, ...(config.args ?? [])].join(" ");
  let client: Client | undefined;
  let connecting: Promise<Client> | undefined;
  let lastTrouble: string | undefined;
  const listeners: (() => void)[] = [];
  let closed = false;
  const limits = {
    maxMessageBytes: options.limits?.maxMessageBytes ?? DEFAULT_UPSTREAM_MAX_MESSAGE_BYTES,
    maxQueuedBytes: options.limits?.maxQueuedBytes ?? DEFAULT_UPSTREAM_MAX_QUEUED_BYTES,
    stallMs: options.limits?.stallMs ?? DEFAULT_UPSTREAM_STALL_MS,
  };

  function transport(): Transport {
    if ("url" in config) {
      return new StreamableHTTPClientTransport(new URL(config.url), config.headers ? { requestInit: { headers: config.headers } } : {});
    }
    // The upstream sees the gateway's whole environment (the host configured it for the server), plus the config's.
    const env: Record<string, string> = {};
    for (const [k, v] of Object.entries(process.env)) if (v !== undefined) env[k] = v;
    // Its stdin bounded (upstream-queue.ts): an upstream that stops reading is refused calls, then closed, never queued to without end.
    return new BoundedStdioClientTransport({
      command: config.command, args: config.args ?? [], env: { ...env, ...config.env }, ...(config.cwd ? { cwd: config.cwd } : {}), limits, log: options.log,
    });
  }

  async function connected(): Promise<Client> {
    if (closed) throw new UpstreamDown(`the gateway is closing; the upstream ${describe} takes no more calls`);
    if (client) return client;
    connecting ??= (async () => {
      const fresh = new Client({ name: options.clientName, version: options.version });
      fresh.setNotificationHandler(ToolListChangedNotificationSchema, () => {
        for (const listener of listeners) listener();
      });
      fresh.onerror = (err) => {
        // Garbage on the upstream's stdout is reported here and skipped; a call it should have answered then gets no answer.
        lastTrouble = messageOf(err);
        options.log(`upstream ${describe}: ${lastTrouble}`);
      };
      fresh.onclose = () => {
        if (client === fresh) client = undefined;
        if (!closed) options.log(`upstream ${describe} closed the connection (it exited or crashed); it is started again on the next call`);
      };
      try {
        await fresh.connect(transport());
      } catch (err) {
        await fresh.close().catch(() => undefined);
        throw new UpstreamDown(`the upstream MCP server ${describe} could not be started or reached: ${messageOf(err)}`, { cause: err });
      }
      client = fresh;
      return fresh;
    })().finally(() => {
      connecting = undefined;
    });
    return connecting;
  }

  const trouble = () => (lastTrouble === undefined ? "" : ` (the upstream's last problem: ${lastTrouble})`);

  return {
    describe,
    identity: defaultUpstreamId(config),
    async listTools() {
      const c = await connected();
      const tools: McpTool[] = [];
      let cursor: string | undefined;
      do {
        const page = await c.listTools(cursor === undefined ? {} : { cursor });
        tools.push(...page.tools);
        cursor = page.nextCursor;
      } while (cursor !== undefined);
      return tools;
    },
    async call(call) {
      const c = await connected();
      try {
        // request(), not callTool(): callTool also checks structured output against the tool's outputSchema
        // after the answer came, and a mismatch there must not read as "the upstream refused it".
        return await c.request(
          { method: "tools/call", params: { name: call.name, arguments: call.arguments, _meta: call.meta } },
          CallToolResultSchema,
          { timeout: call.timeoutMs, ...(call.signal ? { signal: call.signal } : {}) },
        );
      } catch (err) {
        if (call.signal?.aborted) throw err; // the gate gave up (its timeout or a lost lease): it knows what that means
        // The stdio transport's own answer for a request it did not write (the NotSent in `data`: no upstream can send that).
        if (err instanceof McpError && err.data instanceof NotSent) {
          throw new UpstreamDown(`${call.name} was NOT sent to the upstream ${describe}: ${err.data.message}. Nothing of it reached the upstream`, { cause: err.data });
        }
        if (err instanceof MaybeSent) {
          throw new OutcomeUnknown(`the upstream ${describe} went while ${call.name} was being written to it (${err.message})${trouble()}`, { cause: err });
        }
        if (err instanceof McpError && REFUSED.has(err.code)) {
          throw new ToolRejected(`the upstream refused the call: ${err.message}`, { cause: err });
        }
        if (err instanceof McpError && err.code === CONNECTION_CLOSED) {
          throw new OutcomeUnknown(`the upstream ${describe} closed the connection while ${call.name} was running (it crashed or exited): ` +
            `it may or may not have done it${trouble()}`, { cause: err });
        }
        if (err instanceof McpError && err.code === REQUEST_TIMEOUT) {
          throw new OutcomeUnknown(`the upstream did not answer ${call.name} within ${call.timeoutMs} ms${trouble()}`, { cause: err });
        }
        if (err instanceof Error && err.message === "Not connected") {
          throw new UpstreamDown(`the upstream ${describe} was not connected, so ${call.name} was not sent`, { cause: err });
        }
        throw new OutcomeUnknown(`the upstream's answer to ${call.name} was not a usable tool result (${messageOf(err)})${trouble()}`, { cause: err });
      }
    },
    onToolsChanged(listener) {
      listeners.push(listener);
    },
    async close() {
      closed = true;
      const c = client ?? (connecting ? await connecting.catch(() => undefined) : undefined);
      client = undefined;
      await c?.close().catch(() => undefined);
    },
  };
}
