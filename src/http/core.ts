/**
 * The framework-free core of the `Idempotency-Key` middleware. The Connect adapter
 * (`./node.ts`) and the Hono adapter (`./hono.ts`) translate requests and responses and
 * call exactly these steps, in this order:
 *
 *   checkKey → (read the body) → begin → run the handler → finish | abandon
 *
 * - `checkKey` decides whether the request is handled at all and validates the header.
 * - `begin` claims the key in the ledger, or answers without running the handler: a
 *   replay of the stored response, 409 (the first request is still running), 422 (the key
 *   was used for a different request), 503 (the ledger is unavailable).
 * - `finish` stores the handler's response as the record's result (state `completed`)
 *   BEFORE the adapter sends it, so a reply lost on the wire is still replayable.
 * - `abandon` releases the claim (compare-and-set delete) so a retry runs the handler again.
 *
 * The full semantics, and the one window no generic middleware can close, are in
 * docs/server.md and in the doc comment of `./index.ts`.
 */
import { createHash, randomBytes } from "node:crypto";
import { hostname } from "node:os";
import { performance } from "node:perf_hooks";
import { canonicalJson, sha256Hex } from "../core/keys.js";
import { EffectgateError, isEffectgateError } from "../core/errors.js";
import type { Json } from "../core/json.js";
import type { CallRecord } from "../contracts/calls.js";
import type { Stores } from "../contracts/stores.js";
import { leaseRanOut } from "../contracts/call-rules.js";
import { canonicalJsonText, MAX_JSON_DEPTH } from "./canonical-json.js";

/** 24 hours: how long a key is remembered, as Stripe does. */
export const DEFAULT_TTL_MS = 24 * 60 * 60 * 1000;
/** How long an in-progress claim lasts without renewal; renewed every third of it while the handler runs. */
export const DEFAULT_LEASE_MS = 30_000;
export const DEFAULT_HEADER = "Idempotency-Key";
/** The request header carrying the caller's fencing token (what a gated tool gets as `ctx.fence`). */
export const DEFAULT_FENCE_HEADER = "Effectgate-Fence";
/** The RFC 9457 problem type of a request refused because its fence is lower than the highest seen for its key. */
export const STALE_FENCE_PROBLEM_TYPE = "urn:effectgate:problem:stale-fence";
/** Longest accepted key, in characters. */
export const MAX_KEY_LENGTH = 255;
/** Largest request body read for fingerprinting (1 MiB). */
export const DEFAULT_MAX_BODY_BYTES = 1024 * 1024;
/** The header set on a replayed response. */
export const REPLAYED_HEADER = "Idempotent-Replayed";
/** Seconds a 409 asks the client to wait before retrying. */
const RETRY_AFTER_SECONDS = 1;
/** How often `begin` retries after a race (an expired key removed under it). */
const MAX_BEGIN_ROUNDS = 3;

/** Methods whose key is required by default; a key sent on them is always honoured. */
const KEYED_METHODS: ReadonlySet<string> = new Set(["POST", "PATCH"]);

/**
 * Response headers never stored nor replayed: hop-by-hop headers, framing that the server
 * recomputes, the date, cookies (a session must not be re-issued by a replay) and our own.
 */
const UNSTORED_HEADERS: ReadonlySet<string> = new Set([
  "connection", "keep-alive", "transfer-encoding", "upgrade", "te", "trailer", "proxy-authenticate",
  "proxy-authorization", "content-length", "date", "set-cookie", REPLAYED_HEADER.toLowerCase(),
]);

/** Where in the middleware something went wrong, for `onError`. Never carries a body. */
export interface IdempotencyErrorContext {
  readonly phase: "claim" | "renew" | "store" | "release" | "handler" | "replay";
  readonly tenant: string;
  readonly key: string;
}

/**
 * Options shared by both adapters. `Req` is what `required` and `clientId` receive: the
 * node `IncomingMessage` (or Express `Request`) for the Connect middleware, the Hono `Context`
 * for the Hono one.
 */
