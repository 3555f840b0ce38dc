/**
 * The defects the fault explorer found while it was being built, each replayed here as a scripted
 * schedule on simulated time (deterministic: no sleeps, no real clock), with the downstream's own
 * counters as the ground truth. Each test failed before its fix.
 */
import { describe, expect, it } from "vitest";
import type { ToolUseBlock } from "../../src/core/blocks.js";
import type { Stores } from "../../src/contracts/stores.js";
import type { Alert } from "../../src/gate/alerts.js";
import { createGate, type GateOptions } from "../../src/root/create-gate.js";
import { memoryLedger } from "../../src/stores/memory/index.js";
import { simulatedDownstream, type DownstreamConfig } from "../../src/testing/explorer/downstream.js";
import { seededRng } from "../../src/testing/explorer/rng.js";
import { World } from "../../src/testing/explorer/world.js";
import { explore } from "../../src/testing/explorer/explore.js";
import { usePostgres } from "../support/pg.js";

const scope = { tenant: "acme", task: "t-1" };

const PLAIN: DownstreamConfig = {
  name: "charge", effect: "write", honoursKeys: false, enforcesFence: false, probe: true, probeSeesInflight: false,
  maxLandMs: 0, settleMs: 0, replyDelayMs: 0, timeoutMs: 1_000, dropReply: 0, reject: 0, unavailable: 0,
  honoursCancel: false, toolHonoursAbort: true, preSendMs: 0,
};

function simulation(config: Partial<DownstreamConfig>, ledger?: (world: World) => Stores) {
  const world = new World(seededRng(7), true);
  const stores = ledger?.(world) ?? memoryLedger({ clock: world.wall });
  const downstream = simulatedDownstream(world, seededRng(8), { ...PLAIN, ...config });
  const alerts: Alert[] = [];
  const worker = (name: string, options: Partial<GateOptions> = {}) => {
    const process = world.process(name);
    const gate = createGate({
      tools: downstream.toolsFor(process), ledger: options.ledger ?? stores, time: world.timeFor(process),
      onAlert: (a) => alerts.push(a), leaseMs: 1_000, probe: { attempts: 3, initialDelayMs: 10, maxDelayMs: 100 }, ...options,
    });
    return { process, gate };
  };
  const call: ToolUseBlock = { type: "tool_use", id: "toolu_1", name: "charge", input: { ref: "call_1", amount: 10 } };
  /** Runs `main` in the world until it is done; a deadlock or a livelock fails the test. */
  async function run<T>(main: Promise<T>): Promise<T> {
    expect(await world.run(main), world.trace.join("\n")).toBe("done");
    return main;
  }
  return { world, stores, downstream, worker, call, run, alerts };
}

