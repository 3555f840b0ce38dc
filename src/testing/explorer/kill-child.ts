/**
 * One worker of the explorer's real-kill mode (kills.ts), run as a child process: it sends one
 * message of charge calls through a gate on the shared ledger (and replays it once), counting
 * every durable step (each ledger operation before and after it commits, each fault point), and
 * SIGKILLs itself at the step the parent chose. It prints a JSON line when it starts a tool and
 * for every answer, so the parent can hold what the agent was told against what happened.
 *
 *   node kill-child.js '<json KillChildConfig>'
 */
import type { Stores } from "../../contracts/stores.js";
import { createGate } from "../../root/create-gate.js";
import { sqliteLedger } from "../../stores/sqlite/index.js";
import { chargeTool, type ChargeToolOptions } from "./http-tools.js";

export interface KillChildConfig {
  readonly ledger: { readonly sqlite: string } | { readonly postgres: string; readonly schema: string };
  readonly url: string;
  readonly tool: ChargeToolOptions;
  readonly tenant: string;
  readonly calls: readonly { readonly id: string; readonly ref: string; readonly amount: number }[];
  /** The durable step (from 1) at which this process kills itself; beyond the last, it finishes. */
  readonly killAt: number;
  readonly leaseMs: number;
}

let steps = 0;
let killAt = Number.POSITIVE_INFINITY;

function step(): void {
  if (++steps === killAt) process.kill(process.pid, "SIGKILL");
}

function counting(stores: Stores): Stores {
  const wrap = <T extends object>(store: T): T => new Proxy(store, {
    get(target, name, receiver) {
      const member: unknown = Reflect.get(target, name, receiver);
      if (typeof member !== "function") return member;
      return async (...args: unknown[]) => {
        step();
        const result: unknown = await (member as (...a: unknown[]) => Promise<unknown>).apply(target, args);
        step();
        return result;
      };
    },
  });
  return {
    ...stores,
    calls: wrap(stores.calls),
    checkpoints: wrap(stores.checkpoints),
    ...(stores.sagas ? { sagas: wrap(stores.sagas) } : {}),
    ...(stores.governance ? { governance: wrap(stores.governance) } : {}),
    ...(stores.reconcile ? { reconcile: wrap(stores.reconcile) } : {}),
  };
}

function print(line: object): void {
  process.stdout.write(`${JSON.stringify(line)}\n`);
}

async function main(): Promise<void> {
  const config = JSON.parse(process.argv[2] ?? "{}") as KillChildConfig;
  killAt = config.killAt;
  const base = "sqlite" in config.ledger
    ? sqliteLedger(config.ledger.sqlite, { durability: "process" })
    : (await import("../../stores/postgres/index.js")).postgresLedger({ connectionString: config.ledger.postgres, poolSize: 2 }, { schema: config.ledger.schema, durability: "process" });
  const gate = createGate({
    tools: [chargeTool(config.url, config.tool, (ctx) => print({ started: ctx.toolUseId }))],
    ledger: counting(base),
    leaseMs: config.leaseMs,
    waitMs: 0,
    onAlert: () => undefined,
    faults: () => step(),
  });
  const scope = { tenant: config.tenant, task: "kill" };
  const blocks = config.calls.map((c) => ({ type: "tool_use" as const, id: c.id, name: "charge", input: { ref: c.ref, amount: c.amount } }));
  for (let round = 0; round < 2; round++) {
    for (const answer of await gate.runToolUses(blocks, scope)) print({ answer });
  }
  await gate.drain();
  await gate.close();
  await base.close();
  print({ done: true, steps });
}

main().catch((err: unknown) => {
  print({ error: String(err) });
  process.exitCode = 1;
});
