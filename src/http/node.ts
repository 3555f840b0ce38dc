/**
 * The Connect-style adapter: `(req, res, next)` for node:http and Express. It reads the
 * request, asks the core (`./core.ts`) what to do, and captures the handler's response by
 * wrapping `res.writeHead` / `res.write` / `res.end`: the whole response is buffered, stored in
 * the ledger, and only then sent with the `end` that was in place when the middleware ran.
 */
import { readBodyLimited } from "./body.js";
import type { IncomingMessage, OutgoingHttpHeader, OutgoingHttpHeaders, ServerResponse } from "node:http";
import {
  bodyFromBytes, bodyTooLarge, clientIdFailed, createIdempotencyCore, handlerFailed, invalidJson, jsonTooDeep, middlewareFailed, requestTargetInvalid,
  storableHeaders, type FingerprintBody, type HttpResponse, type IdempotencyCore, type IdempotencyOptions, type KeyCheck,
} from "./core.js";
import { requestTargetUrl } from "../core/local-server.js";
import { canonicalValueText, isTooDeep } from "./canonical-json.js";

/** What the middleware adds to the request once it has read the body itself. */
export interface IdempotentRequestFields {
  /** The request body as received, when the middleware read it (no body parser ran before it). */
  rawBody?: Buffer;
  /** The parsed body: set by a body parser that ran before, or by the middleware for JSON content. */
  body?: unknown;
}

/** Connect's `next`: for node:http, pass a function that runs your handler (it may return a promise). */
export type NextFunction = (err?: unknown) => unknown;

export type ConnectMiddleware<Req extends IncomingMessage, Res extends ServerResponse> = (req: Req, res: Res, next: NextFunction) => Promise<void>;

/**
 * An `Idempotency-Key` middleware for node:http and Express (semantics: see `./index.ts` and
 * docs/server.md). With Express, mount it after your body parser; with node:http, call it with a
 * `next` that runs your handler:
 *
 * ```ts
 * const idempotency = idempotencyMiddleware({ ledger: sqliteLedger("idempotency.db") });
 * http.createServer((req, res) => void idempotency(req, res, () => handle(req, res)));
 * ```
 *
 * The returned promise never rejects, except with what a pass-through `next` throws (the
 * middleware adds nothing to a request it does not handle): a request it cannot read (a
 * request-target such as `http://[`, a key header sent twice, a body cut off) gets a 4xx or, when the
 * client is gone, nothing; a failure of its own, or of a `required` / `clientId` hook, a 500.
 */
export function idempotencyMiddleware<Req extends IncomingMessage = IncomingMessage, Res extends ServerResponse = ServerResponse>(
  options: IdempotencyOptions<Req>,
): ConnectMiddleware<Req, Res> {
  const core = createIdempotencyCore<Req>(options, { authorization: (req) => req.headers.authorization });
  const headerLower = core.header.toLowerCase();
  const fenceLower = core.fenceHeader.toLowerCase();

  async function handle(req: Req, res: Res, next: NextFunction, check: Extract<KeyCheck, { kind: "keyed" }>, method: string): Promise<void> {
    const url = requestTargetUrl(req.url);
    if (url === undefined) return send(res, requestTargetInvalid());
    const read = await readBody(req, core.maxBodyBytes);
    // The client went away while sending its body: nothing was claimed, nobody to answer.
    if ("gone" in read) return;
    if ("reject" in read) return send(res, read.reject);
    const body: FingerprintBody = read.body;
    let tenant: string;
    try {
      tenant = await core.tenantOf(req);
    } catch (err) {
      core.report(err, { phase: "claim", tenant: "?", key: check.key });
      return send(res, clientIdFailed());
    }
    const begun = await core.begin({
      key: check.key, tenant, method, path: url.pathname + url.search, pathname: url.pathname, body,
      ...(check.fence === undefined ? {} : { fence: check.fence }),
    });
    if (begun.kind === "respond") return send(res, begun.response);
    if (res.destroyed || res.socket?.destroyed === true) {
      // The client left while the key was being claimed: run nothing, let a retry have the key.
      await core.abandon(begun.claim);
      return;
    }
    await runHandler(core, begun.claim, res, next);
  }

  return async function idempotency(req, res, next) {
    const method = (req.method ?? "GET").toUpperCase();
    let check: KeyCheck;
    try {
      // Every line of a header joined by ", ", as Fetch joins them: the Hono adapter sees the same text.
      check = core.checkKey(req, method, req.headersDistinct[headerLower]?.join(", "), req.headersDistinct[fenceLower]?.join(", "));
    } catch (err) {
      core.report(err, { phase: "claim", tenant: "?", key: "?" });
      return send(res, middlewareFailed());
    }
    if (check.kind === "pass") {
      await next();
      return;
    }
    if (check.kind === "reject") return send(res, check.response);
    try {
      await handle(req, res, next, check, method);
    } catch (err) {
      // Never a rejection: mounted as `void idempotency(...)`, it would end the process.
      core.report(err, { phase: "claim", tenant: "?", key: check.key });
      if (!res.headersSent && !res.destroyed) send(res, middlewareFailed());
      else res.destroy();
    }
  };
}

