/**
 * The saga log on PostgreSQL (its contract suite runs in test/ledger/postgres.test.ts): the order saga against the shop with
 * a PostgreSQL ledger (the server of EFFECTGATE_TEST_PG_URL, or an embedded one; see test/support/pg.ts).
 */
import { afterEach, describe, expect, it } from "vitest";
import { postgresLedger } from "../../src/stores/postgres/index.js";
import { createGate } from "../../src/root/create-gate.js";
import { startShopService } from "../../demo/shop-service.js";
import { placeOrder, shopTools } from "../../demo/shop-tools.js";
import { usePostgres } from "../support/pg.js";
import { beginRequest } from "../../src/testing/contract-suites/sagas.js";

const pg = usePostgres();

describe("sagas on a PostgreSQL ledger", () => {
  const closing: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const close of closing.splice(0).reverse()) await close();
  });

  it("the order saga fails at ship and is compensated in reverse order; the saga log is in the database", async () => {
    const shop = await startShopService({ stock: { "sku-1": 5 } });
    closing.push(() => shop.close());
    const schema = pg.freshSchema();
    const ledger = postgresLedger({ connectionString: pg.url }, { schema });
    closing.push(() => ledger.close());
    const gate = createGate({ tools: Object.values(shopTools(shop.url)), ledger, approveNonCompensable: () => true, onAlert: () => undefined });
    const before = shop.snapshot();
    shop.fail("shipments", { kind: 422 });
    const { status } = await placeOrder(gate, shopTools(shop.url), "order-1", { tenant: "acme", task: "checkout-1" }, {
      customer: "cus_1", sku: "sku-1", qty: 2, amount: 40, address: "1 Main St", email: "ada@example.com",
    });
    expect(status.state).toBe("compensated");
    expect(shop.snapshot()).toEqual(before);
    expect(await ledger.calls.get("acme", "saga:order-1:charge")).toMatchObject({ state: "compensated" });
    const rows = await pg.sql(`SELECT kind FROM "${schema}".saga_events WHERE saga_id = 'order-1' ORDER BY seq`);
    expect(rows.rows.map((r: { kind: string }) => r.kind).at(-1)).toBe("saga_compensated");
  });

  it("a damaged step row is refused by name, with the query to inspect it", async () => {
    const schema = pg.freshSchema();
    const ledger = postgresLedger({ connectionString: pg.url }, { schema });
    closing.push(() => ledger.close());
    await ledger.sagas!.begin(beginRequest(), { kind: "saga_started", message: "started" });
    await ledger.sagas!.addStep({
      tenant: "acme", sagaId: "order-1", name: "charge", tool: "charge_card", effect: "write", key: "k", input: {}, inputRedacted: false,
      fingerprint: "fp", compensable: true, compensation: { kind: "hook" }, approval: "not_needed", state: "pending",
    });
    await pg.sql(`UPDATE "${schema}".saga_steps SET state = 'exploded'`);
    await expect(ledger.sagas!.getStep("acme", "order-1", "charge")).rejects.toThrow(
      /EG_LEDGER_CORRUPT: .*damaged row: step charge of saga acme\/order-1 has an unknown state "exploded".*SELECT \* FROM "eg_test_\w+".saga_steps WHERE tenant = 'acme'/);
  });

  it("a read-only ledger reads sagas and refuses to change them", async () => {
    const schema = pg.freshSchema();
    const writer = postgresLedger({ connectionString: pg.url }, { schema });
    closing.push(() => writer.close());
    await writer.sagas!.begin(beginRequest(), { kind: "saga_started", message: "started" });
    const reader = postgresLedger({ connectionString: pg.url }, { schema, readOnly: true });
    closing.push(() => reader.close());
    expect((await reader.sagas!.get("acme", "order-1"))?.state).toBe("running");
    await expect(reader.sagas!.update("acme", "order-1", 1, { state: "completed" })).rejects.toThrow(/EG_LEDGER_UNAVAILABLE: .*read-only/);
  });
});
