/**
 * The gateway's stdio transport: the SDK's StdioServerTransport, but a message over the limit
 * does not end the session unnoticed. The SDK's transport closes itself on one message over
 * 10 MiB and tells nobody (the host then times out on every later call). Here the message is
 * skipped to its end (at most a small tail of it kept), and:
 * - a request whose id can be read from its start or its end (the SDK writes `id` last) gets a
 *   JSON-RPC error saying what was wrong, and the session goes on;
 * - anything else (a notification, a response, an id nowhere to be found) is `onUnanswerable`:
 *   the host would wait forever, so the CLI logs the reason and exits 1, and the host restarts it.
 */
import process from "node:process";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import { JSONRPCMessageSchema, type JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js";
import { messageOf } from "../core/errors.js";
import { MAX_STDIO_MESSAGE_BYTES } from "./limits.js";
/** How much of an oversized message's start and end is kept to find its id. */
const EDGE_BYTES = 512;
const INVALID_REQUEST = -32600;

export interface BoundedStdioOptions {
  readonly maxMessageBytes?: number;
  /** Operator messages (stderr). */
  readonly log: (line: string) => void;
  /** An oversized message no error can answer: the session cannot go on (the CLI exits 1). */
  readonly onUnanswerable: (reason: string) => void;
}

/** The id of a JSON-RPC request from the edges of its text, when it stands at the top level at either end. */
export function idFromEdges(head: string, tail: string): string | number | undefined {
  const parse = (text: string | undefined) => (text === undefined ? undefined : (JSON.parse(text) as string | number));
  const first = /^\s*\{\s*"jsonrpc"\s*:\s*"2\.0"\s*,\s*"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.)*")\s*,/.exec(head) ?? /^\s*\{\s*"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.)*")\s*,/.exec(head);
  if (first) return parse(first[1]);
  const last = /,\s*"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.)*")\s*\}\s*$/.exec(tail);
  return last ? parse(last[1]) : undefined;
}

export class BoundedStdioServerTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: (message: JSONRPCMessage) => void;

  private readonly max: number;
  private pending: Buffer[] = [];
  private pendingBytes = 0;
  /** Set while skipping an oversized message to its newline. */
  private skipping: { head: Buffer; tail: Buffer; bytes: number } | undefined;
  private closed = false;

  constructor(private readonly options: BoundedStdioOptions, private readonly stdin: NodeJS.ReadableStream = process.stdin, private readonly stdout: NodeJS.WritableStream = process.stdout) {
    this.max = options.maxMessageBytes ?? MAX_STDIO_MESSAGE_BYTES;
  }

  private readonly ondata = (chunk: Buffer) => {
    let rest = chunk;
    while (rest.length > 0) {
      const newline = rest.indexOf(0x0a);
      const part = newline < 0 ? rest : rest.subarray(0, newline);
      rest = newline < 0 ? Buffer.alloc(0) : rest.subarray(newline + 1);
      this.take(part, newline >= 0);
    }
  };

  private readonly onstdinerror = (error: Error) => this.onerror?.(error);

  /** One piece of the current line; `ends` when the line ends with it. */
  private take(part: Buffer, ends: boolean): void {
    if (!this.skipping && this.pendingBytes + part.length > this.max) {
      const started = Buffer.concat([...this.pending, part]);
      this.skipping = { head: started.subarray(0, EDGE_BYTES), tail: Buffer.alloc(0), bytes: 0 };
      this.pending = [];
      this.pendingBytes = 0;
      this.skip(started, ends);
      return;
    }
    if (this.skipping) return this.skip(part, ends);
    this.pending.push(part);
    this.pendingBytes += part.length;
    if (!ends) return;
    const line = Buffer.concat(this.pending).toString("utf8").replace(/\r$/, "");
    this.pending = [];
    this.pendingBytes = 0;
    if (line.trim() === "") return;
    let message: JSONRPCMessage;
    try {
      message = JSONRPCMessageSchema.parse(JSON.parse(line));
    } catch (err) {
      // As the SDK's transport: reported and skipped.
      this.onerror?.(new Error(`a stdio message from the host is not JSON-RPC (${messageOf(err).slice(0, 200)}); skipped`));
      return;
    }
    this.onmessage?.(message);
  }

  private skip(part: Buffer, ends: boolean): void {
    const skipping = this.skipping!;
    skipping.bytes += part.length;
    const tail = Buffer.concat([skipping.tail, part]);
    skipping.tail = tail.subarray(Math.max(0, tail.length - EDGE_BYTES));
    if (!ends) return;
    this.skipping = undefined;
    const id = idFromEdges(skipping.head.toString("utf8"), skipping.tail.toString("utf8").replace(/\r$/, ""));
    const what = `a stdio message from the host of ${skipping.bytes} bytes, over the gateway's limit of ${this.max} bytes for one message`;
    if (id === undefined) {
      this.options.onUnanswerable(`${what}, with no request id to answer: the session cannot go on`);
      return;
    }
    this.options.log(`effectgate mcp: refused ${what} (request id ${JSON.stringify(id)})`);
    void this.send({
      jsonrpc: "2.0", id,
      error: { code: INVALID_REQUEST, message: `${what}: nothing was done. Send smaller arguments (the limit is ${this.max} bytes of JSON per message).` },
    }).catch((err: unknown) => this.onerror?.(err instanceof Error ? err : new Error(String(err))));
  }

  start(): Promise<void> {
    this.stdin.on("data", this.ondata);
    this.stdin.on("error", this.onstdinerror);
    return Promise.resolve();
  }

  send(message: JSONRPCMessage): Promise<void> {
    // Resolved by the write's own callback, not a 'drain' listener per write: a host slow to read its
    // answers would otherwise add one listener per answer (MaxListenersExceededWarning, F8).
    return new Promise((resolve) => {
      if (this.stdout.write(`${JSON.stringify(message)}\n`, () => resolve())) resolve();
    });
  }

  close(): Promise<void> {
    if (this.closed) return Promise.resolve();
    this.closed = true;
    this.stdin.off("data", this.ondata);
    this.stdin.off("error", this.onstdinerror);
    if (this.stdin.listenerCount("data") === 0) this.stdin.pause();
    this.pending = [];
    this.onclose?.();
    return Promise.resolve();
  }
}
