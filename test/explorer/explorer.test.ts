/**
 * The fault explorer itself: a seed replays exactly; it catches each broken assumption of the
 * guarantee (so a clean run means something); a user's own simulated system plugs in; and the
 * fixed-seed sample CI runs, on every ledger: thousands of simulated schedules and a few hundred
 * real SIGKILLs, with zero violations.
 */
import { describe, expect, it } from "vitest";
import { defineTool } from "../../src/core/tool.js";
import type { StandardSchemaV1 } from "../../src/core/standard-schema.js";
import { explore, type ExploreReport } from "../../src/testing/explorer/explore.js";
import { drawWorkload } from "../../src/testing/explorer/workload.js";
import type { DownstreamConfig, SimulatedSystem } from "../../src/testing/explorer/downstream.js";
import type { Rng } from "../../src/testing/explorer/rng.js";
import type { World } from "../../src/testing/explorer/world.js";
import type { exploreKills as exploreKillsType } from "../../src/testing/explorer/kills.js";
import { requireBuild } from "../support/processes.js";
import { usePostgres } from "../support/pg.js";

const db = usePostgres();
const DIST_TESTING = new URL("../../dist/testing.js", import.meta.url).href;

/** Random labels (approval and owner ids) differ between runs; the schedule does not. */
const normalized = (trace: readonly string[]) => trace.map((l) => l.replace(/apr_[0-9a-f]+/g, "apr_*").replace(/\(vm[^)]*\)|\([^)]*\/[0-9]+\)/g, "(owner)"));

function summary(r: ExploreReport) {
  return `${r.schedules} schedules, ${r.calls} calls, faults ${JSON.stringify(r.faults)}, violations ${JSON.stringify(r.byInvariant)}` +
    (r.violations.length > 0 ? `\n${r.violations.slice(0, 10).map((v) => `  seed ${v.seed} ${v.invariant}: ${v.message}`).join("\n")}` : "");
}

describe("the fault explorer replays a seed exactly", () => {
  for (const ledger of ["memory", "sqlite"] as const) {
    it(`${ledger}: the same seeds give the same events, faults and answers, twice`, async () => {
      const runs: ExploreReport[] = [];
      for (let i = 0; i < 2; i++) runs.push(await explore({ seed: 7_000, schedules: 40, ledger, trace: true, workload: (rng) => drawWorkload(rng) }));
      const [a, b] = runs as [ExploreReport, ExploreReport];
      expect(b.faults).toEqual(a.faults);
      expect(b.calls).toBe(a.calls);
      expect(a.faults.crashes + a.faults.freezes + a.faults.ledgerFailures + a.faults.lostReplies).toBeGreaterThan(20);
      // Traces are kept for violating schedules only: run one schedule with a trace, twice.
      const one = async () => {
        const traces: string[][] = [];
        await explore({ seed: 7_003, schedules: 1, ledger, trace: true, onSchedule: (r) => traces.push([...r.trace]) });
        return normalized(traces[0]!);
      };
      const first = await one();
      expect(first.length).toBeGreaterThan(10);
      expect(await one()).toEqual(first);
    });
  }
});

/** One downstream, everything else drawn: aims the explorer at a single broken assumption. */
const only = (config: Partial<DownstreamConfig>) => (rng: Rng) => {
  const w = drawWorkload(rng);
  const base = w.downstreams[0]!;
  return { ...w, downstreams: [{ ...base, effect: "write" as const, ...config }] };
};

describe("the explorer catches a broken assumption (so a clean run means something)", () => {
  it("a tool whose settleMs is shorter than its downstream takes to land a request: a call applied twice (I1)", async () => {
    const r = await explore({
      seed: 1, schedules: 300, stopAtFirstViolation: true,
      workload: only({ honoursKeys: false, probe: true, probeSeesInflight: false, maxLandMs: 3_000, settleMs: 10, timeoutMs: 100, toolHonoursAbort: true, honoursCancel: false, reject: 0, unavailable: 0 }),
    });
    expect(r.byInvariant.I1, summary(r)).toBeGreaterThan(0);
  });

  it("a probe that says absent whatever happened: a call applied twice (I1)", async () => {
    const r = await explore({ seed: 1, schedules: 300, stopAtFirstViolation: true, workload: only({ honoursKeys: false, probe: true, lie: "probe_lies", timeoutMs: 100, maxLandMs: 1_000, settleMs: 1_000 }) });
    expect(r.byInvariant.I1, summary(r)).toBeGreaterThan(0);
  });

  it("a tool that says downstreamIdempotent when its downstream does not honour keys: a call applied twice (I1)", async () => {
    const r = await explore({ seed: 1, schedules: 300, stopAtFirstViolation: true, workload: only({ honoursKeys: false, lie: "claims_idempotent", probe: true, timeoutMs: 100, maxLandMs: 1_000, settleMs: 1_000, honoursCancel: false }) });
    expect(r.byInvariant.I1, summary(r)).toBeGreaterThan(0);
  });

  it("a tool that waits before sending, stalled past its lease, to a downstream with fences but no keys: applied twice (I1), the documented limit", async () => {
    const r = await explore({
      seed: 1, schedules: 2_000, stopAtFirstViolation: true,
      workload: (rng) => {
        const w = only({ honoursKeys: false, enforcesFence: true, probe: true, preSendMs: 400, timeoutMs: 5_000, maxLandMs: 100, settleMs: 100, reject: 0, unavailable: 0, dropReply: 0 })(rng);
        return { ...w, leaseMs: 300, rates: { ...w.rates, freeze: 0.3, freezeMs: [2_000, 5_000] }, budget: { ...w.budget, freezes: 2 }, twin: 0.6 };
      },
    });
    expect(r.byInvariant.I1, summary(r)).toBeGreaterThan(0);
  });
});

