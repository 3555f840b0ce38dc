/**
 * Defect 1 of the correctness issue: a timed-out call was re-sent while its first request could
 * still land. The seed's own case, scaled down: a charge whose downstream does not honour keys
 * takes longer than the client's timeout; the client aborts (fetch with ctx.signal), the server
 * keeps working and applies it later. The gate used to hear the probe's honest "absent" a moment
 * later and send the charge again: two charges. Now a re-send needs an "absent" after the settle
 * horizon the tool declares (no horizon: never re-sent), and a first run that ignores the abort
 * blocks any re-send. Effects are counted by the downstream itself.
 */
import { afterEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { createGate } from "../../src/root/create-gate.js";
import { defineTool } from "../../src/core/tool.js";
import type { ProbeResult } from "../../src/core/hooks.js";
import { memoryLedger } from "../../src/stores/memory/index.js";
import { startChargeService, type Charge, type ChargeService } from "../support/charge-service.js";
import { toolUse } from "../support/tools.js";

const scope = { tenant: "acme", task: "t1" };
const charge = (id = "toolu_c") => [toolUse(id, "charge", { amount: 40 })];
// Long enough for the request to reach the server even on a loaded machine; it is held, so the timeout fires anyway.
const budget = { timeoutMs: 400, probe: { attempts: 6, initialDelayMs: 10, maxDelayMs: 40 } } as const;

let service: ChargeService | undefined;
afterEach(async () => service?.close());

function chargeTool(url: string, options: { settleMs?: number; honoursAbort?: boolean; downstreamIdempotent?: boolean } = {}) {
  return defineTool({
    name: "charge", effect: "write", input: z.object({ amount: z.number() }),
    ...(options.settleMs === undefined ? {} : { settleMs: options.settleMs }),
    ...(options.downstreamIdempotent === undefined ? {} : { downstreamIdempotent: options.downstreamIdempotent }),
    async execute(input, ctx): Promise<Charge> {
      const res = await fetch(`${url}/charges`, {
        method: "POST",
        headers: { "content-type": "application/json", "idempotency-key": ctx.idempotencyKey },
        body: JSON.stringify(input),
        ...(options.honoursAbort === false ? {} : { signal: ctx.signal }),
      });
      return (await res.json()) as Charge;
    },
    async probe(_input, ctx): Promise<ProbeResult<Charge>> {
      const found = (await (await fetch(`${url}/charges?key=${ctx.idempotencyKey}`)).json()) as { status: "done"; charge: Charge } | { status: "absent" };
      return found.status === "done" ? { status: "done", result: found.charge } : { status: "absent" };
    },
  });
}

describe("a timed-out call is never re-sent while its first request can still land", () => {
  it("no settle horizon, a downstream that applies the request after the client gave up: one charge, never a second send", async () => {
    service = await startChargeService();
    // The server lands the request it holds after the gate has already heard "absent" a few times.
    service.onProbe((n) => n === 4 && service?.land());
    const ledger = memoryLedger();
    const gate = createGate({ ...budget, ledger, tools: [chargeTool(service.url)], onAlert: () => {} });
    const [r] = await gate.runToolUses(charge(), scope);
    expect(service.received).toHaveLength(1);
    expect(service.charges).toHaveLength(1);
    expect(r).toMatchObject({ is_error: false, content: JSON.stringify(service.charges[0]) });
    expect(await ledger.calls.get("acme", "toolu_c")).toMatchObject({ state: "completed", attempts: 1 });
  });

  it("no settle horizon and the request never lands: never re-sent, the call goes to a person who is told why", async () => {
    service = await startChargeService();
    const ledger = memoryLedger();
    const gate = createGate({ ...budget, ledger, tools: [chargeTool(service.url)], onAlert: () => {} });
    const [r] = await gate.runToolUses(charge(), scope);
    expect(service.received).toHaveLength(1);
    expect(r!.content).toMatch(/^EG_NEEDS_HUMAN: .*charge declares no settleMs and its downstream does not honour keys, so a request already sent may still land/);
    // A replay does not send it either.
    await gate.runToolUses(charge(), scope);
    expect(service.received).toHaveLength(1);
    service.land();
    expect(service.charges).toHaveLength(1);
  });

  it("with a settle horizon: 'absent' before it is not an answer; the late landing is found, one charge", async () => {
    service = await startChargeService();
    service.onProbe((n) => n === 3 && service?.land());
    const ledger = memoryLedger();
    const gate = createGate({ ...budget, ledger, tools: [chargeTool(service.url, { settleMs: 400 })] });
    const [r] = await gate.runToolUses(charge(), scope);
    expect(service.received).toHaveLength(1);
    expect(service.charges).toHaveLength(1);
    expect(JSON.parse(r!.content)).toEqual(service.charges[0]);
  });

  it("with a settle horizon and the request truly lost: after the horizon, one re-send with the same key", async () => {
    // The first request is lost on the way (never applied, never answered); the re-send lands at once.
    service = await startChargeService({ decide: (n) => (n === 1 ? "drop" : "land") });
    const ledger = memoryLedger();
    const gate = createGate({ ...budget, ledger, tools: [chargeTool(service.url, { settleMs: 150 })] });
    const started = performance.now();
    const [r] = await gate.runToolUses(charge(), scope);
    expect(performance.now() - started).toBeGreaterThanOrEqual(150);
    expect(service.received.map((x) => x.key)).toEqual(["toolu_c", "toolu_c"]);
    expect(service.charges).toHaveLength(1);
    expect(JSON.parse(r!.content)).toEqual(service.charges[0]);
    expect(await ledger.calls.get("acme", "toolu_c")).toMatchObject({ state: "completed", attempts: 2 });
  });

  it("a tool that ignores the abort: its first run is still going, so nothing is re-sent, even past the horizon", async () => {
    service = await startChargeService();
    const ledger = memoryLedger();
    const gate = createGate({ ...budget, ledger, tools: [chargeTool(service.url, { settleMs: 50, honoursAbort: false })], onAlert: () => {} });
    const [r] = await gate.runToolUses(charge(), scope);
    expect(service.received).toHaveLength(1);
    expect(r!.content).toMatch(/^EG_NEEDS_HUMAN: .*the first run of the tool is still going here \(it ignored the abort\)/);
    service.land();
    await gate.drain();
    // Its late reply settles the call: one charge, recorded.
    expect(service.charges).toHaveLength(1);
    expect(await ledger.calls.get("acme", "toolu_c")).toMatchObject({ state: "completed", result: service.charges[0] });
  });

  it("a downstream that honours the key: re-sent at once with the same key, one charge", async () => {
    service = await startChargeService({ honoursKeys: true });
    const ledger = memoryLedger();
    const gate = createGate({ ...budget, ledger, tools: [chargeTool(service.url, { downstreamIdempotent: true })] });
    const answer = gate.runToolUses(charge(), scope);
    const landWhenResent = setInterval(() => service!.received.length >= 2 && service!.land(), 5);
    const [r] = await answer;
    clearInterval(landWhenResent);
    expect(service.received.length).toBeGreaterThanOrEqual(2);
    expect(new Set(service.received.map((x) => x.key))).toEqual(new Set(["toolu_c"]));
    expect(service.charges).toHaveLength(1);
    expect(JSON.parse(r!.content)).toEqual(service.charges[0]);
  });
});