export interface IdempotencyOptions<Req> {
  /** Where keys and stored responses live: any effectgate ledger (memory, SQLite, PostgreSQL). */
  readonly ledger: Stores;
  /** How long a key is remembered (default 24 h). An expired key is removed and then acts as new. */
  readonly ttlMs?: number;
  /** The request header carrying the key (default "Idempotency-Key"). */
  readonly header?: string;
  /**
   * The request header carrying the caller's fencing token (default "Effectgate-Fence"): a
   * positive integer a gated tool sends beside the key (its `ctx.fence`), higher for every holder
   * that took the call over. The middleware keeps the highest fence seen per key; a request with a
   * lower one comes from a holder that lost its lease and gets 409 `stale_fence`, never a run and
   * never the newer holder's response. A request without the header is handled as if fences did not exist.
   */
  readonly fenceHeader?: string;
  /**
   * Whether a request must carry a key. Default: POST and PATCH must; every other method passes
   * through untouched. A POST or PATCH that need not carry a key still has it honoured when sent.
   */
  readonly required?: boolean | ((req: Req) => boolean);
  /**
   * Who the caller is: keys are scoped per client, so two clients never share one. Default: the
   * SHA-256 of the Authorization header, or "anonymous" without one. Return the authenticated
   * account id instead where tokens rotate, or a retry after a token refresh runs again.
   */
  readonly clientId?: (req: Req) => string | Promise<string>;
  /** Lease of the in-progress claim (default 30 s), renewed while the handler runs. */
  readonly leaseMs?: number;
  /** Largest request body read for fingerprinting (default 1 MiB); larger ones get 413. */
  readonly maxBodyBytes?: number;
  /**
   * Whether a response with this status is stored and replayed. Default: everything except 5xx,
   * 408 and 429; a response that is not stored releases the key, so a retry runs the handler again.
   */
  readonly storeResponse?: (status: number) => boolean;
  /** The clock keys expire by (epoch ms). Default: the ledger's own clock (`ledger.calls.now()`). */
  readonly now?: () => number;
  /** Told about failures the client does not see (a ledger write that failed after the handler ran). */
  readonly onError?: (error: unknown, context: IdempotencyErrorContext) => void;
}

/** A complete HTTP response, as captured from a handler, stored, replayed or made up by the middleware. */
export interface HttpResponse {
  readonly status: number;
  /** Lower-case names; a name may repeat. */
  readonly headers: readonly (readonly [string, string])[];
  readonly body: Buffer;
}

/** The request body, as the fingerprint sees it. */
export type FingerprintBody =
  | { readonly kind: "none" }
  /** A JSON body (or a body a framework already parsed into an object): compared by its canonical text (./canonical-json.ts). */
  | { readonly kind: "json"; readonly text: string }
  /** Any other body, compared byte for byte. */
  | { readonly kind: "bytes"; readonly bytes: Uint8Array };

/** A request that carries a valid key. */
export interface KeyedRequest {
  readonly key: string;
  /** The ledger tenant: `http:` + the client id. */
  readonly tenant: string;
  readonly method: string;
  /** Path and query, e.g. `/charges?expand=customer`. */
  readonly path: string;
  /** Path without the query: names the ledger record's tool (`http:POST /charges`). */
  readonly pathname: string;
  readonly body: FingerprintBody;
  /** The caller's fencing token, when it sent one. */
  readonly fence?: number;
}

export type KeyCheck =
  /** Not handled: run the handler untouched. */
  | { readonly kind: "pass" }
  | { readonly kind: "reject"; readonly response: HttpResponse }
  | { readonly kind: "keyed"; readonly key: string; readonly fence?: number };

/** The claim a request holds while its handler runs. */
export interface HeldClaim {
  readonly tenant: string;
  readonly key: string;
  /** Set once the claim is finished, abandoned or lost: later steps do nothing. */
  settled: boolean;
  /** @internal */
  readonly version: number;
  /** @internal */
  readonly owner: string;
  /** @internal */
  readonly claimToken: string;
  /** @internal The highest fence seen for the key when this claim was taken (0: none). */
  readonly fence: number;
  /** @internal When (performance.now()) the last write that proved the claim ours was sent: its lease runs at least `leaseMs` from then. */
  confirmedAt: number;
  /** @internal A renewal found the claim taken over: nothing more may be written under it but its release. */
  lost: boolean;
  /** @internal */
  timer: ReturnType<typeof setInterval> | undefined;
}