describe("found by the fault explorer", () => {
  it("a downstream that honours keys: after a timeout, a retry answered 503 does not make the call 'failed, nothing happened'", async () => {
    // The first request is slow (applied after the timeout), the retry with the same key gets a 503.
    const sim = simulation({ honoursKeys: true, timeoutMs: 100, script: [{ fate: "apply", landMs: 1_000 }, { fate: "unavailable", landMs: 5 }] });
    const { gate } = sim.worker("worker-1", { retry: { write: { attempts: 2, initialDelayMs: 10, maxDelayMs: 10 } } });
    const [first] = await sim.run(gate.runToolUses([sim.call], scope));
    expect(first!.content).not.toMatch(/nothing happened|EG_TOOL_FAILED/);
    // Settled: once the slow request landed, a replay answers with it; the record agrees.
    await sim.run(sim.world.until(sim.world.now + 5_000));
    const [replayed] = await sim.run(gate.runToolUses([sim.call], scope));
    expect(sim.downstream.effects("call_1")).toBe(1);
    expect(replayed).toMatchObject({ is_error: false });
    expect(JSON.parse(replayed!.content)).toEqual(sim.downstream.resultOf("call_1"));
    expect(await sim.stores.calls.get("acme", "toolu_1")).toMatchObject({ state: "completed" });
  });

  it("a tool that ignores the abort and sends only after its timeout is not sent again until its own send can no longer land", async () => {
    // The tool waits 400 ms before sending (a token fetch), past its 200 ms timeout; its request is applied, its reply lost.
    const sim = simulation({ timeoutMs: 200, toolHonoursAbort: false, preSendMs: 400, settleMs: 10, maxLandMs: 10, script: [{ fate: "apply", landMs: 0, dropReply: true }] });
    const { gate } = sim.worker("worker-1", { probe: { attempts: 2, initialDelayMs: 1, maxDelayMs: 2_000 } });
    const [answer] = await sim.run(gate.runToolUses([sim.call], scope));
    // Let anything still running (a second run, waiting out its own pre-send delay) finish.
    await sim.run(sim.world.until(sim.world.now + 10_000));
    expect(sim.downstream.sends("call_1")).toBe(1);
    expect(sim.downstream.effects("call_1")).toBe(1);
    expect(answer).toMatchObject({ is_error: false });
    expect(JSON.parse(answer!.content)).toEqual(sim.downstream.resultOf("call_1"));
  });

  it("two workers replaying a call whose probe takes longer than the lease do not take it from each other forever", async () => {
    // The holder died after its request; the request may land for 5 s (settleMs), each probe round takes 200 ms.
    const sim = simulation({ settleMs: 5_000, maxLandMs: 5_000, timeoutMs: 100, script: [{ fate: "reject", landMs: 10 }] });
    const dead = sim.worker("worker-0", { leaseMs: 300, faults: (point) => (point === "after_claim" ? new Promise(() => undefined) : undefined) });
    void dead.gate.runToolUses([sim.call], scope);
    await sim.run(sim.world.until(10));
    sim.world.kill(dead.process, "after its claim");
    const probeRounds = { attempts: 4, initialDelayMs: 200, maxDelayMs: 200 };
    const a = sim.worker("worker-1", { leaseMs: 300, waitMs: 600, probe: probeRounds });
    const b = sim.worker("worker-2", { leaseMs: 300, waitMs: 600, probe: probeRounds });
    await sim.run(sim.world.until(400));
    const answers = await sim.run(Promise.all([a.gate.runToolUses([sim.call], scope), b.gate.runToolUses([sim.call], scope)]));
    expect(answers).toHaveLength(2);
    expect(sim.downstream.sends("call_1")).toBeLessThanOrEqual(1);
  });

  it("a holder that ran the tool and got the reply after losing the call settles the record a person was asked about", async () => {
    const sim = simulation({ probe: false, settleMs: undefined, script: [{ fate: "apply", landMs: 50, replyMs: 5_000 }] });
    const slow = sim.worker("worker-1", { leaseMs: 300, timeoutMs: 10_000 });
    const answer = slow.gate.runToolUses([sim.call], scope);
    await sim.run(sim.world.until(100));
    // Frozen past its lease (SIGSTOP); another worker replays the call, cannot probe it, and asks a person.
    sim.world.freeze(slow.process, 6_000, "past its lease");
    await sim.run(sim.world.until(sim.world.now + 1_000));
    const other = sim.worker("worker-2", { leaseMs: 300, waitMs: 0 });
    const [asked] = await sim.run(other.gate.runToolUses([sim.call], scope));
    expect(asked!.content).toMatch(/^EG_NEEDS_HUMAN/);
    const [got] = await sim.run(answer);
    expect(got).toMatchObject({ is_error: false });
    expect(JSON.parse(got!.content)).toEqual(sim.downstream.resultOf("call_1"));
    // The ledger learnt it: every replay now gets the same result, and nobody is asked any more.
    expect(await sim.stores.calls.get("acme", "toolu_1")).toMatchObject({ state: "completed", result: sim.downstream.resultOf("call_1") });
    const [replayed] = await sim.run(other.gate.runToolUses([sim.call], scope));
    expect(replayed!.content).toBe(got!.content);
    expect(sim.downstream.effects("call_1")).toBe(1);
  });

  it("a downstream that never answers in time: the call goes to a person after 10 starts instead of staying uncertain forever", async () => {
    // Every request lands after 200 ms, the timeout is 50 ms, and the downstream drops a cancelled
    // request; while one is in flight the probe says "running", so each replay parks the call again.
    const sim = simulation({
      honoursKeys: true, honoursCancel: true, probeSeesInflight: true, timeoutMs: 50, settleMs: 200, maxLandMs: 200,
      script: Array.from({ length: 40 }, () => ({ fate: "apply" as const, landMs: 200 })),
    });
    const { gate } = sim.worker("worker-1");
    let last = "";
    for (let round = 0; round < 20 && !last.startsWith("EG_NEEDS_HUMAN"); round++) {
      const [answer] = await sim.run(gate.runToolUses([sim.call], scope));
      last = answer!.content;
      await sim.run(sim.world.until(sim.world.now + 1_000));
    }
    expect(last, last).toMatch(/^EG_NEEDS_HUMAN: .*was started 10 times without a definite outcome/);
    expect(sim.downstream.sends("call_1")).toBe(10);
    expect(sim.downstream.effects("call_1")).toBe(0);
    expect(await sim.stores.calls.get("acme", "toolu_1")).toMatchObject({ state: "needs_human", attempts: 10 });
  });

  it("a re-run whose start could not be recorded says the outcome is unknown, never that nothing was executed", async () => {
    // The first request is slow (outcome unknown); the probe says absent past the horizon; the write counting the re-run fails.
    let failReruns = true;
    const sim = simulation({ timeoutMs: 100, settleMs: 50, maxLandMs: 50, script: [{ fate: "reject", landMs: 300 }] }, (world) => {
      const base = memoryLedger({ clock: world.wall });
      const calls = new Proxy(base.calls, {
        get(target, name, receiver) {
          if (name !== "update") return Reflect.get(target, name, receiver);
          return (...args: Parameters<typeof base.calls.update>) => {
            if (failReruns && args[3].countAttempt === true) {
              return Promise.reject(new Error("the ledger is unavailable (could not update: disk full). The tool was not started by this request; replay this same call once the ledger is reachable to run it or get its outcome."));
            }
            return target.update(...args);
          };
        },
      });
      return { ...base, calls };
    });
    const { gate } = sim.worker("worker-1", { probe: { attempts: 3, initialDelayMs: 100, maxDelayMs: 100 } });
    const [answer] = await sim.run(gate.runToolUses([sim.call], scope));
    failReruns = false;
    expect(answer!.content).toMatch(/^EG_NEEDS_HUMAN: /);
    expect(answer!.content).not.toMatch(/nothing was executed|not started by this request/i);
    expect(sim.downstream.sends("call_1")).toBe(1);
  });
  // Seeds 39760 (a refusal) and 70355 (a 503) of the memory explorer at 80,000 schedules.
  for (const fate of ["reject", "unavailable"] as const) {
    it(`a downstream that honours keys: a take-over's re-send ${fate === "reject" ? "refused" : "answered 503"} while the dead holder's request is in flight is not 'failed'`, async () => {
      // The first holder's request lands after 5 s; the holder dies; a take-over probes "absent" and re-sends at once
      // (the key is honoured), and that second request fails definitely — which says nothing about the first.
      const sim = simulation({ honoursKeys: true, timeoutMs: 10_000, script: [{ fate: "apply", landMs: 5_000 }, { fate, landMs: 10 }] });
      const dead = sim.worker("worker-0", { leaseMs: 300 });
      void dead.gate.runToolUses([sim.call], scope);
      await sim.run(sim.world.until(100));
      sim.world.kill(dead.process, "with its request in flight");
      await sim.run(sim.world.until(1_000));
      const other = sim.worker("worker-1", { leaseMs: 300, retry: { write: { attempts: 1, initialDelayMs: 10, maxDelayMs: 10 } } });
      const [answer] = await sim.run(other.gate.runToolUses([sim.call], scope));
      expect(sim.downstream.sends("call_1")).toBeGreaterThanOrEqual(2);
      expect(answer!.content).not.toMatch(/EG_TOOL_FAILED|nothing happened/);
      await sim.run(sim.world.until(sim.world.now + 10_000));
      expect(sim.downstream.effects("call_1")).toBe(1);
      // Whatever the record says now, it is not "failed": the effect happened.
      expect((await sim.stores.calls.get("acme", "toolu_1"))?.state).not.toBe("failed");
      const [replayed] = await sim.run(other.gate.runToolUses([sim.call], scope));
      expect(replayed!.content).not.toMatch(/EG_TOOL_FAILED|nothing happened/);
    });
  }
});

