import { describe, expect, it } from "vitest";
import { classifyError, OutcomeUnknown, ToolRejected, ToolTimeout } from "../../src/core/outcome.js";

const withCode = (code: string) => Object.assign(new Error(code), { code });

describe("classifyError", () => {
  it.each([
    ["ToolRejected", new ToolRejected("no"), "rejected"],
    ["HTTP 400", Object.assign(new Error("bad"), { status: 400 }), "rejected"],
    ["HTTP 422 statusCode", Object.assign(new Error("bad"), { statusCode: 422 }), "rejected"],
    ["HTTP 429", Object.assign(new Error("slow down"), { status: 429 }), "not_sent"],
    ["HTTP 503", Object.assign(new Error("unavailable"), { status: 503 }), "not_sent"],
    ["HTTP 500", Object.assign(new Error("oops"), { status: 500 }), "unknown"],
    ["HTTP 504", Object.assign(new Error("gateway"), { status: 504 }), "unknown"],
    ["ECONNREFUSED", withCode("ECONNREFUSED"), "not_sent"],
    ["ECONNRESET", withCode("ECONNRESET"), "unknown"],
    ["fetch failed with a socket cause", new TypeError("fetch failed", { cause: withCode("UND_ERR_SOCKET") }), "unknown"],
    ["fetch failed, connection refused", new TypeError("fetch failed", { cause: withCode("ECONNREFUSED") }), "not_sent"],
    ["AbortError", Object.assign(new Error("aborted"), { name: "AbortError" }), "unknown"],
    ["OutcomeUnknown", new OutcomeUnknown("?"), "unknown"],
    ["ToolTimeout", new ToolTimeout("late"), "unknown"],
    ["a plain Error", new Error("tool bug"), "failed"],
    ["a string", "nope", "failed"],
  ])("%s → %s", (_name, err, kind) => {
    expect(classifyError(err)).toBe(kind);
  });
});