export type Begin =
  /** Answer with this and do not run the handler (a replay, or an error). */
  | { readonly kind: "respond"; readonly response: HttpResponse }
  /** The key is ours: run the handler, then `finish` or `abandon`. */
  | { readonly kind: "run"; readonly claim: HeldClaim };

/** What the stored record's `input` holds: never the body itself, only its digest. */
interface StoredInput {
  readonly method: string;
  readonly path: string;
  readonly body: string;
}

export interface IdempotencyCore<Req> {
  readonly header: string;
  readonly fenceHeader: string;
  /**
   * Whether to handle the request, its key and its fence. `value` is the key header's field
   * value and `fenceValue` the fence header's, each with every line of that header joined by
   * ", " (what Fetch's `Headers.get` returns), undefined when the header was not sent: both
   * adapters hand over the same text for the same request, so they decide every case alike.
   */
  checkKey(req: Req, method: string, value: string | undefined, fenceValue?: string): KeyCheck;
  /** The ledger tenant for the request's client. */
  tenantOf(req: Req): Promise<string>;
  readonly maxBodyBytes: number;
  begin(request: KeyedRequest): Promise<Begin>;
  /** Stores the response (or releases the key when it is not to be stored). True when stored. Never throws. */
  finish(claim: HeldClaim, response: HttpResponse): Promise<boolean>;
  /** Releases the key so a retry runs the handler again. Never throws. */
  abandon(claim: HeldClaim): Promise<void>;
  /** Stops renewing the claim's lease: it runs out after `leaseMs` unless finished sooner. */
  stopRenewing(claim: HeldClaim): void;
  /** Passes an error to `onError` (a throwing hook is ignored). */
  report(error: unknown, context: IdempotencyErrorContext): void;
}

let ownerSeq = 0;
/** Random too: two processes with one hostname and pid (containers) never share an owner id, which a renewal compares. */
const OWNER_PREFIX = `http:${hostname()}:${process.pid}:${randomBytes(4).toString("hex")}`;
/** The highest fence seen, carried in the owner id of an in-progress claim (the store's own fence may be one more: take-overs raise it). */
const OWNER_FENCE = /:fence=([0-9]+)$/;
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

