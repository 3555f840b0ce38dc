/**
 * `effectgate/server`: an `Idempotency-Key` middleware so your own HTTP services honour keys the
 * way Stripe's API and the IETF draft "The Idempotency-Key HTTP Header Field" describe.
 * Two adapters share one core: `idempotencyMiddleware` (Connect-style, for node:http and
 * Express) and `honoIdempotency` (Hono). docs/server.md has the same text with examples.
 *
 * What a request gets:
 * - Not handled (by default every method but POST and PATCH; `required` decides): the handler
 *   runs untouched.
 * - A required key missing, empty, longer than 255 characters or more than one key (the header
 *   sent twice, or `a, b`: a comma separates keys, so a key holding one is sent quoted, `"a, b"`;
 *   one rule for both adapters, `keyOfFieldValue`) → 400, JSON problem body naming the header. A
 *   request-target that names no path (`http://[`) → 400. Invalid JSON under a JSON content type,
 *   or nested deeper than 1000 levels → 400. Body over `maxBodyBytes` → 413, as soon as that much
 *   arrived (the rest is never buffered; node:http reads at most 1 MiB more of it). A fence header
 *   (`fenceHeader`, default `Effectgate-Fence`) that is not one positive integer → 400. Nothing is
 *   claimed, the handler does not run. Neither adapter rejects on what a client sends; a hook that
 *   throws (`required`, `clientId`) is a 500.
 * - A new key: it is claimed in the ledger (tenant `http:<client id>`, tool `http:POST /path`,
 *   fingerprint = SHA-256 of canonical {method, path + query, body}; JSON bodies compare by
 *   canonical JSON with numbers compared by their exact decimal value (parsed with lossless-json,
 *   so 12345678901234567890 and 12345678901234567891 differ, 1.0 and 1 do not), others byte for byte). The handler runs; its response (status, headers but
 *   hop-by-hop, Content-Length, Date and Set-Cookie, body) is buffered and stored as the
 *   record's result, state `completed`, BEFORE it is sent: a reply lost on the wire is replayed
 *   to the retry.
 * - The same key again after that → the stored status, headers and body, byte for byte, with
 *   `Idempotent-Replayed: true`. The handler does not run.
 * - The same key while the first request is still running → 409, `Retry-After: 1`.
 * - The same key with a different method, path or body → 422 naming what differs; never the
 *   first response.
 * - Keys are scoped per client (`clientId`, default: SHA-256 of the Authorization header, or
 *   "anonymous"): two clients using the same key never see each other's responses.
 * - A key older than `ttlMs` (default 24 h) is removed (compare-and-set on version and claim
 *   token) and acts as new.
 * - Fencing: a request whose `Effectgate-Fence` is lower than the highest fence that claimed or
 *   took over its key comes from a holder that lost its lease → 409 `stale_fence`; the handler does
 *   not run and the stored response is not returned. Equal or higher fences, and requests without
 *   the header, are answered as above.
 *
 * When the key is released so a retry runs the handler again:
 * - the handler throws or rejects before responding (Connect: a 500 is sent; Hono: its error
 *   handler's response is sent);
 * - the response's status is not to be stored (default: 5xx, 408, 429);
 * - the client left before a response and the handler is known to have finished without one.
 *   While the handler may still be running, the key is kept (a retry gets 409) and its lease is
 *   no longer renewed: it runs out after `leaseMs`, after which a retry takes the key over. A
 *   response the handler still produces is stored and replayed.
 * - the process died: the claim's lease (`leaseMs`, default 30 s, renewed while the handler runs)
 *   runs out and the next retry takes the key over.
 *
 * The window no generic middleware can close: a handler that applied its effect (charged the
 * card) and then crashed, threw, or answered 5xx before its response was stored. The middleware
 * cannot tell that apart from a failure before the effect, so the retry runs the handler again.
 * The IETF draft leaves this to the resource too. Close it inside the handler: make the effect
 * itself idempotent (forward the key downstream, or a unique constraint on it in the same
 * transaction as the effect).
 *
 * Security: bodies are never logged, and `onError` is never given one. The ledger stores each
 * response (it may contain personal or secret data) for `ttlMs`, but only a digest of the
 * request body. Protect the ledger like the data your API returns.
 */
export { idempotencyMiddleware, type ConnectMiddleware, type IdempotentRequestFields, type NextFunction } from "./http/node.js";
export { honoIdempotency } from "./http/hono.js";
export {
  DEFAULT_FENCE_HEADER, DEFAULT_HEADER, DEFAULT_LEASE_MS, DEFAULT_MAX_BODY_BYTES, DEFAULT_TTL_MS, MAX_KEY_LENGTH, REPLAYED_HEADER,
  STALE_FENCE_PROBLEM_TYPE, defaultStoreResponse, type IdempotencyErrorContext, type IdempotencyOptions,
} from "./http/core.js";
export { MAX_JSON_DEPTH } from "./http/canonical-json.js";
// Signed downstream receipts (webhooks) for reconciliation: docs/reconciliation.md.
export {
  receiptsEndpoint, signReceipt, verifyReceiptSignature, parseReceipt,
  DEFAULT_SIGNATURE_HEADER, DEFAULT_RECEIPT_TOLERANCE_SEC, DEFAULT_RECEIPT_MAX_BODY_BYTES,
  type ReceiptEndpointOptions, type SignatureCheck,
} from "./root/receipts-endpoint.js";
