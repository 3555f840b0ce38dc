/**
 * A real TCP proxy between a PostgreSQL client and the server that breaks the connection where a
 * plan says: faults below the store, at the wire. It reads the frontend/backend protocol just
 * enough to know which bytes are one request and which are its reply:
 *
 * - a request is everything the client sends up to a sync point: the startup message, a simple
 *   Query (`BEGIN`, `COMMIT`, …), or a Sync closing an extended query (Parse/Bind/Execute);
 * - its reply is everything the server sends up to the ReadyForQuery that answers it (replies come
 *   in request order, so the n-th ReadyForQuery answers the n-th sync point, pipelined or not).
 *
 * For each request the plan picks a fault (or none): `cut` closes both sockets before the request
 * reaches the server (none of it ran); `drop_reply` lets the server run it, drops its reply and
 * cuts the connection (after a COMMIT: committed, and the client never hears it); `delay_reply`
 * holds the reply back, then delivers it; `stall` holds it back, then cuts. A plan is a plain
 * function of the request, so a seeded one (`seededProxyPlan`) decides the same faults for the same
 * sequence of requests. The startup's reply is never held (the client answers the server's
 * authentication messages inside it): the startup can only be cut.
 *
 * node:net only; for tests and the fault explorer (docs/testing.md).
 */
import { connect, createServer, type Server, type Socket } from "node:net";
import type { Rng } from "./rng.js";

export type ProxiedKind = "startup" | "begin" | "commit" | "rollback" | "statement";

export interface ProxiedRequest {
  /** The connection through the proxy, 1, 2, … in the order they were accepted. */
  readonly connection: number;
  /** The request's place on its connection (the startup is 1). */
  readonly index: number;
  /** The request's place among every request through the proxy. */
  readonly seq: number;
  readonly kind: ProxiedKind;
  /** The SQL text (a simple query's, or the statement the Sync closes); "" for the startup. */
  readonly sql: string;
  /** Requests sent on this connection since its open transaction's BEGIN (0 outside one; the COMMIT itself not counted). */
  readonly inTransaction: number;
}

export type ProxyFault =
  | { readonly kind: "cut" }
  | { readonly kind: "drop_reply" }
  | { readonly kind: "delay_reply"; readonly ms: number }
  | { readonly kind: "stall"; readonly ms: number };

/** Which fault, if any, a request meets. */
export type ProxyPlan = (request: ProxiedRequest) => ProxyFault | undefined;

export interface InjectedFault {
  readonly request: ProxiedRequest;
  readonly fault: ProxyFault;
}

export interface ProxyCounts {
  cuts: number;
  droppedReplies: number;
  delayedReplies: number;
  stalls: number;
}

export interface PgProxy {
  /** The port the proxy listens on (127.0.0.1). */
  readonly port: number;
  /** `connectionString` with its host and port replaced by the proxy's. */
  through(connectionString: string): string;
  /** Replaces the plan (requests already sent keep the fault they were given). */
  setPlan(plan: ProxyPlan | undefined): void;
  /** Every fault injected so far, in order. */
  readonly injected: readonly InjectedFault[];
  counts(): ProxyCounts;
  /** Cuts every open connection now (a network failure at an arbitrary moment, idle connections included). */
  cutAll(): void;
  /** Connections open now. */
  open(): number;
  close(): Promise<void>;
}

export interface PgProxyOptions {
  readonly target: { readonly host: string; readonly port: number };
  readonly plan?: ProxyPlan;
}

const SSL_REQUEST = 80877103;
const GSSENC_REQUEST = 80877104;
const CANCEL_REQUEST = 80877102;

const kindOf = (sql: string): ProxiedKind =>
  /^\s*(BEGIN|START\s+TRANSACTION)\b/i.test(sql) ? "begin"
    : /^\s*(COMMIT|END)\b/i.test(sql) ? "commit"
      : /^\s*(ROLLBACK|ABORT)\b/i.test(sql) ? "rollback" : "statement";

/** A NUL-terminated string of `buffer` from `at`, and where the next field starts. */
function cstring(buffer: Buffer, at: number): [string, number] {
  const end = buffer.indexOf(0, at);
  return end < 0 ? [buffer.toString("utf8", at), buffer.length] : [buffer.toString("utf8", at, end), end + 1];
}