export function createIdempotencyCore<Req>(
  options: IdempotencyOptions<Req>,
  defaults: { readonly authorization: (req: Req) => string | undefined },
): IdempotencyCore<Req> {
  const { ledger } = options;
  const ttlMs = positive(options.ttlMs, DEFAULT_TTL_MS, "ttlMs");
  const leaseMs = positive(options.leaseMs, DEFAULT_LEASE_MS, "leaseMs");
  const maxBodyBytes = positive(options.maxBodyBytes, DEFAULT_MAX_BODY_BYTES, "maxBodyBytes");
  const header = options.header ?? DEFAULT_HEADER;
  if (!HEADER_NAME.test(header)) throw new EffectgateError("EG_BAD_OPTION", `header: ${JSON.stringify(header)} is not a valid header name (use letters, digits and - only, such as Idempotency-Key)`);
  const fenceHeader = options.fenceHeader ?? DEFAULT_FENCE_HEADER;
  if (!HEADER_NAME.test(fenceHeader)) throw new EffectgateError("EG_BAD_OPTION", `fenceHeader: ${JSON.stringify(fenceHeader)} is not a valid header name (use letters, digits and - only, such as Effectgate-Fence)`);
  if (fenceHeader.toLowerCase() === header.toLowerCase()) throw new EffectgateError("EG_BAD_OPTION", `fenceHeader and header are both ${JSON.stringify(header)}: they must be two headers`);
  const required = options.required;
  const isRequired = (req: Req, method: string): boolean =>
    typeof required === "function" ? required(req) : required ?? KEYED_METHODS.has(method);
  const storeResponse = options.storeResponse ?? defaultStoreResponse;
  const clientId = options.clientId ?? ((req: Req) => {
    const authorization = defaults.authorization(req);
    return authorization === undefined || authorization === "" ? "anonymous" : sha256Hex(authorization);
  });
  const report = (error: unknown, context: IdempotencyErrorContext) => {
    try {
      options.onError?.(error, context);
    } catch {
      // A failing error hook must not break the request.
    }
  };
  const now = async (): Promise<number> => (options.now ? options.now() : ledger.calls.now());

  function checkKey(req: Req, method: string, value: string | undefined, fenceValue?: string): KeyCheck {
    const mustHave = isRequired(req, method);
    if (value === undefined) {
      return mustHave
        ? reject(400, "idempotency_key_missing", `This request needs an ${header} header: send a unique key (a UUID) and reuse it when you retry.`, { header })
        : { kind: "pass" };
    }
    if (!mustHave && !KEYED_METHODS.has(method)) return { kind: "pass" };
    const read = keyOfFieldValue(value, header);
    if ("problem" in read) return reject(400, "idempotency_key_invalid", read.problem, { header });
    const key = read.key;
    if (key.length === 0) return reject(400, "idempotency_key_invalid", `The ${header} header is empty.`, { header });
    if (key.length > MAX_KEY_LENGTH) {
      return reject(400, "idempotency_key_invalid", `The ${header} header is ${key.length} characters long; at most ${MAX_KEY_LENGTH} are accepted.`, { header });
    }
    if (fenceValue === undefined) return { kind: "keyed", key };
    const fence = parseFence(fenceValue);
    if (fence === undefined) {
      return reject(400, "fence_invalid", `The ${fenceHeader} header must be one positive integer (the fencing token of the caller's claim), at most ${Number.MAX_SAFE_INTEGER}; send it once.`, { header: fenceHeader });
    }
    return { kind: "keyed", key, fence };
  }

  async function tenantOf(req: Req): Promise<string> {
    return `http:${await clientId(req)}`;
  }

  /** `sentAt`: when the claim or take-over that gave us `record` was sent. */
  function hold(record: CallRecord, owner: string, fence: number, sentAt: number): HeldClaim {
    const claim: HeldClaim = {
      tenant: record.tenant, key: record.key, version: record.version, owner, claimToken: record.claimToken, fence,
      confirmedAt: sentAt, lost: false, settled: false, timer: undefined,
    };
    let renewing = false;
    claim.timer = setInterval(() => {
      if (renewing || claim.settled) return;
      renewing = true;
      const sent = performance.now();
      ledger.calls.renewLease(claim.tenant, claim.key, claim.version, claim.owner, leaseMs).then(
        (held) => {
          renewing = false;
          if (held) claim.confirmedAt = Math.max(claim.confirmedAt, sent);
          else if (!claim.settled && !claim.lost) {
            claim.lost = true;
            stopRenewing(claim);
            report(new Error(`the claim on key ${claim.key} was lost (its lease ran out and another request took it over)`), { phase: "renew", tenant: claim.tenant, key: claim.key });
          }
        },
        (err: unknown) => {
          renewing = false;
          report(err, { phase: "renew", tenant: claim.tenant, key: claim.key });
        },
      );
    }, Math.max(1, Math.floor(leaseMs / 3)));
    claim.timer.unref();
    return claim;
  }

  /**
   * Whether the claim is still ours, so a write under its version lands on our record and not
   * on a later claim of the same key (versions restart at 1 after a remove, so a version alone
   * cannot tell). While the lease is being renewed and was proven ours less than half a lease
   * ago, nobody can have taken it over; otherwise a renewal asks the store (it compares owner and version).
   */
  async function stillHeld(claim: HeldClaim): Promise<boolean> {
    if (claim.lost) return false;
    if (claim.timer !== undefined && performance.now() - claim.confirmedAt < leaseMs / 2) return true;
    const sent = performance.now();
    const held = await ledger.calls.renewLease(claim.tenant, claim.key, claim.version, claim.owner, leaseMs);
    if (held) claim.confirmedAt = sent;
    else claim.lost = true;
    return held;
  }

  function stopRenewing(claim: HeldClaim): void {
    if (claim.timer !== undefined) clearInterval(claim.timer);
    claim.timer = undefined;
  }

  async function begin(request: KeyedRequest): Promise<Begin> {
    const context = { phase: "claim", tenant: request.tenant, key: request.key } as const;
    const bodyDigest = digestBody(request.body);
    const input: StoredInput = { method: request.method, path: request.path, body: bodyDigest };
    const fingerprint = sha256Hex(canonicalJson(input));
    const base = `${OWNER_PREFIX}:${++ownerSeq}`;
    const fence = request.fence;
    /** Our owner id, carrying the highest fence seen for the key once we hold it. */
    const ownerSeeing = (seen: number) => (seen > 0 ? `${base}:fence=${seen}` : base);
    try {
      for (let round = 0; round < MAX_BEGIN_ROUNDS; round++) {
        const owner = ownerSeeing(fence ?? 0);
        const sentAt = performance.now();
        const claimed = await ledger.calls.claim({
          tenant: request.tenant, key: request.key, tool: `http:${request.method} ${request.pathname}`, effect: "write",
          task: "http", toolUseId: request.key, fingerprint, input: { ...input }, inputRedacted: true, owner, leaseMs,
          ...(fence === undefined ? {} : { fence }),
        });
        const record = claimed.record;
        if (claimed.claimed) return { kind: "run", claim: hold(record, owner, fence ?? 0, sentAt) };

        if (record.state !== "in_progress" && record.createdAt + ttlMs <= (await now())) {
          // Expired: remove it (compare-and-set on version and claim token, so a concurrent twin
          // removes it at most once and never a later claim of the key) and claim afresh.
          await ledger.calls.remove(record.tenant, record.key, record.version, record.claimToken);
          continue;
        }
        const seen = seenFence(record);
        if (fence !== undefined && fence < seen) return { kind: "respond", response: staleFence(fence, seen) };
        if (record.fingerprint !== fingerprint) return { kind: "respond", response: mismatch(record, input) };
        switch (record.state) {
          case "completed": {
            const stored = decodeResponse(record.result);
            if (stored === undefined) {
              report(new Error(`the stored response of key ${record.key} is unreadable`), { ...context, phase: "replay" });
              return respond(500, "idempotency_record_unreadable", `The response stored for this ${header} cannot be read; nothing was executed. An operator has to look at it.`);
            }
            return { kind: "respond", response: { ...stored, headers: [...stored.headers, [REPLAYED_HEADER.toLowerCase(), "true"]] } };
          }
          case "in_progress": {
            // The holder's lease ran out (its process died, or it lost its client and gave up): take the key over.
            const expired = leaseRanOut(record, await ledger.calls.now());
            const highest = Math.max(seen, fence ?? 0);
            const takerOwner = ownerSeeing(highest);
            const takenAt = performance.now();
            const taken = expired
              ? await ledger.calls.takeOver({
                tenant: record.tenant, key: record.key, version: record.version, owner: takerOwner, leaseMs,
                ...(fence === undefined ? {} : { fence }),
              })
              : undefined;
            if (taken) return { kind: "run", claim: hold(taken, takerOwner, highest, takenAt) };
            return respond(409, "idempotency_key_in_use",
              `A request with this ${header} is still being processed. Retry later with the same key to get its response.`, {}, true);
          }
          default:
            return respond(409, "idempotency_key_unsettled",
              `The request with this ${header} is in state "${record.state}"; an operator has to settle it before the key can be answered.`);
        }
      }
      return respond(409, "idempotency_key_in_use", `This ${header} is contended; retry with the same key.`, {}, true);
    } catch (err) {
      report(err, context);
      if (isEffectgateError(err, "EG_LEDGER_UNAVAILABLE")) {
        return respond(503, "idempotency_ledger_unavailable", "The idempotency ledger is unavailable; nothing was executed. Retry with the same key.", {}, true);
      }
      return respond(500, "idempotency_ledger_error", "The idempotency ledger failed; nothing was executed. Retry with the same key later.");
    }
  }

  async function finish(claim: HeldClaim, response: HttpResponse): Promise<boolean> {
    if (claim.settled) return false;
    if (!storeResponse(response.status)) {
      await abandon(claim);
      return false;
    }
    claim.settled = true;
    try {
      // First make sure the claim is still ours: a holder that lost it must not store its response
      // into a later claim of the same key that happens to be at the same version.
      const held = await stillHeld(claim);
      stopRenewing(claim);
      const stored = held
        ? await ledger.calls.update(claim.tenant, claim.key, claim.version, { state: "completed", result: encodeResponse(response, claim.fence), owner: null })
        : undefined;
      if (stored) return true;
      report(new Error(`the response of key ${claim.key} was not stored: the claim was taken over meanwhile`), { phase: "store", tenant: claim.tenant, key: claim.key });
    } catch (err) {
      stopRenewing(claim);
      report(err, { phase: "store", tenant: claim.tenant, key: claim.key });
    }
    return false;
  }

  async function abandon(claim: HeldClaim): Promise<void> {
    if (claim.settled) return;
    claim.settled = true;
    stopRenewing(claim);
    try {
      await ledger.calls.remove(claim.tenant, claim.key, claim.version, claim.claimToken);
    } catch (err) {
      report(err, { phase: "release", tenant: claim.tenant, key: claim.key });
    }
  }

  function respond(status: number, code: string, detail: string, extra: Record<string, Json> = {}, retryAfter = false): Begin {
    return { kind: "respond", response: problem(status, code, detail, extra, retryAfter) };
  }

  function reject(status: number, code: string, detail: string, extra: Record<string, Json> = {}): KeyCheck {
    return { kind: "reject", response: problem(status, code, detail, extra) };
  }

  function mismatch(record: CallRecord, input: StoredInput): HttpResponse {
    const first = record.input as Partial<Record<keyof StoredInput, unknown>> | null;
    const differs = (["method", "path", "body"] as const).filter((field) => first?.[field] !== input[field]);
    const what = differs.length > 0 ? differs : ["method", "path", "body"];
    return problem(422, "idempotency_key_mismatch",
      `This ${header} was already used for a different request (its ${what.join(" and ")} differ${what.length === 1 ? "s" : ""}). ` +
        "Use a new key for a new request; the first request's response is not returned.",
      { mismatch: what });
  }

  function staleFence(fence: number, highest: number): HttpResponse {
    return problem(409, "stale_fence",
      `This request's ${fenceHeader} (${fence}) is lower than the highest one seen for this ${header} (${highest}): it comes from a holder that lost its lease, and a newer holder has taken the call over. ` +
        "Nothing was executed and the newer holder's response is not returned.",
      { header: fenceHeader, fence, highestFence: highest }, false, { type: STALE_FENCE_PROBLEM_TYPE, title: "Stale fencing token" });
  }

  return { header, fenceHeader, checkKey, tenantOf, maxBodyBytes, begin, finish, abandon, stopRenewing, report };
}

