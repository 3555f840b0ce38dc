/**
 * Downstream receipts (webhooks) for reconciliation: a node:http / Express endpoint that takes
 * signed receipts from a downstream system ("I made record ch_42 with idempotency key K") and
 * confirms the matching ledger record or opens a finding (docs/reconciliation.md).
 *
 * Signature (as Stripe signs its webhooks): the header `Effectgate-Signature: t=<unix seconds>,v1=<hex>`
 * where `<hex>` is HMAC-SHA256(secret, `${t}.${raw body}`). Several `v1=` entries may be sent,
 * and several secrets accepted, so a secret can be rotated without dropping receipts.
 *
 *   request                                     answer
 *   not POST                                    405 method_not_allowed
 *   no signature header                         401 signature_missing
 *   header unreadable, or no v1 matches         401 signature_invalid (compared in constant time)
 *   t further than `toleranceSec` from now      401 signature_expired (checked after the signature, so t cannot be forged)
 *   body over `maxBodyBytes`                    413 body_too_large (the rest is read up to 1 MiB, else the connection closes)
 *   body nested deeper than 1000 levels         400 json_too_deep
 *   body not JSON, or not a receipt             400 invalid_json / invalid_receipt
 *   receipt for a tool not in `tools`           422 unknown_tool
 *   receipt id seen with other content          409 receipt_id_reused (nothing changes)
 *   receipt id seen before                      200 {duplicate: true, outcome} (nothing changes)
 *   new receipt                                 200 {duplicate: false, outcome: {result, findings, ledgerState}}
 *   ledger unavailable                          503 (the sender retries; nothing was half-applied that a retry would not finish)
 *
 * The sender leaving mid-body gets nothing (nothing was applied); a failure of a hook or of the
 * endpoint itself is a 500. Bodies are never logged nor passed to `onError`.
 */
import { readBodyLimited } from "../http/body.js";
import { createHmac, timingSafeEqual } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import { EffectgateError, isEffectgateError } from "../core/errors.js";
import type { Tool } from "../core/tool.js";
import type { Json } from "../core/json.js";
import type { Stores } from "../contracts/stores.js";
import type { Comparison } from "../reconcile/compare.js";
import { applyReceipt } from "../reconcile/receipt.js";
import type { ReceiptInput } from "../contracts/findings.js";
import type { DownstreamRecord } from "../core/hooks.js";
import { jsonNestsDeeperThan, MAX_JSON_DEPTH } from "../core/json-depth.js";

export const DEFAULT_SIGNATURE_HEADER = "Effectgate-Signature";
/** Five minutes, as Stripe's libraries default to. */
export const DEFAULT_RECEIPT_TOLERANCE_SEC = 300;
export const DEFAULT_RECEIPT_MAX_BODY_BYTES = 256 * 1024;

export interface ReceiptEndpointOptions {
  /** The ledger whose records receipts confirm; its reconcile store keeps receipts and findings. */
  readonly ledger: Stores;
  /** The shared secret, or several while one is being rotated. Required, never empty. */
  readonly secret: string | readonly string[];
  /** Largest accepted distance, in seconds, between the signature's timestamp and now (default 300). */
  readonly toleranceSec?: number;
  /** The signature header (default "Effectgate-Signature"). */
  readonly header?: string;
  /**
   * The tools receipts may name. Given, a receipt for another tool is refused (422) and a
   * tool's `reconcileFields` / `compareDownstream` are applied; not given, any tool name is
   * accepted and no fields are compared.
   */
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  readonly tools?: readonly Tool<any, any>[];
  /**
   * Maps the sender's JSON payload to a receipt (default: the payload is one already:
   * `{id, tool, record: {ref, key, tenant?, at?, fields?}}`). Throw to refuse it (400).
   */
  readonly parse?: (payload: unknown) => ReceiptInput;
  /** Largest body read (default 256 KiB). */
  readonly maxBodyBytes?: number;
  /** Clock for the replay window, epoch ms (default Date.now). */
  readonly now?: () => number;
  /** Failures the sender does not see in detail (the ledger down, a bug). Never given a body. */
  readonly onError?: (error: unknown, context: { readonly phase: "apply"; readonly receipt: string }) => void;
}

