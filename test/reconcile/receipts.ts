/**
 * The receipts endpoint (effectgate/server) on a real node:http server on 127.0.0.1, run against
 * every store: signed receipts confirm calls or open findings; unsigned, tampered and stale ones
 * are refused and change nothing; a receipt delivered twice changes nothing the second time.
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { Stores } from "../../src/contracts/stores.js";
import { receiptsEndpoint, signReceipt, type ReceiptEndpointOptions } from "../../src/server.js";
import { claimRequest } from "../../src/testing/contract-suites/calls.js";
import { emailTool, fakeDownstream, manualClock } from "./support.js";

export const SECRET = "whsec_test_0123456789";

export interface Running {
  readonly url: string;
  close(): Promise<void>;
}

export async function serve(options: ReceiptEndpointOptions): Promise<Running> {
  const handler = receiptsEndpoint(options);
  const server: Server = createServer((req, res) => void handler(req, res));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/receipts`,
    close: () => new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    }),
  };
}

export const receipt = (id: string, key: string, ref: string, fields: Record<string, unknown> = { to: "ann@example.com" }, extra: Record<string, unknown> = {}) =>
  JSON.stringify({ id, tool: "send_email", record: { ref, key, fields, ...extra } });

export function runReceiptSuite(storeName: string, make: () => Promise<Stores> | Stores): void {
  describe(`receipts endpoint: ${storeName}`, () => {
    let ledger: Stores;
    let server: Running;
    const clock = manualClock(Date.now());
    beforeEach(async () => {
      ledger = await make();
      server = await serve({ ledger, secret: SECRET, tools: [emailTool(fakeDownstream(), clock)], now: clock.now });
    });
    afterEach(async () => {
      await server.close();
      await ledger.close();
    });

    const post = async (body: string, signature: string | undefined, headers: Record<string, string> = {}) => {
      const res = await fetch(server.url, {
        method: "POST",
        headers: { "content-type": "application/json", ...(signature === undefined ? {} : { "effectgate-signature": signature }), ...headers },
        body,
      });
      const text = await res.text();
      return { status: res.status, body: text === "" ? undefined : (JSON.parse(text) as Record<string, unknown>), type: res.headers.get("content-type") };
    };
    const signed = (body: string, at = Math.floor(clock.now() / 1000)) => post(body, signReceipt(body, SECRET, at));
    async function completed(key: string, to = "ann@example.com") {
      const { record } = await ledger.calls.claim(claimRequest({ key, tool: "send_email", toolUseId: key, input: { to, subject: "hi" } }));
      await ledger.calls.update("acme", key, record.version, { state: "completed", result: { id: "msg_x", to }, owner: null });
    }
    const everything = async () => ({
      findings: await ledger.reconcile!.listFindings({ limit: 1000 }),
      confirmations: await ledger.reconcile!.listConfirmations({ tool: "send_email", tenant: "acme", key: "toolu_1" }),
    });

    it("a valid receipt for a completed call confirms it and stores the confirmation", async () => {
      await completed("toolu_1");
      const res = await signed(receipt("evt_1", "toolu_1", "msg_1"));
      expect(res).toMatchObject({ status: 200, body: { receipt: "evt_1", duplicate: false, outcome: { result: "confirmed", findings: [], ledgerState: "completed" } } });
      const { findings, confirmations } = await everything();
      expect(findings).toEqual([]);
      expect(confirmations).toEqual([expect.objectContaining({ ref: "msg_1", source: "receipt", fields: { to: "ann@example.com" } })]);
    });

    it("an unsigned receipt is refused with 401 and changes nothing", async () => {
      await completed("toolu_1");
      const res = await post(receipt("evt_1", "toolu_1", "msg_1"), undefined);
      expect(res).toMatchObject({ status: 401, type: "application/problem+json", body: { code: "signature_missing", status: 401 } });
      expect(await everything()).toEqual({ findings: [], confirmations: [] });
      expect(await ledger.reconcile!.getReceipt("evt_1")).toBeUndefined();
    });

    it("a bad signature (wrong secret, tampered body, garbage header) is refused with 401 and changes nothing", async () => {
      await completed("toolu_1");
      const body = receipt("evt_1", "toolu_1", "msg_1");
      const t = Math.floor(clock.now() / 1000);
      const tampered = receipt("evt_1", "toolu_1", "msg_1", { to: "mallory@example.com" });
      for (const [sent, signature] of [
        [body, signReceipt(body, "whsec_wrong", t)],
        [tampered, signReceipt(body, SECRET, t)],
        [body, signReceipt(body, SECRET, t).replace(/t=\d+/, `t=${t - 1}`)],
        [body, `t=${t},v1=nothex`],
        [body, "v1 please"],
      ] as const) {
        expect(await post(sent, signature)).toMatchObject({ status: 401, body: { code: "signature_invalid" } });
      }
      expect(await everything()).toEqual({ findings: [], confirmations: [] });
      expect(await ledger.reconcile!.getReceipt("evt_1")).toBeUndefined();
    });

    it("a correctly signed receipt older (or newer) than the tolerance is refused as stale", async () => {
      await completed("toolu_1");
      const body = receipt("evt_1", "toolu_1", "msg_1");
      const now = Math.floor(clock.now() / 1000);
      expect(await signed(body, now - 301)).toMatchObject({ status: 401, body: { code: "signature_expired" } });
      expect(await signed(body, now + 301)).toMatchObject({ status: 401, body: { code: "signature_expired" } });
      expect(await everything()).toEqual({ findings: [], confirmations: [] });
      expect(await signed(body, now - 299)).toMatchObject({ status: 200 });
    });

    it("a replayed receipt (same id, same content, signed again) changes nothing and returns the first outcome", async () => {
      const body = receipt("evt_9", "toolu_unknown", "msg_9");
      const first = await signed(body);
      expect(first.status).toBe(200);
      const before = await ledger.reconcile!.listFindings({ limit: 1000 });
      clock.advance(60_000);
      const again = await signed(body);
      expect(again).toMatchObject({ status: 200, body: { receipt: "evt_9", duplicate: true, outcome: (first.body as { outcome: unknown }).outcome } });
      expect(await ledger.reconcile!.listFindings({ limit: 1000 })).toEqual(before);
      expect(before[0]?.timesSeen).toBe(1);
      const reused = await signed(receipt("evt_9", "toolu_unknown", "msg_10"));
      expect(reused).toMatchObject({ status: 409, body: { code: "receipt_id_reused" } });
      expect(await ledger.reconcile!.listFindings({ limit: 1000 })).toEqual(before);
    });

    it("a receipt for a key the ledger does not know opens an orphan_downstream finding", async () => {
      const res = await signed(receipt("evt_2", "toolu_nobody", "msg_2"));
      expect(res).toMatchObject({ status: 200, body: { outcome: { result: "finding", ledgerState: null } } });
      const findings = await ledger.reconcile!.listFindings();
      expect(findings).toEqual([expect.objectContaining({ kind: "orphan_downstream", key: "toolu_nobody", tenant: null, source: "receipt", status: "open" })]);
      expect((res.body as { outcome: { findings: string[] } }).outcome.findings).toEqual([findings[0]!.id]);
    });

    it("receipts open mismatch, duplicate and unresolved findings, and close a missing_downstream one", async () => {
      await completed("toolu_1");
      expect((await signed(receipt("evt_a", "toolu_1", "msg_1", { to: "bob@example.com" }))).body).toMatchObject({ outcome: { result: "finding" } });
      expect((await signed(receipt("evt_b", "toolu_1", "msg_2"))).body).toMatchObject({ outcome: { result: "finding" } });
      const { record } = await ledger.calls.claim(claimRequest({ key: "toolu_h", tool: "send_email", toolUseId: "toolu_h" }));
      await ledger.calls.update("acme", "toolu_h", record.version, { state: "needs_human", error: "timed out, no probe", owner: null });
      expect((await signed(receipt("evt_c", "toolu_h", "msg_3"))).body).toMatchObject({ outcome: { result: "finding", ledgerState: "needs_human" } });
      const kinds = (await ledger.reconcile!.listFindings()).map((f) => `${f.kind} ${f.key}`).sort();
      expect(kinds).toEqual(["duplicate_downstream toolu_1", "mismatch toolu_1", "unresolved toolu_h"]);

      // A scan found toolu_m missing downstream; its receipt arrives late.
      await completed("toolu_m");
      const { finding: missing } = await ledger.reconcile!.recordFinding({
        id: "f_missing_m", kind: "missing_downstream", tool: "send_email", tenant: "acme", key: "toolu_m", summary: "not there",
        ledger: null, downstream: [], differences: [], source: "scan",
      });
      expect(missing.status).toBe("open");
      expect((await signed(receipt("evt_d", "toolu_m", "msg_4"))).body).toMatchObject({ outcome: { result: "confirmed" } });
      expect(await ledger.reconcile!.getFinding("f_missing_m")).toMatchObject({ status: "resolved", resolvedBy: "effectgate reconcile" });
    });

    it("refuses what is not a receipt: GET 405, bad JSON 400, bad shape 400, unknown tool 422", async () => {
      expect((await fetch(server.url)).status).toBe(405);
      expect(await signed("{not json")).toMatchObject({ status: 400, body: { code: "invalid_json" } });
      expect(await signed(JSON.stringify({ id: "evt", tool: "send_email" }))).toMatchObject({ status: 400, body: { code: "invalid_receipt" } });
      expect(await signed(JSON.stringify({ id: "evt", tool: "launch_rocket", record: { ref: "r", key: "k" } }))).toMatchObject({ status: 422, body: { code: "unknown_tool" } });
    });
  });
}
