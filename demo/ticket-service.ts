/**
 * A simulated ticketing service: a real HTTP server on 127.0.0.1 that counts every ticket it
 * actually creates. That count is the ground truth the crash demo and tests check against.
 *
 *   POST /tickets            {customer, title} → 201 {id, customer, title}; creates a ticket
 *   GET  /tickets?key=K      → {tickets: [...]} made with Idempotency-Key K (what a probe asks)
 *   GET  /tickets            → {tickets: [...]} all of them
 *
 * With `honourKeys`, a POST repeating an Idempotency-Key returns the first ticket instead of
 * creating another; without it (the default, like most internal services) every POST creates one.
 */
import { createServer, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";

export interface Ticket {
  readonly id: string;
  readonly customer: string;
  readonly title: string;
  readonly idempotencyKey: string | null;
}

export interface TicketService {
  readonly url: string;
  /** Every ticket created, in order. */
  readonly tickets: readonly Ticket[];
  close(): Promise<void>;
}

export async function startTicketService(options: { honourKeys?: boolean } = {}): Promise<TicketService> {
  const tickets: Ticket[] = [];
  const server: Server = createServer((req, res) => {
    const send = (status: number, body: unknown) => {
      res.writeHead(status, { "content-type": "application/json" });
      res.end(JSON.stringify(body));
    };
    const url = new URL(req.url ?? "/", "http://127.0.0.1");
    if (url.pathname !== "/tickets") return send(404, { error: "not found" });
    if (req.method === "GET") {
      const key = url.searchParams.get("key");
      return send(200, { tickets: key === null ? tickets : tickets.filter((t) => t.idempotencyKey === key) });
    }
    if (req.method !== "POST") return send(405, { error: "method not allowed" });
    readJson(req).then((body) => {
      const { customer, title } = (body ?? {}) as { customer?: unknown; title?: unknown };
      if (typeof customer !== "string" || typeof title !== "string") return send(400, { error: "customer and title are required strings" });
      const header = req.headers["idempotency-key"];
      const key = typeof header === "string" && header !== "" ? header : null;
      const earlier = key === null ? undefined : tickets.find((t) => t.idempotencyKey === key);
      if (options.honourKeys && earlier) return send(200, earlier);
      const ticket: Ticket = { id: `T-${tickets.length + 1}`, customer, title, idempotencyKey: key };
      tickets.push(ticket);
      send(201, ticket);
    }, () => send(400, { error: "body must be JSON" }));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    tickets,
    close: () => new Promise<void>((resolve, reject) => {
      server.closeAllConnections();
      server.close((err) => (err ? reject(err) : resolve()));
    }),
  };
}

async function readJson(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return JSON.parse(Buffer.concat(chunks).toString("utf8"));
}
