/**
 * The receipts endpoint on memory and SQLite (PostgreSQL: postgres.test.ts), plus what does not
 * depend on the store: a ledger that is down, secret rotation, the signature header's forms.
 */
import { request } from "node:http";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import type { Stores } from "../../src/contracts/stores.js";
import { memoryLedger } from "../../src/stores/memory/index.js";
import { sqliteLedger } from "../../src/stores/sqlite/index.js";
import { receiptsEndpoint, signReceipt, verifyReceiptSignature } from "../../src/server.js";
import { EffectgateError } from "../../src/core/errors.js";
import { tempDir } from "../support/tmp.js";
import { receipt, runReceiptSuite, SECRET, serve } from "./receipts.js";

const dir = tempDir("effectgate-receipts-");
let n = 0;
runReceiptSuite("memory", () => memoryLedger());
runReceiptSuite("sqlite", () => sqliteLedger(join(dir, `receipts-${n++}.db`), { durability: "process" }));

describe("receipts endpoint: failure and rotation", () => {
  it("answers 503 when the ledger is unavailable, and the redelivered receipt is applied once", async () => {
    const inner = memoryLedger();
    let failures = 1;
    const flaky: Stores = {
      ...inner,
      calls: {
        ...inner.calls,
        async list(query) {
          if (failures-- > 0) throw new EffectgateError("EG_LEDGER_UNAVAILABLE", "the database is restarting");
          return inner.calls.list(query);
        },
      },
    };
    const errors: string[] = [];
    const server = await serve({ ledger: flaky, secret: SECRET, onError: (err, ctx) => errors.push(`${ctx.phase} ${ctx.receipt} ${String(err)}`) });
    try {
      const body = receipt("evt_r", "toolu_q", "msg_q");
      const send = () => fetch(server.url, { method: "POST", headers: { "effectgate-signature": signReceipt(body, SECRET) }, body });
      const first = await send();
      expect(first.status).toBe(503);
      expect(first.headers.get("retry-after")).toBe("1");
      expect(errors).toEqual([expect.stringMatching(/^apply evt_r EffectgateError: EG_LEDGER_UNAVAILABLE/)]);
      const second = await send();
      expect(second.status).toBe(200);
      expect(await second.json()).toMatchObject({ duplicate: false, outcome: { result: "finding" } });
      expect(await inner.reconcile!.listFindings()).toHaveLength(1);
      expect(await (await send()).json()).toMatchObject({ duplicate: true });
    } finally {
      await server.close();
    }
  });

  it("accepts a receipt signed with any of the current secrets while one is rotated", async () => {
    const ledger = memoryLedger();
    const server = await serve({ ledger, secret: ["whsec_new", SECRET] });
    try {
      for (const [id, secret] of [["evt_old", SECRET], ["evt_new", "whsec_new"]] as const) {
        const body = receipt(id, "toolu_z", `msg_${id}`);
        const res = await fetch(server.url, { method: "POST", headers: { "effectgate-signature": signReceipt(body, secret) }, body });
        expect(res.status).toBe(200);
      }
    } finally {
      await server.close();
    }
  });

  it("verifyReceiptSignature: several v1 entries, one matching, pass; a header sent twice is refused", async () => {
    const body = Buffer.from("{}");
    const now = 1_700_000_000_000;
    const good = signReceipt(body, SECRET, now / 1000);
    const v1 = good.split("v1=")[1]!;
    expect(verifyReceiptSignature(body, `t=${now / 1000},v1=${"0".repeat(64)},v1=${v1}`, [SECRET], { toleranceSec: 300, nowMs: now })).toEqual({ ok: true, timestampSec: now / 1000 });
    expect(() => receiptsEndpoint({ ledger: memoryLedger(), secret: "" })).toThrow(/non-empty secret/);
    const server = await serve({ ledger: memoryLedger(), secret: SECRET });
    try {
      const signature = signReceipt("{}", SECRET);
      const status = await new Promise<number>((resolve, reject) => {
        const req = request(server.url, { method: "POST" }, (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        });
        req.setHeader("Effectgate-Signature", [signature, signature]);
        req.on("error", reject);
        req.end("{}");
      });
      expect(status).toBe(401);
    } finally {
      await server.close();
    }
  });
});