/** The signature header value for `body`, as a sender computes it (also for tests). */
export function signReceipt(body: string | Buffer, secret: string, timestampSec: number = Math.floor(Date.now() / 1000)): string {
  return `t=${timestampSec},v1=${hmacHex(secret, timestampSec, body)}`;
}

function hmacHex(secret: string, t: number | string, body: string | Buffer): string {
  return createHmac("sha256", secret).update(`${t}.`).update(body).digest("hex");
}

export type SignatureCheck =
  | { readonly ok: true; readonly timestampSec: number }
  | { readonly ok: false; readonly code: "signature_missing" | "signature_invalid" | "signature_expired"; readonly detail: string };

/** Checks a `t=…,v1=…` header against the raw body: signature first (constant time), then the replay window. */
export function verifyReceiptSignature(
  body: Buffer,
  header: string | undefined,
  secrets: readonly string[],
  options: { readonly toleranceSec: number; readonly nowMs: number },
): SignatureCheck {
  if (header === undefined || header.trim() === "") return { ok: false, code: "signature_missing", detail: "the receipt is not signed" };
  let t: string | undefined;
  const given: Buffer[] = [];
  for (const part of header.split(",")) {
    const at = part.indexOf("=");
    if (at < 0) continue;
    const name = part.slice(0, at).trim();
    const value = part.slice(at + 1).trim();
    if (name === "t") t = value;
    else if (name === "v1" && /^[0-9a-f]{64}$/i.test(value)) given.push(Buffer.from(value, "hex"));
  }
  if (t === undefined || !/^\d{1,12}$/.test(t) || given.length === 0) {
    return { ok: false, code: "signature_invalid", detail: "the signature header must read t=<unix seconds>,v1=<64 hex digits>" };
  }
  let matched = false;
  for (const secret of secrets) {
    const expected = Buffer.from(hmacHex(secret, t, body), "hex");
    // Every candidate is compared (no early exit), each in constant time.
    for (const candidate of given) if (timingSafeEqual(candidate, expected)) matched = true;
  }
  if (!matched) return { ok: false, code: "signature_invalid", detail: "no signature matches the body" };
  const timestampSec = Number(t);
  if (Math.abs(options.nowMs / 1000 - timestampSec) > options.toleranceSec) {
    return { ok: false, code: "signature_expired", detail: `the signature's timestamp is more than ${options.toleranceSec} s from now: a stale or replayed receipt` };
  }
  return { ok: true, timestampSec };
}

/** The default payload: `{id, tool, record: {ref, key, tenant?, at?, fields?}}`. */
export function parseReceipt(payload: unknown): ReceiptInput {
  const fail = (what: string): never => {
    throw new TypeError(`a receipt is {"id", "tool", "record": {"ref", "key", "tenant"?, "at"?, "fields"?}}: ${what}`);
  };
  if (typeof payload !== "object" || payload === null || Array.isArray(payload)) fail("the body is not an object");
  const p = payload as Record<string, unknown>;
  if (typeof p.id !== "string" || p.id === "" || p.id.length > 255) fail("id must be a string of 1–255 characters");
  if (typeof p.tool !== "string" || p.tool === "") fail("tool must be a non-empty string");
  const r = p.record as Record<string, unknown> | null | undefined;
  if (typeof r !== "object" || r === null || Array.isArray(r)) fail("record must be an object");
  const rec = r as Record<string, unknown>;
  if (typeof rec.ref !== "string" || rec.ref === "") fail("record.ref must be a non-empty string");
  if (typeof rec.key !== "string" || rec.key === "") fail("record.key must be a non-empty string");
  if (rec.tenant !== undefined && (typeof rec.tenant !== "string" || rec.tenant === "")) fail("record.tenant must be a non-empty string when given");
  if (rec.at !== undefined && !Number.isFinite(rec.at)) fail("record.at must be epoch milliseconds when given");
  if (rec.fields !== undefined && (typeof rec.fields !== "object" || rec.fields === null || Array.isArray(rec.fields))) fail("record.fields must be an object when given");
  const record: DownstreamRecord = {
    ref: rec.ref as string,
    key: rec.key as string,
    ...(rec.tenant !== undefined ? { tenant: rec.tenant as string } : {}),
    ...(rec.at !== undefined ? { at: rec.at as number } : {}),
    ...(rec.fields !== undefined ? { fields: rec.fields as { [field: string]: Json } } : {}),
  };
  return { id: p.id as string, tool: p.tool as string, record };
}

