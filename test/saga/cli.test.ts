/**
 * The saga commands, run as a user would (the BUILT CLI in a child process) against a real
 * SQLite ledger written by sagas that ran against the simulated shop: a compensation failure
 * lands on the human queue with the saga's full history and is resolved by hand; an operator
 * rolls back a completed saga, carried out by the next gate.recover().
 */
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createGate } from "../../src/root/create-gate.js";
import { sqliteLedger } from "../../src/stores/sqlite/index.js";
import { startShopService, type ShopService } from "../../demo/shop-service.js";
import { placeOrder, shopTools, type OrderRequest } from "../../demo/shop-tools.js";
import { runCli } from "../cli/run-cli.js";
import { tempDir } from "../support/tmp.js";

const dir = tempDir("effectgate-saga-cli-");
const db = join(dir, "ledger.db");
const request: OrderRequest = { customer: "cus_1", sku: "sku-1", qty: 2, amount: 40, address: "1 Main St", email: "ada@example.com" };
let shop: ShopService;

function gateOn(file: string) {
  return createGate({
    tools: Object.values(shopTools(shop.url)),
    ledger: sqliteLedger(file, { durability: "process" }),
    approveNonCompensable: () => true,
    probe: { attempts: 1, initialDelayMs: 1 },
    onAlert: () => undefined,
  });
}

beforeAll(async () => {
  shop = await startShopService({ stock: { "sku-1": 10 } });
  const gate = gateOn(db);
  const tools = shopTools(shop.url);
  // order-1: ship fails, and the refund is refused too → compensation_failed (the human queue).
  shop.fail("shipments", { kind: 422, times: 1 });
  shop.fail("payments/refund", { kind: 422, times: 1 });
  await placeOrder(gate, tools, "order-1", { tenant: "acme", task: "checkout-1" }, request);
  shop.clearFaults();
  // order-2: completes (the e-mail approved).
  await placeOrder(gate, tools, "order-2", { tenant: "acme", task: "checkout-2" }, request);
  // twin: the same id in two tenants.
  await gate.saga("twin", { tenant: "acme", task: "t" }).start();
  await gate.saga("twin", { tenant: "globex", task: "t" }).start();
  await gate.close();
});

afterAll(async () => {
  await shop.close();
});