export async function startPgProxy(options: PgProxyOptions): Promise<PgProxy> {
  let plan = options.plan;
  const injected: InjectedFault[] = [];
  const counts: ProxyCounts = { cuts: 0, droppedReplies: 0, delayedReplies: 0, stalls: 0 };
  const cuts = new Set<() => void>();
  let connections = 0;
  let seq = 0;

  const inject = (request: ProxiedRequest): ProxyFault | undefined => {
    const fault = plan?.(request);
    if (!fault) return undefined;
    injected.push({ request, fault });
    if (fault.kind === "cut") counts.cuts++;
    else if (fault.kind === "drop_reply") counts.droppedReplies++;
    else if (fault.kind === "delay_reply") counts.delayedReplies++;
    else counts.stalls++;
    return fault;
  };

  function relay(client: Socket): void {
    const connection = ++connections;
    const server = connect(options.target.port, options.target.host);
    let closed = false;
    const cut = () => {
      if (closed) return;
      closed = true;
      cuts.delete(cut);
      client.destroy();
      server.destroy();
    };
    cuts.add(cut);
    /** Replies leave in order: a held one holds those behind it. */
    let sending: Promise<void> = Promise.resolve();
    client.on("error", cut);
    server.on("error", cut);
    client.on("close", cut);
    server.on("close", () => {
      // The server hung up (a terminated backend, a shutdown): what it sent reaches the client first.
      void sending.then(() => {
        if (closed) return;
        closed = true;
        cuts.delete(cut);
        client.end();
      });
    });

    // ---- client → server: requests, each decided at its sync point
    let inbound: Buffer = Buffer.alloc(0);
    let started = false;
    let passThrough = false;
    let index = 0;
    let group: Buffer[] = [];
    let groupSql: string | undefined;
    let inTransaction = 0;
    /** Statements prepared on this connection, by name, so a Bind of one names its SQL. */
    const prepared = new Map<string, string>();
    /** The requests sent and not answered yet, with the fault each met. */
    const awaiting: { readonly request: ProxiedRequest; readonly fault: ProxyFault | undefined }[] = [];
    /** Bytes the server answers with one byte each (SSLRequest, GSSENCRequest: 'N' or 'S'). */
    let singleBytes = 0;

    const request = (kind: ProxiedKind, sql: string): ProxiedRequest => {
      const r = { connection, index: ++index, seq: ++seq, kind, sql, inTransaction };
      if (kind === "begin") inTransaction = 1;
      else if (kind === "commit" || kind === "rollback") inTransaction = 0;
      else if (inTransaction > 0) inTransaction++;
      return r;
    };

    /** Ends a request at its sync point: cut before it leaves, or send it and remember its fault for the reply. */
    const decide = (r: ProxiedRequest, bytes: Buffer): boolean => {
      const fault = inject(r);
      if (fault?.kind === "cut") {
        cut();
        return false;
      }
      awaiting.push({ request: r, fault });
      server.write(bytes);
      return true;
    };

    client.on("data", (chunk: Buffer) => {
      if (closed) return;
      if (passThrough) return void server.write(chunk);
      inbound = inbound.length === 0 ? chunk : Buffer.concat([inbound, chunk]);
      for (;;) {
        if (!started) {
          if (inbound.length < 8) return;
          const length = inbound.readInt32BE(0);
          if (inbound.length < length) return;
          const message = inbound.subarray(0, length);
          inbound = inbound.subarray(length);
          const code = message.readInt32BE(4);
          if (code === SSL_REQUEST || code === GSSENC_REQUEST) {
            singleBytes++;
            server.write(message);
            continue;
          }
          if (code === CANCEL_REQUEST) {
            passThrough = true;
            server.write(Buffer.concat([message, inbound]));
            return;
          }
          started = true;
          if (!decide(request("startup", ""), message)) return;
          continue;
        }
        if (inbound.length < 5) return;
        const length = inbound.readInt32BE(1) + 1;
        if (inbound.length < length) return;
        const message = inbound.subarray(0, length);
        inbound = inbound.subarray(length);
        const type = String.fromCharCode(message[0] as number);
        if (type === "p" || type === "X" || type === "H" || type === "d" || type === "c" || type === "f") {
          // Authentication answers, Terminate, Flush and COPY data are no request of their own.
          server.write(message);
          continue;
        }
        group.push(message);
        if (type === "P") {
          const [name, next] = cstring(message, 5);
          const [sql] = cstring(message, next);
          if (name !== "") prepared.set(name, sql);
          groupSql ??= sql;
        } else if (type === "B") {
          const [, next] = cstring(message, 5);
          const [statement] = cstring(message, next);
          groupSql ??= prepared.get(statement) ?? `(prepared statement ${statement})`;
        }
        if (type !== "Q" && type !== "S" && type !== "F") continue;
        const sql = type === "Q" ? cstring(message, 5)[0] : groupSql ?? "";
        const bytes = Buffer.concat(group);
        group = [];
        groupSql = undefined;
        if (!decide(request(kindOf(sql), sql), bytes)) return;
      }
    });

    // ---- server → client: replies, each delivered (or not) as its request's fault says
    let outbound: Buffer = Buffer.alloc(0);
    let reply: Buffer[] = [];
    const send = (bytes: Buffer, fault: ProxyFault | undefined) => {
      sending = sending.then(async () => {
        if (closed) return;
        if (fault?.kind === "delay_reply" || fault?.kind === "stall") await new Promise((resolve) => setTimeout(resolve, fault.ms));
        if (closed) return;
        if (fault?.kind === "drop_reply" || fault?.kind === "stall") return cut();
        client.write(bytes);
      });
    };

    server.on("data", (chunk: Buffer) => {
      if (closed) return;
      if (passThrough) return void client.write(chunk);
      outbound = outbound.length === 0 ? chunk : Buffer.concat([outbound, chunk]);
      for (;;) {
        if (singleBytes > 0) {
          if (outbound.length < 1) return;
          singleBytes--;
          const answer = outbound.subarray(0, 1);
          outbound = outbound.subarray(1);
          if (answer.toString() === "S") {
            // TLS from here on: nothing more can be read, so everything passes as it is.
            passThrough = true;
            send(Buffer.concat([answer, outbound]), undefined);
            return;
          }
          send(answer, undefined);
          continue;
        }
        if (outbound.length < 5) return;
        const length = outbound.readInt32BE(1) + 1;
        if (outbound.length < length) return;
        const message = outbound.subarray(0, length);
        outbound = outbound.subarray(length);
        const head = awaiting[0];
        if (head?.request.kind === "startup") {
          // The startup's reply passes at once: the client may have to answer inside it (authentication).
          send(message, undefined);
          if (message[0] === 0x5a) awaiting.shift();
          continue;
        }
        reply.push(message);
        if (message[0] !== 0x5a) continue; // 'Z' ReadyForQuery ends a reply
        awaiting.shift();
        const bytes = Buffer.concat(reply);
        reply = [];
        send(bytes, head?.fault);
      }
    });
  }

  const listener: Server = createServer(relay);
  await new Promise<void>((resolve, reject) => {
    listener.once("error", reject);
    listener.listen(0, "127.0.0.1", () => resolve());
  });
  const address = listener.address();
  if (address === null || typeof address === "string") throw new Error("the PostgreSQL proxy has no TCP address");
  const port = address.port;

  return {
    port,
    through(connectionString) {
      const url = new URL(connectionString);
      url.hostname = "127.0.0.1";
      url.port = String(port);
      return url.toString();
    },
    setPlan(next) {
      plan = next;
    },
    injected,
    counts: () => ({ ...counts }),
    cutAll() {
      for (const cut of [...cuts]) cut();
    },
    open: () => cuts.size,
    async close() {
      for (const cut of [...cuts]) cut();
      await new Promise<void>((resolve) => listener.close(() => resolve()));
    },
  };
}

