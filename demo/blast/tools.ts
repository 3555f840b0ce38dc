/**
 * The agent's tools: which downstream each calls, its effect class, its input schema, and the
 * plain HTTP call every protection level makes. Levels differ in what they wrap around
 * `callDownstream` (retries, keys, a ledger), never in the call itself.
 */
import { z } from "zod";
import { type EffectClass, type Json, OutcomeUnknown, type ProbeResult, ToolRejected } from "effectgate";
import type { Collection, ServiceName } from "./services.js";
import type { ToolName } from "./workload.js";

export type Urls = Readonly<Record<ServiceName, string>>;

const customer = z.string().regex(/^cus_\d{4}$/, "a customer id such as cus_0042");
const reference = z.string().min(1);

export interface ToolInfo {
  readonly name: ToolName;
  readonly service: ServiceName;
  readonly effect: EffectClass;
  readonly description: string;
  /** POST path of an effect (reads: none). */
  readonly path?: string;
  readonly collection?: Collection;
  readonly schema: z.ZodType<Record<string, unknown>>;
}

export const TOOLS: Readonly<Record<ToolName, ToolInfo>> = {
  lookup_customer: {
    name: "lookup_customer", service: "ticketing", effect: "read", description: "Look a customer up by id.",
    schema: z.object({ customer, reference }),
  },
  create_ticket: {
    name: "create_ticket", service: "ticketing", effect: "write", path: "/tickets", collection: "tickets", description: "Open a support ticket.",
    schema: z.object({ customer, subject: z.string().min(1).max(200), priority: z.enum(["low", "normal", "high", "urgent"]), reference }),
  },
  send_email: {
    name: "send_email", service: "mail", effect: "write", path: "/emails", collection: "emails", description: "Send an e-mail to a customer.",
    schema: z.object({ to: z.email(), subject: z.string().min(1), body: z.string().min(1), reference }),
  },
  delete_draft: {
    name: "delete_draft", service: "mail", effect: "destructive", path: "/drafts/delete", collection: "drafts", description: "Delete an e-mail draft for good.",
    schema: z.object({ draft: z.string().regex(/^draft_\d{4}_\d+$/), reference }),
  },
  charge_card: {
    name: "charge_card", service: "payments", effect: "write", path: "/charges", collection: "charges", description: "Charge the customer's card on file.",
    schema: z.object({ customer, amount: z.number().positive().max(2000), currency: z.enum(["EUR", "USD"]), reference }),
  },
  refund_charge: {
    name: "refund_charge", service: "payments", effect: "write", path: "/refunds", collection: "refunds", description: "Refund a charge (the undo of charge_card).",
    schema: z.object({ charge: reference, amount: z.number().positive(), reference }),
  },
  reserve_stock: {
    name: "reserve_stock", service: "storage", effect: "write", path: "/reservations", collection: "reservations", description: "Reserve stock for an order.",
    schema: z.object({ order: z.string().min(1), sku: z.string().min(1), quantity: z.number().int().min(1).max(10), reference }),
  },
  release_stock: {
    name: "release_stock", service: "storage", effect: "write", path: "/releases", collection: "releases", description: "Release an order's reservation (the undo of reserve_stock).",
    schema: z.object({ order: z.string().min(1), reference }),
  },
  ship_order: {
    name: "ship_order", service: "storage", effect: "write", path: "/shipments", collection: "shipments", description: "Ship a reserved order.",
    schema: z.object({ order: z.string().min(1), address: z.string().min(1), reference }),
  },
};

export function isToolName(name: string): name is ToolName {
  return Object.hasOwn(TOOLS, name);
}

/** The downstream answered with an HTTP error status. */
export class DownstreamError extends Error {
  override readonly name = "DownstreamError";
  constructor(message: string, readonly status: number) {
    super(message);
  }
}

export interface CallOptions {
  /** Sent as Idempotency-Key when given. */
  readonly key?: string;
  readonly signal?: AbortSignal;
}