/** Default `storeResponse`: store definite answers; 5xx, 408 and 429 say "try again", so the key is released. */
export function defaultStoreResponse(status: number): boolean {
  return status < 500 && status !== 408 && status !== 429;
}

/** An RFC 9457 problem response (`application/problem+json`), with a stable `code` member. */
export function problem(
  status: number, code: string, detail: string, extra: Record<string, Json> = {}, retryAfter = false,
  kind: { readonly type: string; readonly title: string } = { type: "about:blank", title: STATUS_TITLES[status] ?? "Error" },
): HttpResponse {
  const body = Buffer.from(JSON.stringify({ type: kind.type, title: kind.title, status, code, detail, ...extra }));
  const headers: [string, string][] = [["content-type", "application/problem+json"]];
  if (retryAfter) headers.push(["retry-after", String(RETRY_AFTER_SECONDS)]);
  return { status, headers, body };
}

const STATUS_TITLES: Readonly<Record<number, string>> = {
  400: "Bad Request", 409: "Conflict", 413: "Content Too Large", 422: "Unprocessable Content",
  500: "Internal Server Error", 503: "Service Unavailable",
};

/** Whether a content type is JSON (`application/json`, `application/*+json`). */
function isJsonContentType(contentType: string | undefined | null): boolean {
  if (!contentType) return false;
  const type = contentType.split(";")[0]?.trim().toLowerCase() ?? "";
  return type === "application/json" || (type.startsWith("application/") && type.endsWith("+json"));
}

