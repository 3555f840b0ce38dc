/**
 * A request the gateway serves whose params are the wrong shape is answered `-32602 Invalid
 * params` with a sentence (what is wrong, what to send). The SDK parses each request with the
 * method's schema before its handler and answers a failed parse `-32603 Internal error` carrying
 * zod's raw issue list (Protocol.setRequestHandler); a notification of the wrong shape becomes an
 * "Uncaught error in notification handler" on `onerror`, which stdio logs. Both are a client's
 * mistake: here the same SDK schemas are checked first, on the transport's `onmessage`, and what
 * fails is answered (a request) or dropped (a notification, which has nobody to answer), not logged.
 */
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import {
  CallToolRequestSchema, CancelledNotificationSchema, InitializedNotificationSchema, InitializeRequestSchema,
  isJSONRPCNotification, isJSONRPCRequest, ListToolsRequestSchema, PingRequestSchema, ProgressNotificationSchema,
  SUPPORTED_PROTOCOL_VERSIONS, type JSONRPCMessage,
} from "@modelcontextprotocol/sdk/types.js";

export const INVALID_PARAMS = -32602;

interface Shape {
  readonly schema: { safeParse(value: unknown): { success: boolean; error?: { issues: readonly { path: readonly PropertyKey[]; message: string }[] } } };
  /** What to send, said to the client. */
  readonly send: string;
}

const REQUESTS: Readonly<Record<string, Shape>> = {
  initialize: {
    schema: InitializeRequestSchema,
    send: `{"protocolVersion": one of ${SUPPORTED_PROTOCOL_VERSIONS.map((v) => JSON.stringify(v)).join(", ")}, "capabilities": {…}, "clientInfo": {"name": "…", "version": "…"}}`,
  },
  ping: { schema: PingRequestSchema, send: "no params, or an object" },
  "tools/list": { schema: ListToolsRequestSchema, send: `no params, or {"cursor": "…"} from the last page` },
  "tools/call": { schema: CallToolRequestSchema, send: `{"name": "<a tool of tools/list>", "arguments": {…}} (and "_meta": {…} if any)` },
};

const NOTIFICATIONS: Readonly<Record<string, Shape["schema"]>> = {
  "notifications/initialized": InitializedNotificationSchema,
  "notifications/cancelled": CancelledNotificationSchema,
  "notifications/progress": ProgressNotificationSchema,
};

/** The first issue of a failed parse as words: where (`params.name`) and what (zod's message, no JSON). */
function firstIssue(issues: readonly { path: readonly PropertyKey[]; message: string }[] | undefined): string {
  const issue = issues?.[0];
  if (!issue) return "they do not match the method's schema";
  const where = issue.path.length === 0 ? "the request" : issue.path.map(String).join(".");
  return `${where}: ${issue.message}${issues.length > 1 ? ` (and ${issues.length - 1} more)` : ""}`;
}

/** The sentence for a request of `method` whose params do not parse, or undefined when they do (or the gateway does not serve it). */
export function invalidParams(message: { method: string; params?: unknown }): string | undefined {
  const shape = Object.hasOwn(REQUESTS, message.method) ? REQUESTS[message.method] : undefined;
  if (!shape) return undefined;
  const parsed = shape.schema.safeParse(message);
  if (parsed.success) return undefined;
  return `invalid params for ${message.method}: ${firstIssue(parsed.error?.issues)}. Send params ${shape.send}. Nothing was done.`;
}

/**
 * Checks every message `transport` hands the connected server. Called right after
 * `server.connect(transport)`, which installs the server's `onmessage` (and chains one set before
 * it, so it cannot be set earlier); no message is read between the two (connect's last step,
 * `start()`, only adds listeners).
 */
export function answerInvalidParams(transport: Transport, onSendError: (err: unknown) => void): void {
  const next = transport.onmessage;
  if (!next) return;
  transport.onmessage = (message: JSONRPCMessage, extra) => {
    if (isJSONRPCRequest(message)) {
      const wrong = invalidParams(message);
      if (wrong !== undefined) {
        transport.send({ jsonrpc: "2.0", id: message.id, error: { code: INVALID_PARAMS, message: wrong } }, { relatedRequestId: message.id })
          .catch(onSendError);
        return;
      }
    } else if (isJSONRPCNotification(message)) {
      const schema = Object.hasOwn(NOTIFICATIONS, message.method) ? NOTIFICATIONS[message.method] : undefined;
      if (schema && !schema.safeParse(message).success) return;
    }
    next(message, extra);
  };
}
