/** An API answer that is not a success: an HTTP status, a stable code and a message saying what to do. */
import { isEffectgateError, messageOf } from "../../core/errors.js";

export interface ApiErrorExtras {
  /** Seconds the client should wait before trying again (a `Retry-After` header). */
  readonly retryAfterSec?: number;
  /** The connection carries no other request (the rest of the body is not read): `Connection: close`. */
  readonly close?: boolean;
}

export class ApiError extends Error {
  constructor(readonly status: number, readonly code: string, message: string, readonly extras: ApiErrorExtras = {}) {
    super(message);
    this.name = "ApiError";
  }
}

export const badRequest = (message: string) => new ApiError(400, "bad_request", message);
export const notFound = (message: string) => new ApiError(404, "not_found", message);
export const conflict = (message: string) => new ApiError(409, "conflict", message);

/** What a thrown error becomes on the wire: effectgate's own codes keep their meaning; anything else is a 500 without its details. */
export function toApiError(err: unknown): ApiError {
  if (err instanceof ApiError) return err;
  if (isEffectgateError(err)) {
    switch (err.code) {
      case "EG_INVALID_INPUT":
      case "EG_BAD_CONTENT":
      case "EG_BAD_OPTION":
        return new ApiError(400, err.code, err.message);
      case "EG_ILLEGAL_TRANSITION":
      case "EG_IN_PROGRESS":
        return new ApiError(409, err.code, err.message);
      case "EG_LEDGER_UNAVAILABLE":
        return new ApiError(503, err.code, err.message);
      default:
        return new ApiError(500, err.code, err.message);
    }
  }
  return new ApiError(500, "internal", `the request failed: ${messageOf(err)}`);
}