/**
 * The fingerprint body of raw request bytes: for a JSON content type its canonical text (so key
 * order, whitespace and the spelling of a number do not matter, and no digit is lost), the bytes
 * otherwise. With `parse`, also the body as JSON.parse reads it (for the handler's `req.body`).
 * A JSON body that does not parse, or nests too deep, is refused with a 400.
 */
export function bodyFromBytes(bytes: Buffer, contentType: string | undefined | null, parse = false): { body: FingerprintBody; parsed?: unknown } | { reject: HttpResponse } {
  if (bytes.length === 0) return { body: { kind: "none" } };
  if (!isJsonContentType(contentType)) return { body: { kind: "bytes", bytes } };
  const text = bytes.toString("utf8");
  const canonical = canonicalJsonText(text);
  if (canonical.kind === "too_deep") return { reject: jsonTooDeep() };
  if (canonical.kind === "invalid") return { reject: invalidJson() };
  if (!parse) return { body: { kind: "json", text: canonical.text } };
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return { reject: invalidJson() };
  }
  return { body: { kind: "json", text: canonical.text }, parsed };
}

/** The 400 for a JSON body nested deeper than the fingerprint reads. */
export function jsonTooDeep(): HttpResponse {
  return problem(400, "json_too_deep", `The request body nests arrays and objects deeper than ${MAX_JSON_DEPTH} levels.`);
}