type Claim = Extract<Awaited<ReturnType<IdempotencyCore<unknown>["begin"]>>, { kind: "run" }>["claim"];

/**
 * Runs the handler with the response captured. The claim ends in exactly one of:
 * - the handler ends the response → stored (or released when not storable), then sent;
 * - the handler throws or rejects before ending it → released, 500 sent;
 * - the client leaves before a response → the lease stops being renewed; the claim is released
 *   once the handler is known to have finished without responding, or runs out after `leaseMs`.
 *   A response the handler still produces is stored, so a retry gets it replayed.
 */
async function runHandler<Req>(core: IdempotencyCore<Req>, claim: Claim, res: ServerResponse, next: NextFunction): Promise<void> {
  // Whatever was in place (the prototype's methods, or a wrapper an outer middleware installed) is put back before sending.
  const wrapped = ["writeHead", "write", "end", "flushHeaders"] as const;
  const original = wrapped.map((name) => [name, Object.getOwnPropertyDescriptor(res, name)] as const);
  const chunks: Buffer[] = [];
  /** running: the handler owns the response; ended: it called end; released: the key was let go, writes pass through. */
  let phase: "running" | "ended" | "released" = "running";
  let handlerReturned = false;
  let clientGone = false;

  const restore = () => {
    for (const [name, descriptor] of original) {
      if (descriptor) Object.defineProperty(res, name, descriptor);
      else delete (res as Partial<Record<(typeof wrapped)[number], unknown>>)[name];
    }
  };
  const release = async () => {
    if (phase !== "running") return;
    phase = "released";
    restore();
    await core.abandon(claim);
  };

  function writeHead(this: ServerResponse, status: number, reasonOrHeaders?: string | OutgoingHttpHeaders | OutgoingHttpHeader[], maybeHeaders?: OutgoingHttpHeaders | OutgoingHttpHeader[]) {
    res.statusCode = status;
    let headers = maybeHeaders;
    if (typeof reasonOrHeaders === "string") res.statusMessage = reasonOrHeaders;
    else headers = reasonOrHeaders;
    if (Array.isArray(headers)) {
      // Either [[name, value], …] or the flat [name, value, name, value, …].
      if (headers.every((h) => Array.isArray(h))) for (const [name, value] of headers as unknown as [string, string][]) res.appendHeader(name, value);
      else for (let i = 0; i + 1 < headers.length; i += 2) res.appendHeader(String(headers[i]), headers[i + 1] as string | string[]);
    } else if (headers) {
      for (const [name, value] of Object.entries(headers)) if (value !== undefined) res.setHeader(name, value);
    }
    return res;
  }

  const toBuffer = (chunk: unknown, encoding: unknown): Buffer | undefined => {
    if (chunk === undefined || chunk === null || typeof chunk === "function") return undefined;
    if (typeof chunk === "string") return Buffer.from(chunk, typeof encoding === "string" ? (encoding as BufferEncoding) : "utf8");
    if (chunk instanceof Uint8Array) return Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
    throw new TypeError("response chunks must be strings, Buffers or Uint8Arrays");
  };
  const callbackOf = (...args: unknown[]) => args.find((a): a is (err?: Error | null) => void => typeof a === "function");

  function write(this: ServerResponse, chunk: unknown, encoding?: unknown, cb?: unknown): boolean {
    const buf = toBuffer(chunk, encoding);
    if (buf) chunks.push(Buffer.from(buf));
    const done = callbackOf(encoding, cb);
    if (done) process.nextTick(done);
    return true;
  }

  function end(this: ServerResponse, chunk?: unknown, encoding?: unknown, cb?: unknown): ServerResponse {
    if (phase !== "running") return res;
    phase = "ended";
    const buf = toBuffer(chunk, encoding);
    if (buf) chunks.push(Buffer.from(buf));
    const done = callbackOf(chunk, encoding, cb);
    const body = Buffer.concat(chunks);
    const response: HttpResponse = { status: res.statusCode, headers: storableHeaders(Object.entries(res.getHeaders())), body };
    // Store first, send second: a reply lost after this point is still replayable.
    void core.finish(claim, response).then(() => {
      restore();
      if (done) res.end(body, done);
      else res.end(body);
    }).catch((err: unknown) => {
      // Sending failed (an outer wrapper of `end` threw): the response is stored; a retry gets it replayed.
      core.report(err, { phase: "handler", tenant: claim.tenant, key: claim.key });
      res.destroy();
    });
    return res;
  }

  res.writeHead = writeHead;
  res.write = write as typeof res.write;
  res.end = end as typeof res.end;
  res.flushHeaders = () => {};
  res.once("close", () => {
    if (phase !== "running") return;
    clientGone = true;
    core.stopRenewing(claim);
    if (handlerReturned) void release();
  });

  let returned: unknown;
  try {
    returned = next();
    if (isPromiseLike(returned)) await returned;
  } catch (err) {
    core.report(err, { phase: "handler", tenant: claim.tenant, key: claim.key });
    if (phase !== "running") return;
    await release();
    if (!res.headersSent && !res.destroyed) send(res, handlerFailed(core.header));
    else res.destroy();
    return;
  }
  // Express's `next` returns nothing: when its handler finishes is unknown, so only the lease decides.
  if (!isPromiseLike(returned)) return;
  // The handler's promise settled without ending the response: it may still end it later (callback
  // style) while its client waits; once the client is gone too, nobody will: release the key.
  handlerReturned = true;
  if (clientGone) await release();
}

