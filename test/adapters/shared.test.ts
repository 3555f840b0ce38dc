/**
 * The shared adapter surface on the gate: runTool (one call by an SDK's call id, its recorded
 * value), approvalFor (durable approvals behind an SDK's approval surface) and stoppedTools
 * (what prepareStep-style helpers drop). Effects are counted in a real HTTP downstream.
 */
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { createGate, defineTool, type Gate } from "../../src/index.js";
import { closeBreaker, decideCall, listBreakers, setKillSwitch } from "../../src/operator.js";
import { sqliteLedger } from "../../src/sqlite.js";
import { startChargeService, type ChargeService } from "../support/charge-service.js";
import { tempDir } from "../support/tmp.js";

const scope = { tenant: "acme", task: "t1" };
const open: { gate: Gate; service: ChargeService }[] = [];

afterEach(async () => {
  for (const { gate, service } of open.splice(0)) {
    await gate.close();
    await service.close();
  }
});

async function setup(options: { rate?: boolean } = {}) {
  const service = await startChargeService({ instant: true });
  const charge = defineTool({
    name: "charge_card",
    effect: "write",
    input: z.object({ amount: z.number() }),
    async execute(input, ctx) {
      const res = await fetch(`${service.url}/charges`, {
        method: "POST", headers: { "content-type": "application/json", "idempotency-key": ctx.idempotencyKey }, body: JSON.stringify(input),
      });
      return (await res.json());
    },
  });
  const refund = defineTool({
    name: "refund",
    effect: "destructive",
    input: z.object({ charge: z.string() }),
    execute: (input) => ({ refunded: input.charge }),
    dryRun: (input) => ({ effect: "would_refund", would_affect: { charge: input.charge }, reversible: false }),
  });
  const label = defineTool({ name: "label", effect: "write", input: z.object({ text: z.string() }), execute: (input) => input.text });
  const look = defineTool({ name: "look", effect: "read", input: z.object({}), execute: () => ({ plan: "pro" }) });
  const gate = createGate({
    tools: [charge, refund, label, look],
    ledger: sqliteLedger(join(tempDir(), "ledger.db")),
    ...(options.rate ? { policy: { rateLimits: [{ per: "task", limit: 1, windowMs: 60_000, class: "write" }] } } : {}),
    onAlert: () => {},
  });
  open.push({ gate, service });
  return { gate, service };
}

describe("gate.runTool", () => {
  it("runs a call once by its SDK id and answers every replay with the recorded value", async () => {
    const { gate, service } = await setup();
    const first = await gate.runTool({ id: "call_1", name: "charge_card", input: { amount: 5 } }, scope);
    const again = await gate.runTool({ id: "call_1", name: "charge_card", input: { amount: 5 } }, scope);
    expect(service.charges).toHaveLength(1);
    expect(first.ok && again.ok).toBe(true);
    expect(again.ok && again.result).toEqual(first.ok && first.result);
    expect(first.ok && (first.result as { id: string }).id).toBe(service.charges[0]?.id);
  });

  it("keeps a string result a string (not parsed as JSON) on a replay", async () => {
    const { gate } = await setup();
    await gate.runTool({ id: "l1", name: "label", input: { text: "42" } }, scope);
    const again = await gate.runTool({ id: "l1", name: "label", input: { text: "42" } }, scope);
    expect(again.ok && again.result).toBe("42");
  });

  it("runs an adapter's own execute for the call, and never on a replay", async () => {
    const { gate } = await setup();
    const calls: string[] = [];
    const execute = (input: unknown) => {
      calls.push("sdk");
      return { wrapped: input };
    };
    const first = await gate.runTool({ id: "w1", name: "label", input: { text: "x" } }, scope, { execute });
    const again = await gate.runTool({ id: "w1", name: "label", input: { text: "x" } }, scope, { execute });
    expect(calls).toEqual(["sdk"]);
    expect(first.ok && first.result).toEqual({ wrapped: { text: "x" } });
    expect(again.ok && again.result).toEqual({ wrapped: { text: "x" } });
  });

  it("answers a read with its value, and a bad call with an error answer, never a throw", async () => {
    const { gate } = await setup();
    expect(await gate.runTool({ id: "r1", name: "look", input: {} }, scope)).toMatchObject({ ok: true, result: { plan: "pro" } });
    expect(await gate.runTool({ id: "b1", name: "charge_card", input: { amount: "x" } }, scope)).toMatchObject({ ok: false, code: "EG_INVALID_INPUT" });
    expect(await gate.runTool({ id: "b2", name: "nope", input: {} }, scope)).toMatchObject({ ok: false, code: "EG_UNKNOWN_TOOL" });
  });
});