/** The 400 for a JSON body that does not parse. */
export function invalidJson(): HttpResponse {
  return problem(400, "invalid_json", "The request body is not valid JSON.");
}

export function clientIdFailed(): HttpResponse {
  return problem(500, "idempotency_client_unknown", "The caller could not be identified; nothing was executed.");
}

/** The 413; `close`: the connection will not carry another request (the rest of the body is not read). */
export function bodyTooLarge(limit: number, close = false): HttpResponse {
  const response = problem(413, "body_too_large", `The request body is larger than ${limit} bytes.`);
  return close ? { ...response, headers: [...response.headers, ["connection", "close"]] } : response;
}

/** The 400 for a body cut off mid-way (the client closed the connection): the Fetch adapter must answer something. */
export function bodyIncomplete(): HttpResponse {
  return problem(400, "body_incomplete", "The request body ended before all of it arrived; nothing was executed. Send the request again with the same key.");
}

/** The 400 for a request-target that names no path (`http://[`, `*`; `//[` is the path //[). */
export function requestTargetInvalid(): HttpResponse {
  return problem(400, "request_target_invalid", "The request-target is not a path the server can read (such as /charges?id=1); nothing was executed.");
}

/** The 500 for a failure inside the middleware itself (a bug, or a `required` / `clientId` hook that threw): the handler did not run. */
export function middlewareFailed(): HttpResponse {
  return problem(500, "idempotency_middleware_failed", "The request could not be checked for its idempotency key; nothing was executed. Retry with the same key.");
}

export function handlerFailed(header: string): HttpResponse {
  return problem(500, "handler_failed", `The request failed before it produced a response. Its ${header} was released: a retry with the same key runs it again.`);
}

function digestBody(body: FingerprintBody): string {
  switch (body.kind) {
    case "none":
      return "none";
    case "json":
      return `json:${sha256Hex(body.text)}`;
    case "bytes":
      return `bytes:${createHash("sha256").update(body.bytes).digest("hex")}`;
  }
}

/**
 * The one key a key header's field value names (every line of the header joined by ", "), or
 * what is wrong with it. The value is a list (RFC 9110 §5.3, how any recipient may combine
 * repeated lines): members are separated by commas outside a quoted string, and exactly one
 * member must be sent. A member is a bare key (as Stripe's clients send it; spaces around it
 * trimmed) or the IETF draft's structured-field string (`"…"`, with `\"` and `\\` escapes): both
 * name the same key. So a bare key cannot contain a comma (`key-a, key-b` is two keys, as is a
 * header sent twice); a key that does is sent quoted (`"a, b"` is the one key `a, b`).
 */
export function keyOfFieldValue(value: string, header: string = DEFAULT_HEADER): { readonly key: string } | { readonly problem: string } {
  const members: string[] = [];
  let i = 0;
  for (;;) {
    while (i < value.length && (value[i] === " " || value[i] === "\t")) i++;
    if (value[i] === '"') {
      let key = "";
      let closed = false;
      for (i++; i < value.length; i++) {
        const c = value[i];
        if (c === "\\" && (value[i + 1] === '"' || value[i + 1] === "\\")) key += value[++i];
        else if (c === '"') {
          closed = true;
          i++;
          break;
        } else key += c;
      }
      while (i < value.length && (value[i] === " " || value[i] === "\t")) i++;
      if (!closed || (i < value.length && value[i] !== ",")) {
        return { problem: `The ${header} header's quoted key must be one string in double quotes ("…", with \\" for a quote inside), and nothing after it.` };
      }
      members.push(key);
    } else {
      const comma = value.indexOf(",", i);
      members.push(value.slice(i, comma < 0 ? value.length : comma).trim());
      i = comma < 0 ? value.length : comma;
    }
    if (i >= value.length) break;
    i++; // the comma
  }
  if (members.length > 1) {
    return { problem: `Send exactly one ${header} header with one key: this one holds ${members.length} (a comma separates keys; a key that contains a comma must be sent as a quoted string, "like, this").` };
  }
  return { key: members[0] ?? "" };
}

