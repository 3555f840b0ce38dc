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
import type { GateObserver } from "../../src/gate/observe.js";
import type { Alert } from "../../src/gate/alerts.js";
import { deleteAccountTool, effects, emailTool, use } from "../governance/support.js";

export const scope = { tenant: "acme", task: "t1", agent: "support-bot" };
export const SECRET = "secret-recipient@example.com";

export async function runScenario(observers: readonly GateObserver[], extra: Partial<GateOptions> = {}) {
  const fx = effects();
  let storeNow = 1_800_000_000_000;
  const ledger = memoryLedger({ clock: () => storeNow });
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
    fingerprint: fingerprint("charge_card", input), input, inputRedacted: false, owner: "dead-worker/1", leaseMs: 1_000,
  });
  charged.add(claim.record.key);
  storeNow += 60_000;
  const probed = await run("toolu_charge", "charge_card", input);

  await ledger.governance!.setKillSwitch({ tenant: scope.tenant }, true, { by: "test" }, Date.now());
  const killed = await run("toolu_mail2", "send_email", { to: "b" });
  await gate.close();
  return { fx, alerts, answers: { executed, replayed, invalid, waiting, failed, probed, killed } };
}
