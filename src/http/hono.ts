/**
 * The Hono adapter: `app.use(honoIdempotency({ ledger }))`. Same core, same semantics as the
 * Connect middleware (see `./index.ts` and docs/server.md), with Fetch `Request`/`Response`:
 * the body is read with `c.req.arrayBuffer()` (Hono caches it, so `c.req.json()` still works in
 * the handler), and the handler's response is read whole, stored, then handed back as `c.res`.
 *
 * Hono is an optional peer dependency: this file imports only its types.
 */
import type { Context, MiddlewareHandler } from "hono";
import {
  bodyFromBytes, bodyTooLarge, clientIdFailed, createIdempotencyCore, invalidJson, isNullBodyStatus, storableHeaders,
  type FingerprintBody, type HttpResponse, type IdempotencyOptions,
} from "./core.js";

export function honoIdempotency(options: IdempotencyOptions<Context>): MiddlewareHandler {
  const core = createIdempotencyCore<Context>(options, { authorization: (c) => c.req.header("authorization") });

  return async function idempotency(c, next) {
    const method = c.req.method.toUpperCase();
    const value = c.req.header(core.header);
    const check = core.checkKey(c, method, value === undefined ? undefined : [value]);
    if (check.kind === "pass") {
      await next();
      return;
    }
    if (check.kind === "reject") return toResponse(check.response);

    const declared = Number(c.req.header("content-length"));
    if (Number.isFinite(declared) && declared > core.maxBodyBytes) return toResponse(bodyTooLarge(core.maxBodyBytes));
    const bytes = Buffer.from(await c.req.arrayBuffer());
    if (bytes.length > core.maxBodyBytes) return toResponse(bodyTooLarge(core.maxBodyBytes));
    const read = bodyFromBytes(bytes, c.req.header("content-type"));
    if (read === undefined) return toResponse(invalidJson());
    const body: FingerprintBody = read.body;

    let tenant: string;
    try {
      tenant = await core.tenantOf(c);
    } catch (err) {
      core.report(err, { phase: "claim", tenant: "?", key: check.key });
      return toResponse(clientIdFailed());
    }
    const url = new URL(c.req.url);
    const begun = await core.begin({ key: check.key, tenant, method, path: url.pathname + url.search, pathname: url.pathname, body });
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

function toResponse(response: HttpResponse): Response {
  const headers = new Headers();
  for (const [name, value] of response.headers) headers.append(name, value);
  return new Response(isNullBodyStatus(response.status) ? null : response.body, { status: response.status, headers });
}