function positive(value: number | undefined, fallback: number, name: string): number {
  if (value === undefined) return fallback;
  if (!Number.isFinite(value) || value <= 0) throw new EffectgateError("EG_BAD_OPTION", `${name} must be a positive number of ${name === "maxBodyBytes" ? "bytes" : "milliseconds"}, got ${value}`);
  return value;
}

/** Keeps the headers worth replaying, lower-cased. */
export function storableHeaders(entries: Iterable<readonly [string, string | number | readonly string[] | undefined]>): [string, string][] {
  const out: [string, string][] = [];
  for (const [rawName, value] of entries) {
    const name = rawName.toLowerCase();
    if (value === undefined || UNSTORED_HEADERS.has(name)) continue;
    if (Array.isArray(value)) for (const v of value as readonly string[]) out.push([name, String(v)]);
    else out.push([name, String(value)]);
  }
  return out;
}

const utf8 = new TextDecoder("utf-8", { fatal: true });

/** The response as a ledger result: text bodies stay readable, others are base64; `fence`: the highest seen for the key (0: none). */
function encodeResponse(response: HttpResponse, fence: number): Json {
  let body: string;
  let encoding: "utf8" | "base64";
  try {
    body = utf8.decode(response.body);
    encoding = "utf8";
  } catch {
    body = response.body.toString("base64");
    encoding = "base64";
  }
  const result: Record<string, Json> = { status: response.status, headers: response.headers.map(([n, v]) => [n, v]), body, encoding };
  if (fence > 0) result.fence = fence;
  return result;
}

/**
 * The highest fence seen for a key: carried in the holder's owner id while a request runs, in the
 * stored result once it completed. Not the record's own `fence` column, which a take-over raises
 * by one more than the request that took over may have sent (the store's rule): the same holder
 * retrying after its own claim was taken over is not stale. 0: no request with a fence was seen.
 */
function seenFence(record: CallRecord): number {
  if (record.state === "in_progress" || record.state === "uncertain") {
    const match = record.owner === null ? null : OWNER_FENCE.exec(record.owner);
    return match ? Number(match[1]) : 0;
  }
  const result = record.result;
  if (result === null || typeof result !== "object" || Array.isArray(result)) return 0;
  const fence = result.fence;
  return typeof fence === "number" && Number.isSafeInteger(fence) && fence > 0 ? fence : 0;
}

/** A fence header's value: a positive integer (decimal digits only), or undefined. */
function parseFence(value: string): number | undefined {
  const text = value.trim();
  if (!/^[0-9]{1,20}$/.test(text)) return undefined;
  const fence = Number(text);
  return Number.isSafeInteger(fence) && fence > 0 ? fence : undefined;
}

function decodeResponse(result: Json | null): HttpResponse | undefined {
  if (result === null || typeof result !== "object" || Array.isArray(result)) return undefined;
  const { status, headers, body, encoding } = result;
  if (typeof status !== "number" || typeof body !== "string" || (encoding !== "utf8" && encoding !== "base64") || !Array.isArray(headers)) return undefined;
  const pairs: [string, string][] = [];
  for (const pair of headers) {
    if (!Array.isArray(pair) || typeof pair[0] !== "string" || typeof pair[1] !== "string") return undefined;
    pairs.push([pair[0], pair[1]]);
  }
  return { status, headers: pairs, body: Buffer.from(body, encoding) };
}

/** Statuses whose responses carry no body (a Fetch `Response` refuses one). */
export function isNullBodyStatus(status: number): boolean {
  return status === 101 || status === 204 || status === 205 || status === 304;
}
