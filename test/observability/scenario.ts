/**
 * One gate run through every way a call can be answered, for the observability tests: executed,
 * replayed, refused (bad input, kill switch), waiting (approval), probed (a dead worker's call
 * whose probe finds the effect), and a tool failure. The tools count what they really did.
 */
import { z } from "zod";
import { defineTool } from "../../src/core/tool.js";
import { fingerprint } from "../../src/core/keys.js";
import { createGate, type GateOptions } from "../../src/root/create-gate.js";
import { memoryLedger } from "../../src/stores/memory/index.js";
import type { Stores } from "../../src/contracts/stores.js";
import type { GateObserver } from "../../src/gate/observe.js";
import type { Alert } from "../../src/gate/alerts.js";
import { deleteAccountTool, effects, emailTool, use } from "../governance/support.js";

export const scope = { tenant: "acme", task: "t1", agent: "support-bot" };
export const SECRET = "secret-recipient@example.com";

/**
 * The ledger the scenario runs on, and how the dead worker's lease runs out there: the memory
 * ledger's clock is moved by hand; a SQLite or PostgreSQL ledger judges leases by the database's
 * own clock, so the claim's lease is 1 ms and the scenario waits until the database says it ran out.
 */
export interface ScenarioLedger {
  readonly ledger: Stores;
  readonly leaseMs: number;
  expireLease(): Promise<void>;
}

export function memoryScenarioLedger(): ScenarioLedger {
  let storeNow = 1_800_000_000_000;
  return { ledger: memoryLedger({ clock: () => storeNow }), leaseMs: 1_000, expireLease: async () => void (storeNow += 60_000) };
}

/** A durable ledger: the lease of 1 ms has run out once the store's own clock moved past it (a few ms later). */
export function durableScenarioLedger(ledger: Stores): ScenarioLedger {
  return {
    ledger, leaseMs: 1,
    async expireLease() {
      // The database runs on this machine's clock: a few ms past the expiry it has run out there too.
      const expires = (await ledger.calls.get(scope.tenant, "toolu_charge"))?.leaseExpiresAt ?? 0;
      while (Date.now() <= expires + 5) await new Promise((resolve) => setTimeout(resolve, 2));
    },
  };
}

export async function runScenario(observers: readonly GateObserver[], extra: Partial<GateOptions> = {}, on: ScenarioLedger = memoryScenarioLedger()) {
  const fx = effects();
  const { ledger } = on;
  const charged = new Set<string>();
  const charge = defineTool({
    name: "charge_card", effect: "write", input: z.object({ amount: z.number() }),
    async execute(input, ctx) {
      fx.log.push(`charge_card:${ctx.idempotencyKey}`);
      charged.add(ctx.idempotencyKey);
      return { charged: input.amount };
    },
    probe: async (_input, ctx) => (charged.has(ctx.idempotencyKey) ? { status: "done", result: { charged: 5 } } : { status: "absent" }),
  });
  const failing = defineTool({
    name: "flaky", effect: "write", input: z.object({}),
    async execute() {
      fx.log.push("flaky:-");
      throw Object.assign(new Error("rejected by the downstream"), { status: 400 });
    },
  });
  const alerts: Alert[] = [];
  const gate = createGate({
    tools: [emailTool(fx), deleteAccountTool(fx), charge, failing], ledger, observers, onAlert: (a) => void alerts.push(a), ...extra,
  });
  const run = async (id: string, name: string, input: unknown) => (await gate.runToolUses([use(id, name, input)], scope))[0]!;

  const executed = await run("toolu_mail", "send_email", { to: SECRET });
  const replayed = await run("toolu_mail", "send_email", { to: SECRET });
  const invalid = await run("toolu_bad", "send_email", { to: 42 });
  const waiting = await run("toolu_del", "delete_account", { account: "acc_1" });
  const failed = await run("toolu_flaky", "flaky", {});

  // A worker that charged the card and died before recording it: its claim's lease runs out.
  const input = { amount: 5 };
  const claim = await ledger.calls.claim({
    tenant: scope.tenant, key: "toolu_charge", tool: "charge_card", effect: "write", task: scope.task, toolUseId: "toolu_charge",
    fingerprint: fingerprint("charge_card", input), input, inputRedacted: false, owner: "dead-worker/1", leaseMs: on.leaseMs,
  });
  charged.add(claim.record.key);
  await on.expireLease();
  const probed = await run("toolu_charge", "charge_card", input);

  await ledger.governance!.setKillSwitch({ tenant: scope.tenant }, true, { by: "test" }, Date.now());
  const killed = await run("toolu_mail2", "send_email", { to: "b" });
  await gate.close();
  return { fx, alerts, answers: { executed, replayed, invalid, waiting, failed, probed, killed } };
}
