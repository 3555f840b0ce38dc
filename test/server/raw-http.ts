/**
 * Raw HTTP/1.1 over node:net, for requests a client library refuses to send: a request-target
 * such as `//[`, a header sent twice, a body cut off half-way, several requests on one kept-alive
 * socket. Responses are parsed as they arrive (Content-Length or chunked bodies).
 */
import { connect, type Socket } from "node:net";

export interface RawResponse {
  readonly status: number;
  /** Lower-case names; repeated headers joined by ", ". */
  readonly headers: Readonly<Record<string, string>>;
  readonly body: string;
}

export class RawConnection {
  private buffer = Buffer.alloc(0);
  private readonly parsed: RawResponse[] = [];
  private waiter: (() => void) | undefined;
  private ended = false;
  /** Resolves once the server closed the connection (or it failed). */
  readonly closed: Promise<void>;

  private constructor(readonly socket: Socket) {
    this.closed = new Promise((resolve) => {
      const done = () => {
        this.ended = true;
        this.wake();
        resolve();
      };
      socket.on("close", done);
      socket.on("error", () => undefined); // a reset is a close here; what the test expects decides
    });
    socket.on("data", (chunk: Buffer) => {
      this.buffer = Buffer.concat([this.buffer, chunk]);
      this.parse();
      this.wake();
    });
  }

  /** A connection to `url`'s host and port (127.0.0.1), once it is established. */
  static open(url: string): Promise<RawConnection> {
    const { hostname, port } = new URL(url);
    return new Promise((resolve, reject) => {
      const socket = connect(Number(port), hostname, () => resolve(new RawConnection(socket)));
      socket.once("error", reject);
    });
  }

  /** Writes bytes as they are, and resolves once the OS took them. */
  send(data: string | Buffer): Promise<void> {
    return new Promise((resolve, reject) => this.socket.write(data, (err) => (err ? reject(err) : resolve())));
  }

  /**
   * The next complete response, or "closed" when the server closed the connection first. Fails
   * after `withinMs`: a server that neither answers nor closes is hanging, which is what the
   * hostile-input tests look for (the bound is far above the time a working server takes).
   */
  async next(withinMs = 3_000): Promise<RawResponse | "closed"> {
    const deadline = Date.now() + withinMs;
    for (;;) {
      const response = this.parsed.shift();
      if (response) return response;
      if (this.ended) return "closed";
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`no response and no close within ${withinMs} ms: the server hangs (received so far: ${JSON.stringify(this.buffer.toString("latin1").slice(0, 200))})`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left);
        this.waiter = () => {
          clearTimeout(timer);
          resolve();
        };
      });
    }
  }

  /** Waits until the server closes the connection; fails after `withinMs`. */
  async closedWithin(withinMs = 3_000): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`the server kept the connection open for more than ${withinMs} ms`)), withinMs);
    });
    try {
      await Promise.race([this.closed, late]);
    } finally {
      clearTimeout(timer);
    }
  }

  destroy(): void {
    this.socket.destroy();
  }

  private wake(): void {
    const waiter = this.waiter;
    this.waiter = undefined;
    waiter?.();
  }

  private parse(): void {
    for (;;) {
      const end = this.buffer.indexOf("\r\n\r\n");
      if (end < 0) return;
      const head = this.buffer.subarray(0, end).toString("latin1").split("\r\n");
      const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(head[0] ?? "")?.[1]);
      const headers: Record<string, string> = {};
      for (const line of head.slice(1)) {
        const colon = line.indexOf(":");
        const name = line.slice(0, colon).trim().toLowerCase();
        const value = line.slice(colon + 1).trim();
        headers[name] = name in headers ? `${headers[name]}, ${value}` : value;
      }
      let rest = this.buffer.subarray(end + 4);
      let body: Buffer;
      if (headers["transfer-encoding"]?.toLowerCase() === "chunked") {
        const chunks: Buffer[] = [];
        for (;;) {
          const lineEnd = rest.indexOf("\r\n");
          if (lineEnd < 0) return;
          const size = parseInt(rest.subarray(0, lineEnd).toString("latin1"), 16);
          if (rest.length < lineEnd + 2 + size + 2) return;
          if (size === 0) {
            rest = rest.subarray(lineEnd + 4);
            break;
          }
          chunks.push(rest.subarray(lineEnd + 2, lineEnd + 2 + size));
          rest = rest.subarray(lineEnd + 2 + size + 2);
        }
        body = Buffer.concat(chunks);
      } else {
        const length = Number(headers["content-length"] ?? 0);
        if (rest.length < length) return;
        body = rest.subarray(0, length);
        rest = rest.subarray(length);
      }
      this.parsed.push({ status, headers, body: body.toString("utf8") });
      this.buffer = rest;
    }
  }
}

/** A request as text: `lines` are the header lines (each "Name: value"), the body is sent as it is after them. */
export function rawRequest(method: string, target: string, lines: readonly string[], body = ""): string {
  return `${method} ${target} HTTP/1.1\r\n${lines.map((l) => `${l}\r\n`).join("")}\r\n${body}`;
}

/** One request on a fresh connection: its response (or "closed"), then the connection is dropped. */
export async function once(url: string, request: string | Buffer, withinMs?: number): Promise<RawResponse | "closed"> {
  const connection = await RawConnection.open(url);
  try {
    await connection.send(request);
    return await connection.next(withinMs);
  } finally {
    connection.destroy();
  }
}

/** The problem document's `code` of a response (RFC 9457 body or the console's `{error: {code}}`), or undefined. */
export function codeOf(response: RawResponse | "closed"): string | undefined {
  if (response === "closed" || response.body === "") return undefined;
  try {
    const parsed = JSON.parse(response.body) as { code?: string; error?: { code?: string } };
    return parsed.code ?? parsed.error?.code;
  } catch {
    return undefined;
  }
}
