/**
 * Who may talk to the console: requests for this server by its own name (a page on another site
 * that resolves its own name to 127.0.0.1 is refused: DNS rebinding), from its own origin (a
 * cross-origin request is refused, whatever it carries), with the bearer token in the
 * Authorization header (never a cookie, so a forged request has nothing to ride on), and, for a
 * change, a JSON body (which a plain HTML form cannot send).
 */
import { createHash, timingSafeEqual } from "node:crypto";
import type { IncomingMessage } from "node:http";
import { foreignRequest } from "../../core/local-server.js";
import { ApiError } from "./api-error.js";

const digest = (text: string) => createHash("sha256").update(text).digest();

export interface GuardOptions {
  readonly token: string;
  /** Whether the server was allowed to bind a non-loopback address: then any Host name is accepted. */
  readonly allowRemote: boolean;
}

/** Throws the ApiError a request is refused with; returns when it may go on. */
export function checkRequest(req: IncomingMessage, options: GuardOptions, needsToken: boolean): void {
  const foreign = foreignRequest(req, { allowRemote: options.allowRemote, what: "this console" });
  if (foreign) throw new ApiError(403, foreign.kind, foreign.message);
  const site = req.headers["sec-fetch-site"];
  if (site === "cross-site" || (site === "same-site" && req.method !== "GET")) {
    throw new ApiError(403, "cross_origin", "cross-site requests are refused: the console takes requests from its own pages only");
  }
  if (!needsToken) return;
  const auth = req.headers.authorization ?? "";
  const given = /^Bearer\s+(\S+)$/i.exec(auth)?.[1];
  if (given === undefined || !timingSafeEqual(digest(given), digest(options.token))) {
    throw new ApiError(401, "unauthorized", "send the console's token as `Authorization: Bearer TOKEN` (it was printed when `effectgate serve` first started, and is kept in its token file)");
  }
  if (req.method === "POST") {
    const type = (req.headers["content-type"] ?? "").split(";")[0]?.trim().toLowerCase();
    if (type !== "application/json") throw new ApiError(415, "unsupported_media_type", "send changes as a JSON body with Content-Type: application/json");
  }
}
