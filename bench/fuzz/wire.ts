/**
 * Raw HTTP/1.1 over node:net: the fuzzer's bytes go on the wire as generated (a request-target
 * such as `//[`, a header line twice, invalid UTF-8, a body cut short), which no HTTP client
 * library would send. Responses are parsed as they arrive (Content-Length, chunked, or up to the
 * close); a `text/event-stream` response counts as answered once its head arrived.
 */
import { connect, type Socket } from "node:net";

export interface WireResponse {
  readonly status: number;
  /** Lower-case names; repeated headers joined by ", ". */
  readonly headers: Readonly<Record<string, string>>;
  readonly body: Buffer;
}

export interface Exchange {
  /** The responses, in order (1xx interim responses left out). */
  readonly responses: readonly WireResponse[];
  /** The server closed (or reset) the connection. */
  readonly closed: boolean;
  /** Neither a response nor a close within the time allowed, for a request that was complete. */
  readonly hung: boolean;
  /** The connection could not be opened (the server is gone, or refuses connections). */
  readonly refused: boolean;
}

interface Pending {
  readonly heads: readonly boolean[];
  /** Wait for an event stream's first `data:` event (its body) instead of taking the head as the answer. */
  readonly sseData: boolean;
}

/** Parses responses out of `buffer`; returns what is left. `heads[i]` says response i answers a HEAD (no body). */
function parseResponses(buffer: Buffer, out: WireResponse[], pending: Pending, ended: boolean): Buffer {
  for (;;) {
    const end = buffer.indexOf("\r\n\r\n");
    if (end < 0) return buffer;
    const head = buffer.subarray(0, end).toString("latin1").split("\r\n");
    const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(head[0] ?? "")?.[1] ?? NaN);
    const headers: Record<string, string> = {};
    for (const line of head.slice(1)) {
      const colon = line.indexOf(":");
      if (colon < 0) continue;
      const name = line.slice(0, colon).trim().toLowerCase();
      const value = line.slice(colon + 1).trim();
      headers[name] = name in headers ? `${headers[name]}, ${value}` : value;
    }
    let rest = buffer.subarray(end + 4);
    if (status >= 100 && status < 200) {
      buffer = rest;
      continue;
    }
    const isHead = pending.heads[out.length] === true;
    let body: Buffer;
    if (isHead || status === 204 || status === 304) {
      body = Buffer.alloc(0);
    } else if ((headers["content-type"] ?? "").startsWith("text/event-stream")) {
      if (pending.sseData) {
        const text = rest.toString("utf8");
        const event = /(^|\n)data:[^\n]*\n\n/.exec(text);
        if (!event) return buffer;
        out.push({ status, headers, body: Buffer.from(text.slice(0, event.index + event[0].length)) });
      } else {
        out.push({ status, headers, body: Buffer.alloc(0) });
      }
      return Buffer.alloc(0);
    } else if (headers["transfer-encoding"]?.toLowerCase().includes("chunked")) {
      const chunks: Buffer[] = [];
      for (;;) {
        const lineEnd = rest.indexOf("\r\n");
        if (lineEnd < 0) return buffer;
        const size = parseInt(rest.subarray(0, lineEnd).toString("latin1"), 16);
        if (!Number.isFinite(size)) return buffer;
        if (rest.length < lineEnd + 2 + size + 2) return buffer;
        if (size === 0) {
          const trailerEnd = rest.indexOf("\r\n\r\n", lineEnd);
          rest = trailerEnd >= 0 ? rest.subarray(trailerEnd + 4) : rest.subarray(lineEnd + 4);
          break;
        }
        chunks.push(rest.subarray(lineEnd + 2, lineEnd + 2 + size));
        rest = rest.subarray(lineEnd + 2 + size + 2);
      }
      body = Buffer.concat(chunks);
    } else if (headers["content-length"] !== undefined) {
      const length = Number(headers["content-length"]);
      if (rest.length < length) return buffer;
      body = rest.subarray(0, length);
      rest = rest.subarray(length);
    } else if ((headers.connection ?? "").toLowerCase().includes("close")) {
      // Delimited by the close.
      if (!ended) return buffer;
      body = rest;
      rest = Buffer.alloc(0);
    } else {
      body = Buffer.alloc(0);
    }
    out.push({ status, headers, body });
    buffer = rest;
  }
}