describe("found by the full count (120,000 memory schedules, 2026-12-02)", () => {
  // A holder frozen past its lease sends when it thaws; its call was taken over and a person settled it.
  // Its write to "uncertain" loses the race, and the reply its abandoned run still got was dropped: no
  // finding, no alert, while the record says "failed" (seed 14491) or a made-up result (seed 21676).
  for (const seed of [14_491, 21_676]) {
    it(`seed ${seed}: a reply an abandoned run gets after a person settled the call is judged against the settlement (I8)`, async () => {
      const r = await explore({ ledger: "memory", seed, schedules: 1, trace: true });
      expect(r.violations, r.traces.get(seed)?.join("\n")).toEqual([]);
    });
  }
});

describe("found by the widened memory run (seeds 500,001–515,000, 2026-12-02)", () => {
  // One gate started a call, froze before its send, lost the lease and said "in progress"; a later claim of the same key
  // by the same gate lost its reply. The record (this gate's, version 1, one attempt) looked exactly like that lost claim,
  // so the gate took it back as never started and sent again beside the first send (I1, seed 503600; also proxied
  // PostgreSQL seed 3504566). And a late reply was written over a record another worker held while probing (I6, seed 504403).
  for (const seed of [503_600, 504_403, 510_559]) {
    it(`seed ${seed}: a started call is never taken back as an unstarted claim, and a late reply waits for the holder`, async () => {
      const r = await explore({ ledger: "memory", seed, schedules: 1, trace: true });
      expect(r.violations, r.traces.get(seed)?.join("\n")).toEqual([]);
    });
  }
});