describe("effectgate saga", () => {
  it("ls lists the sagas, and --state compensation_failed is the human queue", async () => {
    const all = await runCli(["saga", "ls", "--db", db]);
    expect(all.code).toBe(0);
    expect(all.stdout).toMatch(/ID\s+TENANT\s+TASK\s+STATE\s+STEPS\s+UPDATED\s+REASON/);
    expect(all.stdout).toMatch(/order-1\s+acme\s+checkout-1\s+compensation_failed\s+4 /);
    expect(all.stdout).toMatch(/order-2\s+acme\s+checkout-2\s+completed\s+5 /);
    const queue = await runCli(["saga", "ls", "--db", db, "--state", "compensation_failed", "--json"]);
    expect(JSON.parse(queue.stdout).map((s: { id: string }) => s.id)).toEqual(["order-1"]);
    expect((await runCli(["saga", "ls", "--db", db, "--state", "nope"])).code).toBe(2);
  });

  it("show prints the failed step for a person, with its call, input, result and the saga's full history", async () => {
    const shown = await runCli(["saga", "show", "order-1", "--db", db]);
    expect(shown.code, shown.stderr).toBe(0);
    const out = shown.stdout;
    expect(out).toMatch(/Saga order-1 in tenant acme/);
    expect(out).toMatch(/state\s+compensation_failed/);
    expect(out).toMatch(/Needs a person:\n {2}- charge \(charge_payment, call saga:order-1:charge\): its compensation failed\./);
    expect(out).toMatch(/refund_payment failed: .*injected fault on payments\/refund/);
    expect(out).toMatch(/Result: \{"id":"P-1","order":"O-1","customer":"cus_1","amount":40,"refunded":false\}/);
    expect(out).toMatch(/effectgate saga resolve order-1 --tenant acme --undone --note/);
    expect(out).toMatch(/saga:order-1:charge {2}\(compensation: saga:order-1:charge:compensate\)/);
    for (const kind of ["saga_started", "step_started", "step_completed", "step_failed", "compensation_started", "step_compensation_failed", "step_compensated", "saga_compensation_failed"]) {
      expect(out).toContain(kind);
    }
    const json = JSON.parse((await runCli(["saga", "show", "order-1", "--db", db, "--json"])).stdout);
    expect(json.saga).toMatchObject({ id: "order-1", state: "compensation_failed" });
    expect(json.steps.map((s: { name: string; state: string }) => [s.name, s.state])).toEqual([
      ["order", "compensated"], ["reserve", "compensated"], ["charge", "compensation_failed"], ["ship", "failed"],
    ]);
    expect(json.history.at(-1)).toMatchObject({ kind: "saga_compensation_failed" });
  });

  it("show: an unknown id exits 1, an id in two tenants asks for --tenant (exit 2)", async () => {
    expect(await runCli(["saga", "show", "ghost", "--db", db])).toMatchObject({ code: 1, stderr: expect.stringMatching(/no saga "ghost"/) });
    expect(await runCli(["saga", "show", "twin", "--db", db])).toMatchObject({ code: 2, stderr: expect.stringMatching(/exists in 2 tenants \(acme, globex\)/) });
    expect((await runCli(["saga", "show", "twin", "--db", db, "--tenant", "globex"])).code).toBe(0);
    expect(await runCli(["saga", "show", "order-1", "--db", join(dir, "missing.db")])).toMatchObject({ code: 2 });
  });

  it("resolve needs a note and an outcome, and only settles a compensation_failed saga", async () => {
    expect((await runCli(["saga", "resolve", "order-1", "--db", db, "--undone"])).code).toBe(2);
    expect((await runCli(["saga", "resolve", "order-1", "--db", db, "--note", "x"])).code).toBe(2);
    expect((await runCli(["saga", "resolve", "order-1", "--db", db, "--note", "x", "--undone", "--kept"])).code).toBe(2);
    expect(await runCli(["saga", "resolve", "order-2", "--db", db, "--note", "x", "--kept"])).toMatchObject({
      code: 1, stderr: expect.stringMatching(/saga order-2 is completed; only a compensation_failed saga is resolved by a person/),
    });
  });

  it("resolve --undone settles the human queue entry: the saga resolved, the step and its call compensated, the note in the history", async () => {
    const resolved = await runCli(["saga", "resolve", "order-1", "--db", db, "--undone", "--by", "ops-ann", "--note", "refunded P-1 by hand in the payments console"]);
    expect(resolved.code, resolved.stderr).toBe(0);
    expect(resolved.stdout).toMatch(/Saga order-1 \(tenant acme\) is resolved: undone by hand by ops-ann: refunded P-1 by hand/);
    const json = JSON.parse((await runCli(["saga", "show", "order-1", "--db", db, "--json"])).stdout);
    expect(json.saga).toMatchObject({ state: "resolved", resolution: "undone by hand by ops-ann: refunded P-1 by hand in the payments console" });
    expect(json.steps.find((s: { name: string }) => s.name === "charge")).toMatchObject({ state: "compensated" });
    expect(json.history.at(-1)).toMatchObject({ kind: "resolved", data: { by: "ops-ann", outcome: "undone", steps: ["charge"] } });
    const call = JSON.parse((await runCli(["ledger", "show", "saga:order-1:charge", "--db", db, "--json"])).stdout);
    expect(call).toMatchObject({ state: "compensated" });
    expect((await runCli(["saga", "ls", "--db", db, "--state", "compensation_failed"])).stdout).toMatch(/^No sagas/);
    expect((await runCli(["saga", "resolve", "order-1", "--db", db, "--note", "again", "--kept"])).code).toBe(1);
  });

  it("resolve --kept takes the saga's calls off the human queue: queue ls no longer lists them, queue show says why", async () => {
    const gate = gateOn(db);
    shop.fail("shipments", { kind: 422, times: 1 });
    shop.fail("payments/refund", { kind: 422, times: 1 });
    await placeOrder(gate, shopTools(shop.url), "order-3", { tenant: "acme", task: "checkout-3" }, request);
    shop.clearFaults();
    await gate.close();
    const queued = JSON.parse((await runCli(["queue", "ls", "--db", db, "--json"])).stdout) as { id: string; kind: string }[];
    expect(queued).toContainEqual(expect.objectContaining({ id: "saga:order-3:charge", kind: "compensation_failed" }));

    const kept = await runCli(["saga", "resolve", "order-3", "--db", db, "--kept", "--by", "ops-ann", "--note", "the customer keeps the charge as store credit"]);
    expect(kept.code, kept.stderr).toBe(0);
    const after = JSON.parse((await runCli(["queue", "ls", "--db", db, "--json"])).stdout) as { id: string }[];
    expect(after.map((i) => i.id).filter((id) => id.startsWith("saga:order-3:"))).toEqual([]);
    const shown = await runCli(["queue", "show", "saga:order-3:charge", "--db", db]);
    expect(shown.code, shown.stderr).toBe(0);
    expect(shown.stdout.replace(/\s+/g, " ")).toMatch(/not waiting for a person: saga order-3 was resolved \(kept as it is by ops-ann: the customer keeps the charge as store credit\)/);
    // The call's record still says what happened to it: its undo failed, and it was kept.
    expect(JSON.parse((await runCli(["ledger", "show", "saga:order-3:charge", "--db", db, "--json"])).stdout)).toMatchObject({ state: "compensation_failed" });
  });

  it("compensate marks a completed saga for rollback; the next gate.recover() with the tools carries it out", async () => {
    const before = shop.snapshot();
    const marked = await runCli(["saga", "compensate", "order-2", "--db", db, "--note", "customer returned it"]);
    expect(marked.code, marked.stderr).toBe(0);
    expect(marked.stdout).toMatch(/was completed; it is now marked for compensation \(4 steps to undo\)/);
    expect(shop.snapshot()).toEqual(before);
    expect((await runCli(["saga", "compensate", "order-2", "--db", db])).stdout).toMatch(/already compensating; nothing changed/);
    const gate = gateOn(db);
    try {
      const summary = await gate.recover();
      // The two "twin" sagas are held by the gate that started them, in this (live) process: left alone.
      expect(summary.sagas).toMatchObject({ examined: 3, compensated: 1, leftForLater: 2 });
    } finally {
      await gate.close();
    }
    const after = shop.snapshot();
    expect(after.openOrders).toEqual(before.openOrders.filter((o) => o !== "O-2"));
    expect(after.activeShipments).toEqual([]);
    // order-1's charge was refunded by hand, outside the shop; order-3's was kept.
    expect(after.balance).toEqual({ cus_1: 80 });
    expect(after.mails).toEqual(before.mails); // the approved e-mail stays
    const json = JSON.parse((await runCli(["saga", "show", "order-2", "--db", db, "--json"])).stdout);
    expect(json.saga.state).toBe("compensated");
    expect(json.history.map((e: { kind: string }) => e.kind)).toContain("compensation_requested");
    expect(await runCli(["saga", "compensate", "order-2", "--db", db])).toMatchObject({ code: 1, stderr: expect.stringMatching(/saga order-2 is compensated/) });
  });

  it("--help explains how compensation is carried out and the states", async () => {
    const help = await runCli(["saga", "compensate", "--help"]);
    expect(help.code).toBe(0);
    expect(help.stdout).toMatch(/the next `gate.recover\(\)` of a process\s+created with the saga's tools/);
    expect((await runCli(["saga", "--help"])).stdout).toMatch(/compensation_failed\s+a compensation failed/);
  });
});
