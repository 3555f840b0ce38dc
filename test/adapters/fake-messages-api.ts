/**
 * A small fake of the Anthropic Messages API on 127.0.0.1, to hand the real SDK as `baseURL`:
 * it answers each POST /v1/messages with the next scripted reply (JSON, or SSE when the request
 * streams) and keeps every request body, so a test reads the tool_results the runner sent. A
 * scripted reply can instead be a failure the SDK's own retry reacts to: an error status (529
 * overloaded, 500) or a connection dropped before any answer.
 */
import { createServer, type IncomingMessage } from "node:http";
import type { AddressInfo } from "node:net";

export type Block = Record<string, unknown>;

export interface FakeMessagesApi {
  readonly url: string;
  /** Every request body, in order. */
  readonly requests: { messages: { role: string; content: unknown }[]; [key: string]: unknown }[];
  close(): Promise<void>;
}

/** A request answered with an API error status (the SDK retries 408, 409, 429, 5xx and 529) or a dropped connection. */
export type Failure = { readonly status: number } | { readonly drop: true };
export type Reply = Block[] | Failure;

export const overloaded: Failure = { status: 529 };
export const serverError: Failure = { status: 500 };
export const dropped: Failure = { drop: true };

export const toolUse = (id: string, name: string, input: unknown): Block => ({ type: "tool_use", id, name, input });
export const textBlock = (text: string): Block => ({ type: "text", text });

function message(n: number, content: Block[]) {
  const calls = content.some((b) => b.type === "tool_use");
  return {
    id: `msg_${n}`, type: "message", role: "assistant", model: "claude-test", content,
    stop_reason: calls ? "tool_use" : "end_turn", stop_sequence: null, usage: { input_tokens: 1, output_tokens: 1 },
  };
}

function sse(msg: ReturnType<typeof message>): string {
  const events: [string, unknown][] = [["message_start", { type: "message_start", message: { ...msg, content: [], stop_reason: null } }]];
  msg.content.forEach((block, index) => {
    if (block.type === "tool_use") {
      events.push(["content_block_start", { type: "content_block_start", index, content_block: { ...block, input: {} } }]);
      events.push(["content_block_delta", { type: "content_block_delta", index, delta: { type: "input_json_delta", partial_json: JSON.stringify(block.input) } }]);
    } else {
      events.push(["content_block_start", { type: "content_block_start", index, content_block: { type: "text", text: "" } }]);
      events.push(["content_block_delta", { type: "content_block_delta", index, delta: { type: "text_delta", text: block.text } }]);
    }
    events.push(["content_block_stop", { type: "content_block_stop", index }]);
  });
  events.push(["message_delta", { type: "message_delta", delta: { stop_reason: msg.stop_reason, stop_sequence: null }, usage: { output_tokens: 1 } }]);
  events.push(["message_stop", { type: "message_stop" }]);
  return events.map(([event, data]) => `event: ${event}\ndata: ${JSON.stringify(data)}\n\n`).join("");
}

async function body(req: IncomingMessage): Promise<string> {
  let text = "";
  for await (const chunk of req) text += String(chunk);
  return text;
}

const isFailure = (reply: Reply): reply is Failure => !Array.isArray(reply);

/**
 * `replies[n]` answers the nth request, failed ones included (the last one again once they run
 * out); or a function of the request body and its number (from 1) gives each reply.
 */
export async function startFakeMessagesApi(replies: Reply[] | ((request: FakeMessagesApi["requests"][number], n: number) => Reply)): Promise<FakeMessagesApi> {
  const requests: FakeMessagesApi["requests"] = [];
  const server = createServer((req, res) => {
    void body(req).then((text) => {
      if (req.method !== "POST" || !req.url?.startsWith("/v1/messages")) {
        res.writeHead(404, { "content-type": "application/json" }).end(JSON.stringify({ type: "error", error: { type: "not_found_error", message: `${req.method} ${req.url}` } }));
        return;
      }
      const parsed = JSON.parse(text) as FakeMessagesApi["requests"][number];
      requests.push(parsed);
      const n = requests.length;
      const reply = typeof replies === "function" ? replies(parsed, n) : replies[Math.min(n - 1, replies.length - 1)] ?? [textBlock("done")];
      if (isFailure(reply)) {
        if ("drop" in reply) return void res.socket?.destroy();
        // retry-after-ms keeps the SDK's backoff short; the SDK decides by the status whether to retry.
        res.writeHead(reply.status, { "content-type": "application/json", "retry-after-ms": "1", "request-id": `req_${n}` })
          .end(JSON.stringify({ type: "error", error: { type: reply.status === 529 ? "overloaded_error" : "api_error", message: `scripted ${reply.status}` } }));
        return;
      }
      const msg = message(n, reply);
      if (parsed.stream === true) res.writeHead(200, { "content-type": "text/event-stream" }).end(sse(msg));
      else res.writeHead(200, { "content-type": "application/json", "request-id": `req_${n}` }).end(JSON.stringify(msg));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