export interface ExchangeOptions {
  /** Requests to write in turn, each after the previous one's response (a kept-alive connection). */
  readonly requests: readonly Buffer[];
  /** Which of `requests` are HEAD requests (their responses carry no body). */
  readonly heads?: readonly boolean[];
  /** Whether the last request is complete (the server owes an answer) or cut short (we leave after `lingerMs`). */
  readonly complete: boolean;
  /** How long an answer may take before the exchange counts as hung. */
  readonly hangMs: number;
  /** For an incomplete request: how long to wait for an early answer before leaving. */
  readonly lingerMs?: number;
  /** Read an event stream up to its first `data:` event (default: its head is the answer). */
  readonly sseData?: boolean;
  /** Write each request in pieces of this size (a slow or fragmented client). */
  readonly pieceBytes?: number;
}

/** Opens a connection to 127.0.0.1:`port`, writes the requests one answer at a time, and reports what came back. */
export function exchange(port: number, options: ExchangeOptions): Promise<Exchange> {
  return new Promise((resolve) => {
    const responses: WireResponse[] = [];
    let buffer: Buffer = Buffer.alloc(0);
    let closed = false;
    let settled = false;
    let sent = 0;
    let timer: NodeJS.Timeout | undefined;
    const pending: Pending = { heads: options.heads ?? [], sseData: options.sseData === true };
    const socket: Socket = connect({ port, host: "127.0.0.1" });
    socket.setNoDelay(true);

    const finish = (result: Omit<Exchange, "responses">) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      resolve({ responses, ...result });
    };
    const arm = (ms: number, onTimeout: () => void) => {
      clearTimeout(timer);
      timer = setTimeout(onTimeout, ms);
    };
    const writeNext = () => {
      const request = options.requests[sent++];
      if (request === undefined) return;
      const last = sent === options.requests.length;
      const piece = options.pieceBytes ?? 0;
      if (piece > 0 && request.length > piece) {
        for (let at = 0; at < request.length; at += piece) socket.write(request.subarray(at, at + piece));
      } else {
        socket.write(request);
      }
      if (last && !options.complete) arm(options.lingerMs ?? 0, () => finish({ closed, hung: false, refused: false }));
      else arm(options.hangMs, () => finish({ closed, hung: true, refused: false }));
    };
    const onProgress = () => {
      buffer = parseResponses(buffer, responses, pending, closed);
      if (responses.length >= sent) {
        if (sent < options.requests.length) {
          // The server said it closes this connection: the next request would not be read.
          const last = responses[responses.length - 1];
          if ((last?.headers.connection ?? "").toLowerCase().includes("close")) return finish({ closed, hung: false, refused: false });
          // An event stream holds the connection for as long as it runs: nothing else can be asked on it.
          if ((last?.headers["content-type"] ?? "").startsWith("text/event-stream")) return finish({ closed, hung: false, refused: false });
          writeNext();
        } else {
          finish({ closed, hung: false, refused: false });
        }
      }
    };
    socket.on("connect", writeNext);
    socket.on("data", (chunk: Buffer) => {
      buffer = buffer.length === 0 ? chunk : Buffer.concat([buffer, chunk]);
      onProgress();
    });
    socket.on("error", (err: NodeJS.ErrnoException) => {
      if (sent === 0 && (err.code === "ECONNREFUSED" || err.code === "ECONNRESET")) finish({ closed: true, hung: false, refused: err.code === "ECONNREFUSED" });
    });
    socket.on("close", () => {
      closed = true;
      buffer = parseResponses(buffer, responses, pending, true);
      finish({ closed: true, hung: false, refused: false });
    });
  });
}