describe("found by I9 (issue 12 defect 6's invariant)", () => {
  // A worker loses its claim's reply; its next request's take-over of that claim fails (nothing written). The gate
  // forgot the claim before the take-over landed, so the request after that gave a call that never started to a person.
  it("memory seed 186: a take-over that failed leaves the claim the gate's own, and the next request runs it", async () => {
    const r = await explore({ ledger: "memory", seed: 186, schedules: 1, trace: true });
    expect(r.violations, r.traces.get(186)?.join("\n")).toEqual([]);
  });
});

describe("found by memory seeds 1–30,000 on the widened explorer (2026-12-02)", () => {
  // The gate's take-over of its own lost claim lost its reply too, and had committed: the record, at version 2, no
  // longer looked like the claim, so the next request gave a call this gate knew never started to a person (I9).
  it("seed 24736: a take-over of the gate's own lost claim whose reply is lost too is still the gate's own, unstarted", async () => {
    const r = await explore({ ledger: "memory", seed: 24_736, schedules: 1, trace: true });
    expect(r.violations, r.traces.get(24_736)?.join("\n")).toEqual([]);
  });
  // The world's own bookkeeping: a re-plan's send the downstream dropped when it was cancelled never applied, so a later
  // send of the call is its first (seed 3938); and a re-plan a person settled "failed" before the call ran made that
  // call its repeat, run again on the person's word (seed 29724). Each was an I2 the gate had not earned.
  for (const seed of [3_938, 29_724]) {
    it(`seed ${seed}: a send that never applied, or a re-run a person licensed, is not a second effect`, async () => {
      const r = await explore({ ledger: "memory", seed, schedules: 1, trace: true });
      expect(r.violations, r.traces.get(seed)?.join("\n")).toEqual([]);
    });
  }
});

describe("found by memory seeds 30,001–60,000 (2026-12-03)", () => {
  // Two requests for one call in one gate: the first took back its own lost claim, froze past the lease and started
  // nothing; the second took the record (the gate's own take-over, never started) for a stranger's and gave it to a person (I9).
  it("seed 39342: a claim whose lease ran out before its tool started stays the gate's own, and the next request runs it", async () => {
    const r = await explore({ ledger: "memory", seed: 39_342, schedules: 1, trace: true });
    expect(r.violations, r.traces.get(39_342)?.join("\n")).toEqual([]);
  });
  // The world's judgement: the first call, collapsed onto its re-plan that ran first, is the re-plan's repeat (its answer
  // is the preamble and the one result); its effects are now counted with it.
  it("seed 45718: a first call collapsed onto its re-plan is that re-plan's repeat", async () => {
    const r = await explore({ ledger: "memory", seed: 45_718, schedules: 1, trace: true });
    expect(r.violations, r.traces.get(45_718)?.join("\n")).toEqual([]);
  });
});

describe("found by the SQLite driver-fault part (seeds 4,030,001–4,033,000, 2026-12-03)", () => {
  // The explorer's own settling: a later release's replay met a real SQLITE_BUSY and was not repeated, so a call whose
  // id a later turn reused ended on "the ledger is unavailable" (I3). The release's replay is now repeated like the operator's.
  it("seed 4030469: a release replay that meets a driver fault is repeated, not judged", async () => {
    const r = await explore({ ledger: { sqlite: true, driverFaults: true }, seed: 4_030_469, schedules: 1, trace: true });
    expect(r.violations, r.traces.get(4_030_469)?.join("\n")).toEqual([]);
  });
});

describe("found by the proxied PostgreSQL part (5,000 schedules, 2026-12-02)", () => {
  const db = usePostgres();
  // A harmless-to-resend call timed out; its re-run could not be counted (the proxy cut the write), so the gate gave the
  // call to a person, dropping the run that had just timed out and ignored the abort. Its reply landed after the person
  // (wrongly) settled the call "completed": no finding, no alert (I8).
  it("seed 3503641: a re-run that could not be recorded still follows the run that timed out, and its late reply is a finding (I8)", async () => {
    const r = await explore({ ledger: { postgres: db.url, proxy: true }, seed: 3_503_641, schedules: 1, trace: true });
    expect(r.violations, r.traces.get(3_503_641)?.join("\n")).toEqual([]);
  });
  // The world's bookkeeping (the full count of 2026-12-03): a person's settle whose reply the proxy dropped after COMMIT
  // was taken for one refused, so their (wrong) "completed" for a call that never ran was judged as the gate's (I3).
  it("seed 3101633: a person's settle that committed with its reply lost is still their verdict", async () => {
    const r = await explore({ ledger: { postgres: db.url, proxy: true }, seed: 3_101_633, schedules: 1, trace: true });
    expect(r.violations, r.traces.get(3_101_633)?.join("\n")).toEqual([]);
  });
});
