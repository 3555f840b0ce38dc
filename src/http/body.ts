/**
 * Reading a request body with a size limit, shared by the Idempotency-Key middleware, the
 * receipts endpoint and the console. It never rejects: a body over the limit and a client that
 * left mid-body are answers, not exceptions.
 *
 * Over the limit, the rest of the body is read and dropped, at most MAX_DRAIN_BYTES of it, so
 * the 413 reaches a client that is still sending and the connection can carry its next request
 * (a stream destroyed unread leaves the next request on a kept-alive socket hanging). A rest
 * known to be longer than that gets `close`: answer with `Connection: close`. Past the bound the
 * connection is destroyed.
 */
import type { IncomingMessage } from "node:http";

/** Most bytes read and dropped after a body went over its limit, before the connection is closed instead. */
export const MAX_DRAIN_BYTES = 1024 * 1024;

export type LimitedBody =
  | { readonly kind: "read"; readonly bytes: Buffer }
  /** Over the limit: answer 413, with `Connection: close` when `close`. */
  | { readonly kind: "too_large"; readonly close: boolean }
  /** The client closed the connection (or it failed) before the whole body arrived: nobody is left to answer. */
  | { readonly kind: "gone" };

export function readBodyLimited(req: IncomingMessage, limit: number): Promise<LimitedBody> {
  const declared = declaredLength(req);
  return new Promise((resolve) => {
    if (declared !== undefined && declared > limit) {
      drain(req);
      resolve({ kind: "too_large", close: declared > MAX_DRAIN_BYTES });
      return;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    let done = false;
    const finish = (answer: LimitedBody) => {
      if (done) return;
      done = true;
      req.off("data", onData);
      resolve(answer);
    };
    const onData = (chunk: Buffer | string) => {
      const buf = typeof chunk === "string" ? Buffer.from(chunk) : chunk;
      size += buf.length;
      if (size > limit) {
        finish({ kind: "too_large", close: declared !== undefined && declared - size > MAX_DRAIN_BYTES });
        drain(req);
        return;
      }
      chunks.push(buf);
    };
    req.on("data", onData);
    req.once("end", () => finish({ kind: "read", bytes: Buffer.concat(chunks, size) }));
    // 'aborted' / ECONNRESET, then 'close': whichever comes first, the body will not be complete.
    req.on("error", () => finish({ kind: "gone" }));
    req.once("close", () => finish({ kind: "gone" }));
  });
}

function declaredLength(req: IncomingMessage): number | undefined {
  const header = req.headers["content-length"];
  if (header === undefined) return undefined;
  const n = Number(header);
  return Number.isSafeInteger(n) && n >= 0 ? n : undefined;
}

/**
 * Reads and drops what is left of the body, at most MAX_DRAIN_BYTES; past that, closes the
 * connection. For an answer sent before the body was read (node:http would otherwise read all of it, however long).
 */
export function discardBody(req: IncomingMessage): void {
  // Not once it is being read (readBodyLimited drains what it refused itself).
  if (!req.complete && req.readableFlowing !== true) drain(req);
}

function drain(req: IncomingMessage): void {
  let dropped = 0;
  const onData = (chunk: Buffer | string) => {
    dropped += chunk.length;
    if (dropped > MAX_DRAIN_BYTES) {
      req.off("data", onData);
      req.socket.destroy();
    }
  };
  req.on("data", onData);
  // A failure while draining is the end of a body nobody wants: it must not be an unhandled 'error'.
  req.on("error", () => undefined);
  req.resume();
}