describe("gate.approvalFor", () => {
  it("files a digest-bound request, releases the call once approved, and not for other input", async () => {
    const { gate } = await setup();
    const call = { id: "d1", name: "refund", input: { charge: "ch_1" } };
    const status = await gate.approvalFor(call, scope);
    expect(status.state).toBe("pending");
    const id = status.state === "pending" ? status.id : "";
    // The same call asked again finds the same request.
    expect(await gate.approvalFor(call, scope)).toMatchObject({ state: "pending", id });
    // Running it now waits: nothing executes.
    expect(await gate.runTool(call, scope)).toMatchObject({ ok: false, code: "EG_AWAITING_APPROVAL", approvalId: id });

    expect((await decideCall(gate.ledger, id, { approve: true, by: "ops" })).ok).toBe(true);
    // The same id with other input is another request, still pending.
    const other = await gate.approvalFor({ ...call, input: { charge: "ch_2" } }, scope);
    expect(other).toMatchObject({ state: "pending" });
    expect(other.state === "pending" && other.id).not.toBe(id);
    expect(await gate.approvalFor(call, scope)).toMatchObject({ state: "approved", id });

    expect(await gate.runTool(call, scope)).toMatchObject({ ok: true, result: { refunded: "ch_1" } });
    // Once the ledger has the call, its request reads consumed, and a kill switch does not change that: it is answered from the record.
    await setKillSwitch(gate.ledger, true, {}, { by: "ops" });
    expect(await gate.approvalFor(call, scope)).toMatchObject({ state: "consumed", id });
    expect(await gate.runTool(call, scope)).toMatchObject({ ok: true, result: { refunded: "ch_1" } });
  });

  it("says none without filing when asked not to, and not_needed for calls no rule governs", async () => {
    const { gate } = await setup();
    expect(await gate.approvalFor({ id: "d2", name: "refund", input: { charge: "c" } }, scope, { file: false })).toMatchObject({ state: "none" });
    expect(await gate.approvalFor({ id: "c1", name: "charge_card", input: { amount: 1 } }, scope)).toEqual({ state: "not_needed" });
  });

  it("a denied call never runs", async () => {
    const { gate } = await setup();
    const call = { id: "d3", name: "refund", input: { charge: "c" } };
    const status = await gate.approvalFor(call, scope);
    await decideCall(gate.ledger, status.state === "pending" ? status.id : "", { approve: false, by: "ops" });
    expect(await gate.approvalFor(call, scope)).toMatchObject({ state: "denied" });
    expect(await gate.runTool(call, scope)).toMatchObject({ ok: false, code: "EG_APPROVAL_DENIED" });
  });
});

describe("gate.stoppedTools", () => {
  it("lists the write and destructive tools a kill switch stops, and none once it is off", async () => {
    const { gate } = await setup();
    expect(await gate.stoppedTools(scope)).toEqual([]);
    await setKillSwitch(gate.ledger, true, { tenant: "acme" }, { by: "ops" });
    const stopped = await gate.stoppedTools(scope);
    expect(stopped.map((s) => s.tool).sort()).toEqual(["charge_card", "label", "refund"]);
    expect(stopped.every((s) => s.reason === "kill_switch" && s.message.startsWith("EG_KILL_SWITCH"))).toBe(true);
    expect(await gate.stoppedTools({ tenant: "other", task: "t" })).toEqual([]);
    // A call needing approval under a kill switch is not put before a person.
    expect(await gate.approvalFor({ id: "d4", name: "refund", input: { charge: "c" } }, scope)).toMatchObject({ state: "refused" });
    await setKillSwitch(gate.ledger, false, { tenant: "acme" }, { by: "ops" });
    expect(await gate.stoppedTools(scope)).toEqual([]);
  });

  it("lists the tools an open breaker stops in its scope only", async () => {
    const { gate } = await setup({ rate: true });
    await gate.runTool({ id: "a", name: "label", input: { text: "1" } }, scope);
    expect(await gate.runTool({ id: "b", name: "label", input: { text: "2" } }, scope)).toMatchObject({ ok: false, code: "EG_BREAKER_OPEN" });
    expect((await gate.stoppedTools(scope)).map((s) => [s.tool, s.reason])).toEqual(
      expect.arrayContaining([["charge_card", "breaker_open"], ["label", "breaker_open"]]));
    expect(await gate.stoppedTools({ tenant: "acme", task: "t2" })).toEqual([]);
    const [breaker] = await listBreakers(gate.ledger);
    await closeBreaker(gate.ledger, breaker!.id, "ops");
    expect(await gate.stoppedTools(scope)).toEqual([]);
  });
});

describe("the adapter entries and their SDKs", () => {
  it("no built module of the package imports an SDK: each is an optional peer the user's own code loads", () => {
    const dist = fileURLToPath(new URL("../../dist", import.meta.url));
    const files = (readdirSync(dist, { recursive: true }) as string[]).filter((f) => f.endsWith(".js")).map((f) => join(dist, f));
    expect(files.some((f) => f.endsWith(join("adapters", "ai-sdk", "tools.js")))).toBe(true);
    const importsSdk = /(?:from\s*|import\s*\(\s*)["'](?:ai|ai\/[^"']*|@anthropic-ai\/sdk(?:\/[^"']*)?)["']/;
    // The explorer's SDK worlds import their SDK on purpose; load.js reaches them only by import(),
    // when a schedule asks for that entry, so no subpath a user imports loads an SDK.
    const worlds = join("testing", "explorer", "entries");
    const sdkWorlds = new Set(files.filter((f) => f.includes(worlds) && importsSdk.test(readFileSync(f, "utf8"))));
    expect(sdkWorlds.size).toBeGreaterThan(0);
    const isWorld = (f: string): boolean => sdkWorlds.has(f);
    expect(files.filter((f) => !isWorld(f) && importsSdk.test(readFileSync(f, "utf8")))).toEqual([]);
    const staticImports = (f: string): string[] =>
      [...readFileSync(f, "utf8").matchAll(/\bfrom\s*["'](\.{1,2}\/[^"']+)["']/g)].map((m) => resolve(dirname(f), m[1]!));
    expect(files.flatMap((f) => staticImports(f).filter(isWorld).map((to) => `${f} -> ${to}`))).toEqual([]);
  });
});