describe("your own simulated system", () => {
  it("a mailer written against the explorer's World: its sends are counted and the guarantee holds", async () => {
    let total = 0;
    const mailer = (world: World, rng: Rng, prefix: string): SimulatedSystem[] => {
      const sent: Record<string, number> = {};
      const outbox = new Map<string, { id: string; ref: string }>();
      const input: StandardSchemaV1<unknown, { ref: string; to: string }> = {
        "~standard": { version: 1, vendor: "test", validate: (v) => ({ value: v as { ref: string; to: string } }) },
      };
      const name = `${prefix}send_email`;
      return [{
        name,
        toolsFor: (process) => [defineTool({
          name, effect: "write", input, timeoutMs: 500, settleMs: 300, downstreamIdempotent: true,
          execute: (args, ctx) => new Promise((resolve) => {
            const delay = rng.between(0, 300);
            void world.running(process).then(() => {
              sent[args.ref] = (sent[args.ref] ?? 0) + 1;
              total++;
              world.addTimer(delay, () => {
                if (!outbox.has(ctx.idempotencyKey)) outbox.set(ctx.idempotencyKey, { id: `msg_${outbox.size + 1}`, ref: args.ref });
                resolve(outbox.get(ctx.idempotencyKey));
              });
            });
          }),
          probe: async (_args, ctx) => {
            const found = outbox.get(ctx.idempotencyKey);
            return found ? { status: "done", result: found } : { status: "absent" };
          },
        }) as never],
        newCall: (_r, ref) => ({ tool: name, input: { ref, to: "ada@example.com" } }),
        sends: (ref) => sent[ref] ?? 0,
        effects: (ref) => [...outbox.values()].filter((m) => m.ref === ref).length,
        resultOf: (ref) => [...outbox.values()].find((m) => m.ref === ref),
      }];
    };
    const r = await explore({ seed: 50, schedules: 200, systems: mailer });
    expect(r.violations, summary(r)).toEqual([]);
    expect(total).toBeGreaterThan(r.calls / 2);
  });
});

describe("the fixed-seed sample CI runs: zero violations", () => {
  it("2,000 schedules on the memory ledger", async () => {
    const r = await explore({ seed: 1, schedules: 2_000, ledger: "memory" });
    expect(r.violations, summary(r)).toEqual([]);
    expect(r.faults.crashes).toBeGreaterThan(1_000);
  }, 300_000);

  it("400 schedules on SQLite", async () => {
    const r = await explore({ seed: 10_001, schedules: 400, ledger: "sqlite" });
    expect(r.violations, summary(r)).toEqual([]);
  }, 300_000);

  it("100 schedules on PostgreSQL", async () => {
    const r = await explore({ seed: 20_001, schedules: 100, ledger: { postgres: db.url } });
    expect(r.violations, summary(r)).toEqual([]);
  }, 300_000);

  it("real SIGKILLs: 150 child processes on SQLite and 60 on PostgreSQL, killed at seeded durable steps", async () => {
    requireBuild();
    // The children run the built package, so the parent does too.
    const { exploreKills } = (await import(DIST_TESTING)) as { exploreKills: typeof exploreKillsType };
    const sqlite = await exploreKills({ seed: 1, runs: 150, ledger: "sqlite" });
    expect(sqlite.violations).toEqual([]);
    expect(sqlite.kills).toBeGreaterThan(100);
    const pg = await exploreKills({ seed: 5_001, runs: 60, ledger: { postgres: db.url } });
    expect(pg.violations).toEqual([]);
    expect(pg.kills).toBeGreaterThan(40);
  }, 600_000);
});