/**
 * The receipts endpoint as a node:http handler (also an Express route handler: mount it before
 * any body parser, or on a route without one: the signature is over the raw bytes).
 *
 * ```ts
 * const receipts = receiptsEndpoint({ ledger, secret: process.env.RECEIPT_SECRET!, tools });
 * createServer((req, res) => void receipts(req, res));
 * ```
 *
 * The returned promise never rejects, whatever the request (or a hook) does.
 */
export function receiptsEndpoint(options: ReceiptEndpointOptions): (req: IncomingMessage, res: ServerResponse) => Promise<void> {
  const secrets = typeof options.secret === "string" ? [options.secret] : [...options.secret];
  if (secrets.length === 0 || secrets.some((s) => typeof s !== "string" || s === "")) {
    throw new EffectgateError("EG_BAD_OPTION", "receiptsEndpoint needs a non-empty secret (or a list of them): the shared secret the sender signs receipts with");
  }
  const toleranceSec = options.toleranceSec ?? DEFAULT_RECEIPT_TOLERANCE_SEC;
  const maxBodyBytes = options.maxBodyBytes ?? DEFAULT_RECEIPT_MAX_BODY_BYTES;
  const header = (options.header ?? DEFAULT_SIGNATURE_HEADER).toLowerCase();
  const now = options.now ?? Date.now;
  const parse = options.parse ?? parseReceipt;
  const tools = options.tools && new Map<string, Comparison>(options.tools.map((t) => [t.name, t as Comparison]));

  async function answer(req: IncomingMessage, res: ServerResponse): Promise<void> {
    if ((req.method ?? "GET").toUpperCase() !== "POST") {
      res.setHeader("allow", "POST");
      return send(res, problem(405, "method_not_allowed", "receipts are POSTed"));
    }
    if (req.readableEnded && !Buffer.isBuffer((req as { rawBody?: unknown }).rawBody)) {
      return send(res, problem(400, "body_already_read", "a body parser read the body before the receipts endpoint: mount it before any parser (the signature is over the raw bytes)"));
    }
    let body: Buffer;
    if (req.readableEnded) {
      body = (req as { rawBody?: Buffer }).rawBody ?? Buffer.alloc(0);
    } else {
      const read = await readBodyLimited(req, maxBodyBytes);
      // The sender went away mid-body: nothing was applied, nobody to answer.
      if (read.kind === "gone") return;
      if (read.kind === "too_large") return send(res, tooLarge(), { close: read.close });
      body = read.bytes;
    }
    if (body.length > maxBodyBytes) return send(res, tooLarge());
    const values = req.headersDistinct[header];
    if (values !== undefined && values.length > 1) return send(res, problem(401, "signature_invalid", `send one ${options.header ?? DEFAULT_SIGNATURE_HEADER} header`));
    const check = verifyReceiptSignature(body, values?.[0], secrets, { toleranceSec, nowMs: now() });
    if (!check.ok) return send(res, problem(401, check.code, check.detail));
    const text = body.toString("utf8");
    // Checked before parsing: what applies a receipt walks its fields recursively (and a store writes them with JSON.stringify).
    if (jsonNestsDeeperThan(text)) {
      return send(res, problem(400, "json_too_deep", `the body nests arrays and objects deeper than ${MAX_JSON_DEPTH} levels`));
    }
    let payload: unknown;
    try {
      payload = JSON.parse(text);
    } catch {
      return send(res, problem(400, "invalid_json", "the body is not valid JSON"));
    }
    let receipt: ReceiptInput;
    try {
      receipt = parse(payload);
    } catch (err) {
      return send(res, problem(400, "invalid_receipt", err instanceof Error ? err.message : "the body is not a receipt"));
    }
    const comparison = tools ? tools.get(receipt.tool) : {};
    if (!comparison) return send(res, problem(422, "unknown_tool", `no tool named ${JSON.stringify(receipt.tool)} takes receipts here`));
    let applied;
    try {
      applied = await applyReceipt(options.ledger, comparison, receipt);
    } catch (err) {
      report(err, receipt.id);
      const unavailable = isEffectgateError(err, "EG_LEDGER_UNAVAILABLE");
      return send(res, problem(unavailable ? 503 : 500, unavailable ? "ledger_unavailable" : "receipt_failed",
        "the receipt could not be applied; send it again (applying it twice changes nothing)"), { retryAfter: unavailable });
    }
    switch (applied.kind) {
      case "conflict":
        return send(res, problem(409, "receipt_id_reused", `receipt ${receipt.id} was received before with other content; nothing was changed`));
      case "duplicate":
        return send(res, json(200, { receipt: receipt.id, duplicate: true, outcome: applied.outcome }));
      case "applied":
        return send(res, json(200, { receipt: receipt.id, duplicate: false, outcome: applied.outcome as unknown as Json }));
    }
  }

  const tooLarge = () => problem(413, "body_too_large", `the body is larger than ${maxBodyBytes} bytes`);
  const report = (err: unknown, receipt: string) => {
    try {
      options.onError?.(err, { phase: "apply", receipt });
    } catch {
      // A failing error hook must not change the answer.
    }
  };

  return async function receipts(req, res) {
    try {
      await answer(req, res);
    } catch (err) {
      // A failure of a hook (`parse` aside, which answers 400) or of our own: a 500, never a rejection nor a silent close.
      report(err, "?");
      if (!res.headersSent && !res.destroyed) send(res, problem(500, "receipt_failed", "the receipt could not be handled; send it again (applying it twice changes nothing)"));
      else res.destroy();
    }
  };
}

interface Reply {
  readonly status: number;
  readonly contentType: string;
  readonly body: string;
}

const TITLES: Readonly<Record<number, string>> = {
  400: "Bad Request", 401: "Unauthorized", 405: "Method Not Allowed", 409: "Conflict", 413: "Content Too Large",
  422: "Unprocessable Content", 500: "Internal Server Error", 503: "Service Unavailable",
};

function problem(status: number, code: string, detail: string): Reply {
  return { status, contentType: "application/problem+json", body: JSON.stringify({ type: "about:blank", title: TITLES[status] ?? "Error", status, code, detail }) };
}

function json(status: number, value: Json): Reply {
  return { status, contentType: "application/json", body: JSON.stringify(value) };
}

function send(res: ServerResponse, reply: Reply, options: { readonly retryAfter?: boolean; readonly close?: boolean } = {}): void {
  if (res.headersSent || res.destroyed) return;
  res.statusCode = reply.status;
  res.setHeader("content-type", reply.contentType);
  if (options.retryAfter === true) res.setHeader("retry-after", "1");
  // The rest of the body will not be read: this connection carries no other request.
  if (options.close === true) res.setHeader("connection", "close");
  res.end(reply.body);
}
