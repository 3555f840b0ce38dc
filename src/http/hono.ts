/**
 * The Hono adapter: `app.use(honoIdempotency({ ledger }))`. Same core, same semantics as the
 * Connect middleware (see `./index.ts` and docs/server.md), with Fetch `Request`/`Response`:
 * the body is read from the request's stream, and given up (413) as soon as more than
 * `maxBodyBytes` arrived, without reading the rest; what was read is put in Hono's body cache,
 * so `c.req.json()` / `c.req.text()` still work in the handler. The handler's response is read
 * whole, stored, then handed back as `c.res`.
 *
 * Hono is an optional peer dependency: this file imports only its types.
 */
import type { Context, MiddlewareHandler } from "hono";
import {
  bodyFromBytes, bodyIncomplete, bodyTooLarge, clientIdFailed, createIdempotencyCore, isNullBodyStatus, middlewareFailed, requestTargetInvalid,
  storableHeaders, type FingerprintBody, type HttpResponse, type IdempotencyOptions, type KeyCheck,
} from "./core.js";
import { requestTargetUrl } from "../core/local-server.js";

export function honoIdempotency(options: IdempotencyOptions<Context>): MiddlewareHandler {
  const core = createIdempotencyCore<Context>(options, { authorization: (c) => c.req.header("authorization") });

  return async function idempotency(c, next) {
    const method = c.req.method.toUpperCase();
    let check: KeyCheck;
    try {
      // Fetch has joined every line of each header with ", ": the node:http adapter joins its lines the same way.
      check = core.checkKey(c, method, c.req.header(core.header), c.req.header(core.fenceHeader));
    } catch (err) {
      core.report(err, { phase: "claim", tenant: "?", key: "?" });
      return toResponse(middlewareFailed());
    }
    if (check.kind === "pass") {
      await next();
      return;
    }
    if (check.kind === "reject") return toResponse(check.response);
    // Request.url is always absolute, but an adapter of another runtime may have built it from anything.
    const url = requestTargetUrl(c.req.url);
    if (url === undefined) return toResponse(requestTargetInvalid());

    const declared = Number(c.req.header("content-length"));
    if (Number.isFinite(declared) && declared > core.maxBodyBytes) return toResponse(bodyTooLarge(core.maxBodyBytes));
    let bytes: Buffer | undefined;
    try {
      if (Object.keys(c.req.bodyCache).length > 0 || c.req.raw.bodyUsed) {
        // A middleware before this one read the body through Hono (it is in memory already): use its copy.
        bytes = Buffer.from(await c.req.arrayBuffer());
        if (bytes.length > core.maxBodyBytes) bytes = undefined;
      } else {
        bytes = await readLimited(c.req.raw, core.maxBodyBytes);
        // Hono's body cache: the handler's c.req.json(), .text(), .arrayBuffer() read these bytes.
        if (bytes !== undefined) (c.req.bodyCache as unknown as { arrayBuffer?: Promise<ArrayBuffer> }).arrayBuffer = Promise.resolve(exactArrayBuffer(bytes));
      }
    } catch {
      // The body stream failed: the client closed the connection mid-body. Nothing was claimed; a
      // Fetch handler must still return a response (nobody may be left to read it).
      return toResponse(bodyIncomplete());
    }
    if (bytes === undefined) return toResponse(bodyTooLarge(core.maxBodyBytes));
    const read = bodyFromBytes(bytes, c.req.header("content-type"));
    if ("reject" in read) return toResponse(read.reject);
    const body: FingerprintBody = read.body;

    let tenant: string;
    try {
      tenant = await core.tenantOf(c);
    } catch (err) {
      core.report(err, { phase: "claim", tenant: "?", key: check.key });
      return toResponse(clientIdFailed());
    }
    const begun = await core.begin({
      key: check.key, tenant, method, path: url.pathname + url.search, pathname: url.pathname, body,
      ...(check.fence === undefined ? {} : { fence: check.fence }),
    });
    if (begun.kind === "respond") return toResponse(begun.response);
    const claim = begun.claim;

    try {
      await next();
    } catch (err) {
      // Hono turns handler errors into responses (and sets c.error); this is for what escapes that.
      core.report(err, { phase: "handler", tenant: claim.tenant, key: claim.key });
      await core.abandon(claim);
      throw err;
    }
    if (c.error !== undefined) {
      core.report(c.error, { phase: "handler", tenant: claim.tenant, key: claim.key });
      await core.abandon(claim);
      return;
    }
    const res = c.res;
    let captured: Buffer;
    try {
      captured = Buffer.from(await res.arrayBuffer());
    } catch (err) {
      core.report(err, { phase: "handler", tenant: claim.tenant, key: claim.key });
      await core.abandon(claim);
      throw err;
    }
    const response: HttpResponse = { status: res.status, headers: storableHeaders(res.headers.entries()), body: captured };
    // Store first, send second: a reply lost after this point is still replayable.
    await core.finish(claim, response);
    const replacement = new Response(isNullBodyStatus(res.status) ? null : captured, { status: res.status, statusText: res.statusText, headers: res.headers });
    c.res = undefined;
    c.res = replacement;
  };
}

/**
 * The request body, read from its stream until it ends or more than `limit` bytes arrived: then
 * the rest is cancelled, never read nor buffered, and the answer is undefined.
 */
async function readLimited(request: Request, limit: number): Promise<Buffer | undefined> {
  const stream = request.body;
  if (stream === null) return Buffer.alloc(0);
  const reader: ReadableStreamDefaultReader<unknown> = stream.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const read = await reader.read();
    if (read.done) break;
    const chunk = read.value;
    if (!(chunk instanceof Uint8Array)) throw new TypeError("a request body stream must yield Uint8Arrays");
    size += chunk.byteLength;
    if (size > limit) {
      // Not awaited: a source slow to acknowledge the cancel must not hold the 413 back.
      reader.cancel(new Error(`the request body is larger than ${limit} bytes`)).catch(() => undefined);
      return undefined;
    }
    chunks.push(chunk);
  }
  return Buffer.concat(chunks, size);
}

function exactArrayBuffer(bytes: Buffer): ArrayBuffer {
  const copy = new ArrayBuffer(bytes.byteLength);
  new Uint8Array(copy).set(bytes);
  return copy;
}

function toResponse(response: HttpResponse): Response {
  const headers = new Headers();
  for (const [name, value] of response.headers) headers.append(name, value);
  return new Response(isNullBodyStatus(response.status) ? null : response.body, { status: response.status, headers });
}