/**
 * One plain HTTP call of a tool. Throws what the gate's classifier understands: `ToolRejected`
 * for a 4xx refusal (nothing happened), `OutcomeUnknown` for a 409 "this key is still being
 * processed", `DownstreamError` with the status for a 5xx, and fetch's own errors (connection
 * reset, abort) as they are.
 */
export async function callDownstream(urls: Urls, tool: ToolName, input: Readonly<Record<string, unknown>>, options: CallOptions = {}): Promise<Json> {
  const info = TOOLS[tool];
  const base = urls[info.service];
  let res: Response;
  if (info.effect === "read") {
    const ref = typeof input.reference === "string" ? `?reference=${encodeURIComponent(input.reference)}` : "";
    res = await fetch(`${base}/customers/${encodeURIComponent(String(input.customer))}${ref}`, { signal: options.signal ?? null });
  } else {
    res = await fetch(`${base}${info.path ?? ""}`, {
      method: "POST",
      headers: { "content-type": "application/json", ...(options.key === undefined ? {} : { "idempotency-key": options.key }) },
      body: JSON.stringify(input),
      signal: options.signal ?? null,
    });
  }
  const text = await res.text();
  if (res.ok) return JSON.parse(text) as Json;
  if (res.status === 409 && text.includes("idempotency_key_in_use")) throw new OutcomeUnknown(`${info.service} is still processing this key`);
  if (res.status >= 400 && res.status < 500) throw Object.assign(new ToolRejected(`${info.service} refused ${tool} (${res.status}): ${text}`), { status: res.status });
  throw new DownstreamError(`${info.service} answered ${res.status}: ${text}`, res.status);
}

/**
 * How a probe asks "did the call with this key happen?", where the downstream can answer:
 * by key on ticketing, payments and storage; a draft deletion by the draft's state. Sent
 * e-mails cannot be looked up, so send_email has no probe.
 */
export function probeFor(urls: Urls, tool: ToolName): ((input: Readonly<Record<string, unknown>>, key: string) => Promise<ProbeResult<Json>>) | undefined {
  const info = TOOLS[tool];
  if (tool === "delete_draft") {
    return async (input) => {
      const res = await fetch(`${urls.mail}/drafts/${encodeURIComponent(String(input.draft))}`);
      if (!res.ok) throw new Error(`mail answered ${res.status}`);
      const { exists } = (await res.json()) as { exists: boolean };
      return exists ? { status: "absent" } : { status: "done", result: { deleted: String(input.draft) } };
    };
  }
  if (info.effect === "read" || info.service === "mail" || info.path === undefined) return undefined;
  return async (_input, key) => {
    const res = await fetch(`${urls[info.service]}${info.path ?? ""}?key=${encodeURIComponent(key)}`);
    if (!res.ok) throw new Error(`${info.service} lookup answered ${res.status}`);
    const found = (await res.json()) as { status: "done"; result: Json } | { status: "running" } | { status: "absent" };
    return found;
  };
}

/**
 * What a reconciliation `lookup` asks: the downstream's records made in a time window, each with
 * the key it was made with (an empty key when the request carried none). Not for mail.
 */
export async function listByWindow(urls: Urls, tool: ToolName, window: { since: number; until: number }): Promise<{ ref: string; key: string; at: number; fields: { [field: string]: Json } }[]> {
  const info = TOOLS[tool];
  if (info.service === "mail" || info.path === undefined) throw new Error(`${tool}: ${info.service} cannot list its records`);
  const res = await fetch(`${urls[info.service]}${info.path}?since=${window.since}&until=${window.until}`);
  if (!res.ok) throw new Error(`${info.service} listing answered ${res.status}`);
  const { effects } = (await res.json()) as { effects: { id: string; key: string | null; at: number; fields: { [field: string]: Json } }[] };
  return effects.map((e) => ({ ref: e.id, key: e.key ?? "", at: e.at, fields: e.fields }));
}