/** How often a seeded plan injects each fault, per request, and how many it injects at most. */
export interface ProxyFaultRates {
  /** Cut the connection before the request reaches the server. */
  readonly cut: number;
  /** Drop the reply to a COMMIT (the transaction committed) and cut the connection. */
  readonly dropCommitReply: number;
  /** Drop the reply to any other request the server ran (an autocommitted write commits too) and cut. */
  readonly dropReply: number;
  /** Hold a reply back for `delayMs`, then deliver it. */
  readonly delay: number;
  /** Hold a reply back for `delayMs`, then cut the connection. */
  readonly stall: number;
  readonly delayMs: readonly [min: number, max: number];
  /** At most this many faults in all. */
  readonly budget: number;
}

export const DEFAULT_PROXY_RATES: ProxyFaultRates = {
  cut: 0.02, dropCommitReply: 0.25, dropReply: 0.02, delay: 0.02, stall: 0.01, delayMs: [1, 20], budget: 3,
};

/**
 * A plan that decides each request's fault from `rng`, one decision per request in the order they
 * reach the proxy: the same requests in the same order meet the same faults.
 */
export function seededProxyPlan(rng: Rng, rates: ProxyFaultRates = DEFAULT_PROXY_RATES): ProxyPlan {
  let left = rates.budget;
  return (request) => {
    // Drawn whatever the budget, so one decision's outcome never shifts the draws of the next.
    const roll = rng.next();
    const ms = rng.between(...rates.delayMs);
    if (left <= 0) return undefined;
    const drop = request.kind === "commit" ? rates.dropCommitReply : request.kind === "startup" ? 0 : rates.dropReply;
    const replied = request.kind !== "startup";
    let at = 0;
    const fault: ProxyFault | undefined =
      roll < (at += rates.cut) ? { kind: "cut" }
        : roll < (at += drop) ? { kind: "drop_reply" }
          : replied && roll < (at += rates.delay) ? { kind: "delay_reply", ms }
            : replied && roll < (at += rates.stall) ? { kind: "stall", ms } : undefined;
    if (fault) left--;
    return fault;
  };
}
