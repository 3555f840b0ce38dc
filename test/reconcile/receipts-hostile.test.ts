/**
 * Hostile input at the receipts endpoint, on a real node:http server on 127.0.0.1 mounted as its
 * doc comment shows, with the promise it returns watched: it never rejects, answers a 4xx for
 * what it cannot read, a 500 (not a silent close) when a hook fails, and reads a refused body
 * within a bound.
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { EffectgateError } from "../../src/core/errors.js";
import { MAX_JSON_DEPTH } from "../../src/core/json-depth.js";
import type { Stores } from "../../src/contracts/stores.js";
import { MAX_DRAIN_BYTES } from "../../src/http/body.js";
import { memoryLedger } from "../../src/stores/memory/index.js";
import { receiptsEndpoint, signReceipt, type ReceiptEndpointOptions } from "../../src/server.js";
import { codeOf, once, rawRequest, RawConnection, type RawResponse } from "../server/raw-http.js";
import { receipt, SECRET } from "./receipts.js";

const LIMIT = 4096;
const open: { server: Server; ledger: Stores; rejected: unknown[] }[] = [];
afterEach(async () => {
  for (const o of open.splice(0)) {
    expect(o.rejected, "the endpoint's promise rejected").toEqual([]);
    o.server.closeAllConnections();
    await new Promise<void>((resolve) => o.server.close(() => resolve()));
    await o.ledger.close();
  }
});

async function start(options: Partial<ReceiptEndpointOptions> = {}, ledger: Stores = memoryLedger()): Promise<{ url: string; ledger: Stores }> {
  const receipts = receiptsEndpoint({ ledger, secret: SECRET, maxBodyBytes: LIMIT, ...options });
  const rejected: unknown[] = [];
  const server = createServer((req, res) => {
    receipts(req, res).catch((err: unknown) => rejected.push(err));
  });
  open.push({ server, ledger, rejected });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, ledger };
}

const HOST = "Host: 127.0.0.1";
const signedPost = (body: string, lines: readonly string[] = []) =>
  rawRequest("POST", "/receipts", [HOST, "Content-Type: application/json", `Content-Length: ${Buffer.byteLength(body)}`, `Effectgate-Signature: ${signReceipt(body, SECRET)}`, ...lines], body);
const summary = (r: RawResponse | "closed") => (r === "closed" ? "closed" : `${r.status} ${codeOf(r) ?? ""}`.trim());

describe("hostile input at the receipts endpoint", () => {
  it(`a signed receipt nested deeper than ${MAX_JSON_DEPTH} levels is a 400 that names the bound, and changes nothing`, async () => {
    const { url, ledger } = await start({ maxBodyBytes: 256 * 1024 });
    const deep = (depth: number) => JSON.stringify({ id: "evt_deep", tool: "send_email", record: { ref: "r", key: "toolu_1", fields: { to: "x" } } })
      .replace('"x"', "[".repeat(depth) + "]".repeat(depth));
    const answer = await once(url, signedPost(deep(50_000)));
    expect(summary(answer)).toBe("400 json_too_deep");
    expect(answer !== "closed" && answer.body).toContain(`deeper than ${MAX_JSON_DEPTH} levels`);
    expect(await ledger.reconcile!.getReceipt("evt_deep")).toBeUndefined();
    expect(summary(await once(url, signedPost(receipt("evt_ok", "toolu_1", "msg_1"))))).toBe("200");
  });

  it("a failing onError hook does not turn a 503 into a silent close; a throwing clock is a 500, never a rejection", async () => {
    const inner = memoryLedger();
    const down: Stores = { ...inner, calls: { ...inner.calls, list: () => Promise.reject(new EffectgateError("EG_LEDGER_UNAVAILABLE", "down")) } };
    const { url } = await start({ onError: () => { throw new Error("the alerting hook is broken"); } }, down);
    expect(summary(await once(url, signedPost(receipt("evt_1", "toolu_1", "msg_1"))))).toBe("503 ledger_unavailable");

    const clocked = await start({ now: () => { throw new Error("no clock"); } });
    expect(summary(await once(clocked.url, signedPost(receipt("evt_2", "toolu_2", "msg_2"))))).toBe("500 receipt_failed");
  });

  it("a body cut off half-way applies nothing, and the endpoint goes on", async () => {
    const { url, ledger } = await start();
    const body = receipt("evt_cut", "toolu_1", "msg_1");
    const connection = await RawConnection.open(url);
    await connection.send(signedPost(body).slice(0, -10));
    connection.destroy();
    await connection.closed;
    expect(summary(await once(url, signedPost(body)))).toBe("200");
    expect(await ledger.reconcile!.getReceipt("evt_cut")).toBeDefined();
  });

  it("after a 413 the kept-alive connection answers its next request; a body past the drain bound gets Connection: close", async () => {
    const { url } = await start();
    const connection = await RawConnection.open(url);
    const big = JSON.stringify({ pad: "x".repeat(LIMIT * 2) });
    await connection.send(signedPost(big) + signedPost(receipt("evt_next", "toolu_1", "msg_1")));
    expect(summary(await connection.next())).toBe("413 body_too_large");
    expect(summary(await connection.next())).toBe("200");
    connection.destroy();

    const declared = await RawConnection.open(url);
    await declared.send(rawRequest("POST", "/receipts", [HOST, `Content-Length: ${LIMIT + MAX_DRAIN_BYTES * 4}`], "{"));
    const answer = await declared.next();
    expect(summary(answer)).toBe("413 body_too_large");
    expect(answer !== "closed" && answer.headers.connection).toBe("close");
    await declared.closedWithin();
  });
});