function isPromiseLike(value: unknown): value is PromiseLike<unknown> {
  return typeof value === "object" && value !== null && typeof (value as { then?: unknown }).then === "function";
}

/**
 * Reads the body for the fingerprint. A stream nobody has read yet is read here (and exposed as
 * `req.rawBody`, plus `req.body` for JSON); a stream a body parser already consumed is
 * fingerprinted by the `req.body` it left.
 */
async function readBody(req: IncomingMessage & IdempotentRequestFields, limit: number): Promise<{ body: FingerprintBody } | { reject: HttpResponse } | { gone: true }> {
  if (req.readableEnded) return req.body === undefined ? { body: { kind: "none" } } : bodyFromParsed(req.body);
  const read = await readBodyLimited(req, limit);
  if (read.kind === "gone") return { gone: true };
  if (read.kind === "too_large") return { reject: bodyTooLarge(limit, read.close) };
  const raw = read.bytes;
  req.rawBody = raw;
  // Tell a body-parser mounted after us that the body was read.
  (req as { _body?: boolean })._body = true;
  const parsed = bodyFromBytes(raw, req.headers["content-type"], true);
  if ("reject" in parsed) return parsed;
  // Express 4's body parsers leave `{}` when the content type was not theirs.
  if ("parsed" in parsed && (req.body === undefined || isEmptyPlainObject(req.body))) req.body = parsed.parsed;
  return { body: parsed.body };
}

function isEmptyPlainObject(value: unknown): boolean {
  return typeof value === "object" && value !== null && Object.getPrototypeOf(value) === Object.prototype && Object.keys(value).length === 0;
}

/**
 * A body a framework already parsed: objects compare by canonical JSON (of what the parser left:
 * digits it rounded away are gone), strings and Buffers by bytes.
 */
function bodyFromParsed(body: unknown): { body: FingerprintBody } | { reject: HttpResponse } {
  if (body instanceof Uint8Array) return { body: body.length === 0 ? { kind: "none" } : { kind: "bytes", bytes: body } };
  if (typeof body === "string") return { body: body.length === 0 ? { kind: "none" } : { kind: "bytes", bytes: Buffer.from(body) } };
  try {
    return { body: { kind: "json", text: canonicalValueText(body) } };
  } catch (err) {
    return { reject: isTooDeep(err) ? jsonTooDeep() : invalidJson() };
  }
}

function send(res: ServerResponse, response: HttpResponse): void {
  if (res.headersSent || res.destroyed) return;
  res.statusCode = response.status;
  const grouped = new Map<string, string[]>();
  for (const [name, value] of response.headers) grouped.set(name, [...(grouped.get(name) ?? []), value]);
  for (const [name, values] of grouped) res.setHeader(name, values.length === 1 ? (values[0] as string) : values);
  res.end(response.body);
}
