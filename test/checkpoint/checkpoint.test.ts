import { readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { fileCheckpoint } from "../../src/checkpoint/file.js";
import { ledgerCheckpoint } from "../../src/checkpoint/stored.js";
import type { AgentCheckpoint } from "../../src/contracts/checkpoints.js";
import { memoryLedger } from "../../src/stores/memory/index.js";
import { sqliteLedger } from "../../src/stores/sqlite/index.js";
import { createGate } from "../../src/root/create-gate.js";
import { chargeTool, counter, toolUse } from "../support/tools.js";
import { tempDir } from "../support/tmp.js";

const dir = tempDir();
const state: AgentCheckpoint = {
  scope: { tenant: "acme", task: "t1" },
  messages: [{ role: "user", content: "refund order 7" }],
  counters: { turns: 2 },
  pendingToolUse: [toolUse("toolu_c", "charge_card", { customer: "cus_1", amount: 7 })],
};

describe("fileCheckpoint", () => {
  it("round-trips the state and leaves no temp files behind", async () => {
    const cp = fileCheckpoint(join(dir, "a", "run.json"));
    expect(await cp.load()).toBeUndefined();
    await cp.save(state);
    await cp.save({ ...state, counters: { turns: 3 } });
    expect(await cp.load()).toEqual({ ...state, counters: { turns: 3 } });
    expect(readdirSync(join(dir, "a"))).toEqual(["run.json"]);
  });

  it("keeps every scope field (agent, session, saga) across save and load", async () => {
    const cp = fileCheckpoint(join(dir, "scope.json"));
    const scope = { tenant: "acme", task: "t1", agent: "billing-bot", session: "sess-9", saga: "order-7" };
    await cp.save({ ...state, scope });
    expect((await cp.load())?.scope).toEqual(scope);
  });

  it("a half-written (truncated) file is refused by name and kept", async () => {
    const file = join(dir, "truncated.json");
    const cp = fileCheckpoint(file);
    await cp.save(state);
    const full = readFileSync(file, "utf8");
    writeFileSync(file, full.slice(0, full.length / 2));
    await expect(cp.load()).rejects.toThrow(/EG_CHECKPOINT_CORRUPT: the checkpoint at .*truncated\.json is damaged \(not valid JSON/);
    expect(readFileSync(file, "utf8")).toBe(full.slice(0, full.length / 2));
  });

  it("a file of the wrong shape names the field", async () => {
    const file = join(dir, "shape.json");
    writeFileSync(file, JSON.stringify({ format: "effectgate.checkpoint/1", scope: { tenant: "acme" }, messages: [], counters: {}, pendingToolUse: null }));
    await expect(fileCheckpoint(file).load()).rejects.toThrow(/EG_CHECKPOINT_CORRUPT: .*scope\.task/);
  });

  it("a path that cannot be read is an error, not an empty checkpoint", async () => {
    await expect(fileCheckpoint(dir).load()).rejects.toThrow(/EG_CHECKPOINT_CORRUPT: cannot read the checkpoint/);
  });
});

describe("ledgerCheckpoint", () => {
  it("keeps the state in the ledger's store, per tenant", async () => {
    const ledger = sqliteLedger(join(dir, "cp.db"));
    const cp = ledgerCheckpoint(ledger, { tenant: "acme", id: "t1" });
    await cp.save(state);
    expect(await cp.load()).toEqual(state);
    expect(await ledgerCheckpoint(ledger, { tenant: "globex", id: "t1" }).load()).toBeUndefined();
    await ledger.checkpoints.put("acme", "broken", "{");
    await expect(ledgerCheckpoint(ledger, { tenant: "acme", id: "broken" }).load()).rejects.toThrow(/EG_CHECKPOINT_CORRUPT: the checkpoint at sqlite:.*checkpoint acme\/broken is damaged/);
    await ledger.close();
  });
});

describe("gate.resume", () => {
  it("answers the pending tool_use through the ledger: a call that already ran is not run again", async () => {
    const c = counter();
    const ledger = memoryLedger();
    const gate = createGate({ tools: [chargeTool(c)], ledger });
    const cp = fileCheckpoint(join(dir, "resume.json"));
    await cp.save(state);
    const first = await gate.runToolUses(state.pendingToolUse!, state.scope);
    const { checkpoint, toolResults } = await gate.resume(cp);
    expect(checkpoint).toEqual(state);
    expect(toolResults).toEqual(first);
    expect(c.total).toBe(1);
  });

  it("with nothing pending returns no results", async () => {
    const gate = createGate({ tools: [chargeTool(counter())], ledger: memoryLedger() });
    const cp = fileCheckpoint(join(dir, "idle.json"));
    await cp.save({ ...state, pendingToolUse: null });
    expect((await gate.resume(cp)).toolResults).toEqual([]);
    expect(await gate.resume(fileCheckpoint(join(dir, "never-saved.json")))).toEqual({ checkpoint: undefined, toolResults: [] });
  });
});
