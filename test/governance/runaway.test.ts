/**
 * A loop hallucinates 500 destructive calls (DESIGN.md §1). With an approval bot that approves
 * everything, only quotas and rate breakers stand in the way: the number of real effects must
 * equal the limit exactly, in one process and with 4 processes sharing one SQLite ledger.
 */
import { readFileSync, existsSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { defineTool } from "../../src/core/tool.js";
import { createGate } from "../../src/root/create-gate.js";
import type { Stores } from "../../src/contracts/stores.js";
import { memoryLedger } from "../../src/stores/memory/index.js";
import { sqliteLedger } from "../../src/stores/sqlite/index.js";
import type { Policy } from "../../src/governance/policy.js";
import { requireBuild, startWorker } from "../support/processes.js";
import { tempDir } from "../support/tmp.js";
import { alerts } from "./support.js";

const WORKER = fileURLToPath(new URL("./fixtures/runaway-worker.mjs", import.meta.url));
const CALLS = 500;
const dir = tempDir();
let n = 0;

async function runaway(ledger: Stores, policy: Policy, approve: boolean) {
  const effects: string[] = [];
  const tool = defineTool({
    name: "delete_record", effect: "destructive", input: z.object({ record: z.string() }),
    async execute(input) {
      effects.push(input.record);
      return { deleted: input.record };
    },
    dryRun: (input) => ({ effect: "would_delete", would_affect: { record: input.record }, reversible: false }),
  });
  const seen = alerts();
  const gate = createGate({ ledger, tools: [tool], policy, onAlert: seen.onAlert, ...(approve ? { approver: () => ({ approve: true, by: "bot" }) } : {}) });
  const codes = new Map<string, number>();
  for (let i = 0; i < CALLS; i += 10) {
    const batch = Array.from({ length: 10 }, (_, j) => ({ type: "tool_use", id: `toolu_${i + j}`, name: "delete_record", input: { record: `rec_${i + j}` } }));
    for (const r of await gate.runToolUses(batch, { tenant: "acme", task: "runaway" })) {
      const code = r.is_error ? r.content.split(":")[0]! : "ok";
      codes.set(code, (codes.get(code) ?? 0) + 1);
    }
  }
  return { effects, codes: Object.fromEntries(codes), alerts: seen.list.map((a) => a.code), gate };
}

const stores: [string, () => Stores][] = [
  ["memory", () => memoryLedger()],
  ["sqlite", () => sqliteLedger(join(dir, `runaway-${n++}.db`), { durability: "process" })],
];

describe("a runaway loop of 500 destructive calls, in one process", () => {
  for (const [name, make] of stores) {
    it(`${name}: a quota of 7 per task lets exactly 7 effects happen`, async () => {
      const { effects, codes } = await runaway(make(), { quotas: [{ per: "task", tool: "delete_record", limit: 7 }] }, true);
      expect(effects).toHaveLength(7);
      expect(codes).toEqual({ ok: 7, EG_QUOTA_EXCEEDED: 493 });
    });

    it(`${name}: a breaker of 10 per hour lets exactly 10 happen, then stops the task and alerts once`, async () => {
      const { effects, codes, alerts: raised } = await runaway(make(), { rateLimits: [{ per: "task", class: "destructive", limit: 10, windowMs: 3_600_000 }] }, true);
      expect(effects).toHaveLength(10);
      expect(codes).toEqual({ ok: 10, EG_BREAKER_OPEN: 490 });
      expect(raised).toEqual(["breaker_open"]);
    });
  }

  it("without an approver nothing runs, and the breaker also stops the flood of approval requests", async () => {
    const ledger = memoryLedger();
    const { effects, codes } = await runaway(ledger, { rateLimits: [{ per: "task", class: "destructive", limit: 25, windowMs: 3_600_000 }] }, false);
    expect(effects).toEqual([]);
    expect(codes).toEqual({ EG_AWAITING_APPROVAL: 25, EG_BREAKER_OPEN: 475 });
    expect(await ledger.governance!.listApprovals({ limit: 1000 })).toHaveLength(25);
  });
});

describe("a runaway loop in 4 processes sharing one SQLite ledger", () => {
  beforeAll(() => requireBuild());

  // Limits large enough that the workers' batches interleave before the limit is reached.
  for (const [mode, limit, refusal] of [["quota", 37, "EG_QUOTA_EXCEEDED"], ["breaker", 53, "EG_BREAKER_OPEN"]] as const) {
    it(`${mode}: 4 × 500 calls, exactly ${limit} effects in all`, async () => {
      const ledger = join(dir, `runaway-4p-${mode}.db`);
      const effectsFile = join(dir, `effects-${mode}.log`);
      const workers = [0, 1, 2, 3].map((w) => startWorker(WORKER, [ledger, effectsFile, String(w), String(CALLS), mode, String(limit)]));
      await Promise.all(workers.map((w) => w.line((l) => l === "ready")));
      for (const w of workers) w.child.stdin.write("go\n");
      const outputs = await Promise.all(workers.map(async (w) => JSON.parse(await w.line((l) => l.startsWith("{"))) as { counts: Record<string, number>; executed: number; alerts: string[] }));
      const exits = await Promise.all(workers.map((w) => w.exited));
      expect(exits.map((e) => e.code), exits.map((e) => e.stderr).join("\n")).toEqual([0, 0, 0, 0]);

      const effects = existsSync(effectsFile) ? readFileSync(effectsFile, "utf8").trim().split("\n").filter((l) => l !== "") : [];
      const seen = `answers per worker: ${JSON.stringify(outputs.map((o) => o.counts))}`;
      expect(effects, seen).toHaveLength(limit);
      expect(new Set(effects).size).toBe(limit);
      expect(outputs.reduce((sum, o) => sum + o.executed, 0)).toBe(limit);
      expect(outputs.reduce((sum, o) => sum + (o.counts.ok ?? 0), 0)).toBe(limit);
      expect(outputs.reduce((sum, o) => sum + (o.counts[refusal] ?? 0), 0), seen).toBe(4 * CALLS - limit);
      if (mode === "breaker") expect(outputs.flatMap((o) => o.alerts).filter((a) => a === "breaker_open")).toHaveLength(1);
      console.log(`runaway ${mode}: per-worker effects ${outputs.map((o) => o.executed).join(" + ")} = ${limit}`);
    });
  }
});
