/**
 * What the gateway writes to a stdio upstream's stdin, bounded (FINDINGS F9). An upstream that
 * stops reading (hung, stopped, or an SDK server that closed its transport on a line over its
 * 10 MiB cap) must not make the gateway queue every later call in memory until it dies of it.
 *
 * - One message at a time, in pieces of 64 KiB, each written after the last one's write callback:
 *   Node's own buffer never holds more than a piece, and no listener is added per write (F8).
 * - A message over `maxMessageBytes` is refused: NotSent, nothing of it written.
 * - A message that would take the bytes waiting past `maxQueuedBytes` is refused: NotSent.
 * - Nothing written for `stallMs` while a piece waits: `onStall`, and the transport closes the upstream.
 *
 * What a failure means for the effect: a refused message and one still waiting in the queue when
 * the upstream closes were never written (NotSent: classifyError reads "not sent"); a message
 * whose writing had started may have reached the upstream, so it is never called NotSent (it fails
 * MaybeSent, or with the pipe's own error: outcome unknown).
 */
import type { Writable } from "node:stream";
import type { JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js";

/** A message the gateway did not write to the upstream: nothing of it reached it. */
export class NotSent extends Error {
  override readonly name = "NotSent";
  /** A code classifyError reads as "not sent". */
  readonly code = "ECONNREFUSED";
}

/** A message whose writing had started when the upstream went: it may have reached it (outcome unknown, never "not sent"). */
export class MaybeSent extends Error {
  override readonly name = "MaybeSent";
}

export interface WriteQueueLimits {
  readonly maxMessageBytes: number;
  readonly maxQueuedBytes: number;
  readonly stallMs: number;
}

const PIECE_BYTES = 64 * 1024;

interface Waiting {
  readonly bytes: Buffer;
  readonly id: string | number | undefined;
  readonly resolve: () => void;
  readonly reject: (err: Error) => void;
}

const MIB = 1024 * 1024;
const mib = (bytes: number) => `${Math.round((bytes / MIB) * 10) / 10} MiB`;

export class UpstreamWriteQueue {
  private readonly waiting: Waiting[] = [];
  private writing: { readonly message: Waiting; offset: number } | undefined;
  /** Bytes not yet written: the waiting messages and what is left of the one being written. */
  private queuedBytes = 0;
  private stallTimer: NodeJS.Timeout | undefined;
  private ended: string | undefined;

  /**
   * `answer` answers a request the queue did not write (the transport hands it to the client as the
   * upstream's error answer); `onStall` is told when the upstream has read nothing for `stallMs`.
   */
  constructor(
    private readonly stream: Writable,
    private readonly limits: WriteQueueLimits,
    private readonly answer: (id: string | number, err: NotSent) => void,
    private readonly onStall: (why: string) => void,
  ) {}

  /** Bytes waiting to be written. */
  get queued(): number {
    return this.queuedBytes;
  }

  /**
   * Resolves once the whole message was handed to the pipe. A request refused (or still waiting
   * when the queue ends) is answered through `answer` with NotSent and its send resolves, as if
   * the upstream had answered it: the SDK then drops what it keeps for the request (a rejected send
   * leaves its response handler, and with it the request's arguments, until the connection closes).
   * Any other message refused rejects NotSent.
   */
  send(message: JSONRPCMessage): Promise<void> {
    const id = "id" in message && "method" in message && (typeof message.id === "string" || typeof message.id === "number") ? message.id : undefined;
    if (this.ended !== undefined) return this.refuse(id, new NotSent(this.ended));
    // The SDK cancels a request that timed out: one still waiting here is taken out instead, and the upstream never hears of either.
    const cancelled = cancelledWaiting(message, this.waiting);
    if (cancelled) {
      this.waiting.splice(this.waiting.indexOf(cancelled), 1);
      this.queuedBytes -= cancelled.bytes.length;
      cancelled.resolve();
      return Promise.resolve();
    }
    const bytes = Buffer.from(`${JSON.stringify(message)}\n`, "utf8");
    if (bytes.length > this.limits.maxMessageBytes) {
      return this.refuse(id, new NotSent(`the message is ${bytes.length} bytes (${mib(bytes.length)}), over the ${this.limits.maxMessageBytes} bytes ` +
        `(${mib(this.limits.maxMessageBytes)}) the gateway writes to an upstream in one message (upstreamLimits.maxMessageBytes; an SDK server reads at most 10 MiB)`));
    }
    if (this.queuedBytes > 0 && this.queuedBytes + bytes.length > this.limits.maxQueuedBytes) {
      return this.refuse(id, new NotSent(`${mib(this.queuedBytes)} are already waiting for the upstream to read its stdin, and this message ` +
        `(${mib(bytes.length)}) would take that past the bound of ${mib(this.limits.maxQueuedBytes)} (upstreamLimits.maxQueuedBytes)`));
    }
    return new Promise<void>((resolve, reject) => {
      this.waiting.push({ bytes, id, resolve, reject });
      this.queuedBytes += bytes.length;
      this.pump();
    });
  }

  private refuse(id: string | number | undefined, err: NotSent): Promise<void> {
    if (id === undefined) return Promise.reject(err);
    this.answer(id, err);
    return Promise.resolve();
  }

  /**
   * No more writes: each waiting message fails NotSent (none of it was written); the one being
   * written fails MaybeSent (it may have reached the upstream: never "not sent").
   */
  end(why: string): void {
    if (this.ended !== undefined) return;
    this.ended = why;
    clearTimeout(this.stallTimer);
    for (const w of this.waiting.splice(0)) {
      const err = new NotSent(`${why}; this message was still waiting, none of it written`);
      if (w.id === undefined) w.reject(err);
      else {
        this.answer(w.id, err);
        w.resolve();
      }
    }
    const current = this.writing;
    this.writing = undefined;
    this.queuedBytes = 0;
    current?.message.reject(new MaybeSent(`${why} while this message was being written to it: it may have reached it`));
  }

  private pump(): void {
    if (this.ended !== undefined || this.writing) return;
    const next = this.waiting.shift();
    if (!next) return;
    this.writing = { message: next, offset: 0 };
    this.writePiece();
  }

  private writePiece(): void {
    const current = this.writing;
    if (!current || this.ended !== undefined) return;
    const piece = current.message.bytes.subarray(current.offset, current.offset + PIECE_BYTES);
    this.armStall();
    this.stream.write(piece, (err) => {
      if (this.writing !== current) return; // ended meanwhile: already answered
      if (err) {
        // A broken pipe: some of it may be in the upstream already. The transport's close answers the rest.
        this.writing = undefined;
        this.queuedBytes -= current.message.bytes.length - current.offset;
        clearTimeout(this.stallTimer);
        current.message.reject(err);
        return;
      }
      current.offset += piece.length;
      this.queuedBytes -= piece.length;
      if (current.offset < current.message.bytes.length) return this.writePiece();
      this.writing = undefined;
      clearTimeout(this.stallTimer);
      current.message.resolve();
      this.pump();
    });
  }

  private armStall(): void {
    clearTimeout(this.stallTimer);
    this.stallTimer = setTimeout(() => {
      if (this.ended !== undefined || !this.writing) return;
      this.onStall(`the upstream read nothing of its stdin for ${this.limits.stallMs} ms with ${mib(this.queuedBytes)} waiting (upstreamLimits.stallMs)`);
    }, this.limits.stallMs);
    this.stallTimer.unref();
  }
}

/** The waiting request `message` cancels, if it is a cancellation of one. */
function cancelledWaiting(message: JSONRPCMessage, waiting: readonly Waiting[]): Waiting | undefined {
  if (!("method" in message) || message.method !== "notifications/cancelled" || "id" in message) return undefined;
  const requestId = (message.params as { requestId?: unknown } | undefined)?.requestId;
  return waiting.find((w) => w.id !== undefined && w.id === requestId);
}
