/**
 * The client transport to a stdio upstream: the SDK's StdioClientTransport, except that what is
 * written to the child's stdin goes through the bounded UpstreamWriteQueue (upstream-queue.ts).
 * The SDK's transport writes every message at once and adds a 'drain' listener per write that
 * found the pipe full: an upstream that stops reading made the gateway keep every later call in
 * memory (F9) and warn MaxListenersExceeded (F8). A stalled upstream is closed (SIGTERM, then
 * SIGKILL) and the upstream client starts it again on the next call, as after a crash.
 *
 * Spawned with node:child_process, no shell (the SDK uses cross-spawn, which also resolves
 * Windows' .cmd shims): give a Windows upstream's command as the executable itself.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { ReadBuffer } from "@modelcontextprotocol/sdk/shared/stdio.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import type { JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js";
import { messageOf } from "../core/errors.js";
import { UpstreamWriteQueue, type WriteQueueLimits } from "./upstream-queue.js";

export interface StdioUpstreamParams {
  readonly command: string;
  readonly args: readonly string[];
  readonly env: Record<string, string>;
  readonly cwd?: string;
  readonly limits: WriteQueueLimits;
  /** Operator messages: a stalled upstream is said here. */
  readonly log: (line: string) => void;
}

/** The JSON-RPC error code of a request the gateway did not write to the upstream (its `data` is the NotSent). */
export const NOT_SENT_CODE = -32050;

/** How long a closing upstream gets after its stdin ends, and then after SIGTERM. */
const EXIT_GRACE_MS = 2_000;

export class BoundedStdioClientTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: (message: JSONRPCMessage) => void;

  private child: ChildProcess | undefined;
  private queue: UpstreamWriteQueue | undefined;
  private readonly reading = new ReadBuffer();

  constructor(private readonly params: StdioUpstreamParams) {}

  start(): Promise<void> {
    if (this.child) throw new Error("BoundedStdioClientTransport already started");
    return new Promise((resolve, reject) => {
      const child = spawn(this.params.command, [...this.params.args], {
        env: this.params.env, stdio: ["pipe", "pipe", "inherit"], shell: false, windowsHide: true, ...(this.params.cwd ? { cwd: this.params.cwd } : {}),
      });
      this.child = child;
      this.queue = new UpstreamWriteQueue(child.stdin, this.params.limits, (id, err) => {
        // The request's answer, as if from the upstream; the NotSent itself in `data`, which no upstream can forge (upstream.ts).
        this.onmessage?.({ jsonrpc: "2.0", id, error: { code: NOT_SENT_CODE, message: err.message, data: err } });
      }, (why) => {
        this.params.log(`upstream ${[this.params.command, ...this.params.args].join(" ")} is stalled: ${why}; it is closed and started again on the next call`);
        this.queue?.end("the upstream was stalled and closed");
        void this.kill(child);
      });
      child.on("error", (err) => {
        reject(err);
        this.onerror?.(err);
      });
      child.on("spawn", () => resolve());
      child.on("close", () => {
        if (this.child === child) this.child = undefined;
        this.queue?.end("the upstream exited");
        // After the queue answered what it never wrote (NotSent) and failed what it was writing (MaybeSent): the close answers the rest, outcome unknown.
        setImmediate(() => this.onclose?.());
      });
      child.stdin.on("error", (err) => this.onerror?.(err));
      child.stdout.on("data", (chunk: Buffer) => {
        try {
          this.reading.append(chunk);
        } catch (err) {
          // As the SDK's transport: a line over its 10 MiB cap ends the connection.
          this.onerror?.(err instanceof Error ? err : new Error(messageOf(err)));
          void this.close();
          return;
        }
        for (;;) {
          let message: JSONRPCMessage | null;
          try {
            message = this.reading.readMessage();
          } catch (err) {
            this.onerror?.(err instanceof Error ? err : new Error(messageOf(err)));
            continue;
          }
          if (message === null) break;
          this.onmessage?.(message);
        }
      });
      child.stdout.on("error", (err) => this.onerror?.(err));
    });
  }

  /** The child's pid (undefined before start and after it exited). */
  get pid(): number | undefined {
    return this.child?.pid;
  }

  send(message: JSONRPCMessage): Promise<void> {
    // "Not connected" is what the upstream client reads as "not sent" (upstream.ts), as for the SDK's transport.
    if (!this.child || !this.queue) return Promise.reject(new Error("Not connected"));
    return this.queue.send(message);
  }

  async close(): Promise<void> {
    const child = this.child;
    this.child = undefined;
    this.queue?.end("the connection to the upstream was closed");
    this.reading.clear();
    if (!child) return;
    const exited = new Promise<void>((resolve) => {
      if (child.exitCode !== null || child.signalCode !== null) resolve();
      else child.once("close", () => resolve());
    });
    try {
      child.stdin?.end();
    } catch {
      // already gone
    }
    await Promise.race([exited, delay(EXIT_GRACE_MS)]);
    await this.kill(child, exited);
  }

  private async kill(child: ChildProcess, exited?: Promise<void>): Promise<void> {
    const gone = exited ?? new Promise<void>((resolve) => (child.exitCode !== null || child.signalCode !== null ? resolve() : child.once("close", () => resolve())));
    for (const signal of ["SIGTERM", "SIGKILL"] as const) {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill(signal);
      await Promise.race([gone, delay(EXIT_GRACE_MS)]);
    }
  }
}

const delay = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms).unref());
