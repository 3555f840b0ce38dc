/** Reading a request body with a size limit, shared by the Idempotency-Key middleware and the receipts endpoint. */
import type { IncomingMessage } from "node:http";

/** The raw body, or undefined when it is larger than `limit` (the rest is drained so the answer can still be sent). */
export function readBodyLimited(req: IncomingMessage, limit: number): Promise<Buffer | undefined> {
  const declared = Number(req.headers["content-length"]);
  return new Promise((resolve, reject) => {
    if (Number.isFinite(declared) && declared > limit) {
      req.resume();
      resolve(undefined);
      return;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    const onData = (chunk: Buffer | string) => {
      const buf = typeof chunk === "string" ? Buffer.from(chunk) : chunk;
      size += buf.length;
      if (size > limit) {
        // Keep draining (and dropping) the rest, so the answer can still be sent on this connection.
        req.off("data", onData);
        req.resume();
        resolve(undefined);
        return;
      }
      chunks.push(buf);
    };
    req.on("data", onData);
    req.once("end", () => resolve(Buffer.concat(chunks)));
    req.once("error", reject);
    req.once("close", () => reject(new Error("the request was closed before its body was read")));
  });
}
