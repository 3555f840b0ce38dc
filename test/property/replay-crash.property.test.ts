/**
 * Property: any interleaving of replays and crashes of a random tool_use sequence leaves each
 * write effect applied at most once, and each call, once it has an answer, keeps that answer.
 *
 * Model. A random assistant message holds tool_use blocks for three write tools over one
 * in-memory downstream that records every application by idempotency key (it does NOT
 * deduplicate: at-most-once must come from the gate):
 *   - `probed`:   key = tool_use id, probe asks the downstream by key;
 *   - `derived`:  key derived from the input, same probe;
 *   - `unprobed`: key = tool_use id, no probe.
 * A sequence of workers replays the whole message, each a NEW gate on one shared
 * `memoryLedger({ clock })` with a manual clock. A worker may crash at its k-th "crash
 * opportunity": a fault point (after_claim / after_execute / after_record), just before or
 * just after a ledger write (claim, update, takeOver), just before or after the downstream
 * effect inside the tool, or in a probe. From that moment the worker is frozen like a dead
 * process: every ledger call, tool call, probe and fault hook it makes never returns, so it
 * never writes again. Then the clock moves past the lease and the next worker starts; it takes
 * the frozen worker's claims over. A last worker, which does not crash and whose probes work,
 * replays once more.
 *
 * Why freeze the whole worker instead of only the fault hook: a hook that never returns
 * freezes one call, but (1) the other calls of the same runToolUses go on writing, which a
 * dead process cannot, and (2) at after_claim the call's lease heartbeat (lease.ts, a
 * setInterval that executeHeld starts before the hook; the tool timeout does not cover the
 * hook) keeps renewing the lease for ever, so the next worker finds a live holder and answers
 * EG_IN_PROGRESS. Freezing the worker's ledger handle stops its renewals too, as death would.
 * (LEASE_MS is also long enough that no heartbeat fires within a run.)
 *
 * Reproduce a failure: EG_PROPERTY_SEED=<seed> (fast-check prints seed and path).
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { createGate } from "../../src/root/create-gate.js";
import { defineTool } from "../../src/core/tool.js";
import { type ProbeResult } from "../../src/core/hooks.js";
import { type Json } from "../../src/core/json.js";
import { deriveKey } from "../../src/core/keys.js";
import { memoryLedger } from "../../src/stores/memory/index.js";
import { OutcomeUnknown } from "../../src/core/outcome.js";
import type { Stores } from "../../src/contracts/stores.js";
import type { Alert } from "../../src/gate/alerts.js";
import type { ToolResultBlock } from "../../src/core/blocks.js";

const SEED = Number(process.env.EG_PROPERTY_SEED ?? 20261130);
const RUNS = Number(process.env.EG_PROPERTY_RUNS ?? 100);
/**
 * Same-key twins in one message (two `derived` blocks with equal input) are on by default: they
 * once livelocked on a record a dead worker left behind (each twin took it over from the other).
 * EG_PROPERTY_TWINS=0 turns them off.
 */
const TWINS = process.env.EG_PROPERTY_TWINS !== "0";
const LEASE_MS = 60_000;
const scope = { tenant: "acme", task: "prop" };
const TOOLS = ["probed", "derived", "unprobed"] as const;
type ToolName = (typeof TOOLS)[number];

const never = new Promise<never>(() => {});
/** A network hop to the downstream: the answer comes in a later turn of the event loop, as real I/O does. */
const hop = () => new Promise<void>((resolve) => setImmediate(resolve));

/** The downstream system: what really happened, by idempotency key. */
class Downstream {
  private seq = 0;
  readonly applied = new Map<string, number>();
  readonly results = new Map<string, Json>();
  /** Keys whose first request was refused at the door (ECONNREFUSED). */
  readonly refused = new Set<string>();
  apply(tool: ToolName, key: string, n: number): Json {
    const result = { tool, key, n, effect: ++this.seq };
    this.applied.set(key, (this.applied.get(key) ?? 0) + 1);
    if (!this.results.has(key)) this.results.set(key, result);
    return result;
  }
}

/** One worker's life: it dies at its `crashAt`-th crash opportunity, if it gets that far. */
class Life {
  dead = false;
  steps = 0;
  diedAt: string | undefined;
  private die!: () => void;
  readonly died = new Promise<void>((resolve) => (this.die = resolve));
  constructor(private readonly crashAt: number | null, readonly probeFails: boolean) {}
  /** A crash opportunity: true when the worker is (now) dead. */
  reach(where: string): boolean {
    if (this.dead) return true;
    if (++this.steps === this.crashAt) {
      this.dead = true;
      this.diedAt = where;
      this.die();
    }
    return this.dead;
  }
}

/** The worker's handle on the shared ledger: once the worker is dead, nothing it asks ever returns. */
function workerLedger(inner: Stores, life: Life): Stores {
  const write = async <T>(op: string, run: () => Promise<T>): Promise<T> => {
    if (life.reach(`ledger:${op}:before`)) return never;
    const result = await run();
    if (life.reach(`ledger:${op}:after`)) return never;
    return result;
  };
  const read = async <T>(run: () => Promise<T>): Promise<T> => {
    if (life.dead) return never;
    const result = await run();
    return life.dead ? never : result;
  };
  const calls = inner.calls;
  return {
    location: inner.location,
    calls: {
      location: calls.location,
      claim: (request) => write("claim", () => calls.claim(request)),
      update: (tenant, key, version, update) => write("update", () => calls.update(tenant, key, version, update)),
      takeOver: (request) => write("takeOver", () => calls.takeOver(request)),
      remove: (tenant, key, version, claimToken) => write("remove", () => calls.remove(tenant, key, version, claimToken)),
      // The heartbeat: a dead worker's renewals never happen.
      renewLease: (tenant, key, version, owner, leaseMs) => read(() => calls.renewLease(tenant, key, version, owner, leaseMs)),
      get: (tenant, key) => read(() => calls.get(tenant, key)),
      list: (query) => read(() => calls.list(query)),
      listUnsettled: (options) => read(() => calls.listUnsettled(options)),
      countByStateAndEffect: (query) => read(() => calls.countByStateAndEffect(query)),
      now: () => read(() => calls.now()),
    },
    checkpoints: {
      put: (tenant, id, data) => read(() => inner.checkpoints.put(tenant, id, data)),
      get: (tenant, id) => read(() => inner.checkpoints.get(tenant, id)),
    },
    close: () => inner.close(),
  };
}

const BEHAVIOURS = ["ok", "fail", "refused_once", "reply_lost"] as const;
type Behaviour = (typeof BEHAVIOURS)[number];
const input = z.object({ n: z.number().int(), behaviour: z.enum(BEHAVIOURS) });
type Input = z.infer<typeof input>;

/** Keys whose reply was lost where nothing could ask (no probe, or a worker whose probes fail): a human may rightly get them. */
type MayNeedHuman = Set<string>;

function workerTools(downstream: Downstream, life: Life, mayNeedHuman: MayNeedHuman) {
  const make = (name: ToolName) => defineTool({
    name,
    effect: "write",
    input,
    key: name === "derived" ? "derived" : "tool_use_id",
    // The simulated downstream applies a request at once or never: its settle horizon is 0.
    settleMs: 0,
    async execute(args: Input, ctx) {
      if (life.reach("tool:before_effect")) return never;
      await hop();
      if (life.dead) return never;
      const key = ctx.idempotencyKey;
      // A definite failure: the downstream refused it, nothing happened.
      if (args.behaviour === "fail") throw new Error(`downstream refused #${args.n}`);
      if (args.behaviour === "refused_once" && !downstream.refused.has(key)) {
        downstream.refused.add(key);
        throw Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:9"), { code: "ECONNREFUSED" });
      }
      const result = downstream.apply(name, key, args.n);
      if (life.reach("tool:after_effect")) return never;
      if (args.behaviour === "reply_lost") {
        if (life.probeFails || name === "unprobed") mayNeedHuman.add(key);
        throw new OutcomeUnknown("connection reset after the request was sent");
      }
      return result;
    },
    ...(name === "unprobed" ? {} : {
      async probe(_args: Input, ctx: { idempotencyKey: string }): Promise<ProbeResult<Json>> {
        if (life.reach("probe")) return never;
        await hop();
        if (life.dead) return never;
        if (life.probeFails) throw new Error("the downstream's status endpoint is unreachable");
        const result = downstream.results.get(ctx.idempotencyKey);
        return result === undefined ? { status: "absent" } : { status: "done", result };
      },
    }),
  });
  return TOOLS.map(make);
}

interface Use { readonly tool: ToolName; readonly n: number; readonly behaviour: Behaviour }
interface WorkerPlan { readonly crashAt: number | null; readonly recoverFirst: boolean; readonly probeFails: boolean }
interface Scenario { readonly uses: Use[]; readonly workers: WorkerPlan[]; readonly finalRecovers: boolean }

const useArb: fc.Arbitrary<Use> = fc.record({
  tool: fc.constantFrom(...TOOLS),
  // Distinct n per block unless twins are on (then `derived` blocks may repeat an input).
  n: TWINS ? fc.constant(0) : fc.constant(-1),
  behaviour: fc.oneof(
    { weight: 5, arbitrary: fc.constant("ok" as const) },
    { weight: 1, arbitrary: fc.constantFrom("fail" as const, "refused_once" as const, "reply_lost" as const) },
  ),
});
/** A worker meets about 9 crash opportunities per call; most workers die somewhere among them. */
const workerArb = (calls: number): fc.Arbitrary<WorkerPlan> => fc.record({
  crashAt: fc.oneof({ weight: 5, arbitrary: fc.integer({ min: 1, max: 9 * calls }) }, { weight: 1, arbitrary: fc.constant(null) }),
  recoverFirst: fc.boolean(),
  probeFails: fc.integer({ min: 0, max: 3 }).map((x) => x === 0),
});
const scenarioArb: fc.Arbitrary<Scenario> = fc.array(useArb, { minLength: 1, maxLength: 5 }).chain((uses) => fc.record({
  uses: fc.constant(uses),
  workers: fc.array(workerArb(uses.length), { minLength: 0, maxLength: 5 }),
  finalRecovers: fc.boolean(),
}));

/** Where workers died, over all runs: the property must really have crashed at every kind of point. */
const diedAt = new Map<string, number>();

async function check({ uses, workers, finalRecovers }: Scenario): Promise<void> {
  let now = 1_700_000_000_000;
  const ledger = memoryLedger({ clock: () => now });
  const downstream = new Downstream();
  const content = uses.map((u, i) => ({
    type: "tool_use", id: `toolu_${i}`, name: u.tool,
    input: { n: u.n < 0 || u.tool !== "derived" ? i : u.n, behaviour: u.behaviour },
  }));
  const keyOf = (block: (typeof content)[number]) =>
    block.name === "derived" ? deriveKey(scope, "derived", block.input) : block.id;
  const alerts: Alert[] = [];
  /** The first settled answer per tool_use id (anything but EG_IN_PROGRESS), which every later answer must repeat. */
  const firstAnswer = new Map<string, ToolResultBlock>();
  /** Unprobed keys left in_progress or uncertain by a dead worker → downstream applications at that moment. */
  const interrupted = new Map<string, number>();
  const mayNeedHuman: MayNeedHuman = new Set();

  const plans: WorkerPlan[] = [...workers, { crashAt: null, recoverFirst: finalRecovers, probeFails: false }];
  for (const [w, plan] of plans.entries()) {
    const life = new Life(plan.crashAt, plan.probeFails);
    const gate = createGate({
      tools: workerTools(downstream, life, mayNeedHuman), ledger: workerLedger(ledger, life), leaseMs: LEASE_MS,
      waitMs: 50, onAlert: (a) => alerts.push(a),
      // No real waiting between probe rounds or retries: the schedule stays in the model's hands.
      probe: { attempts: 3, initialDelayMs: 0, maxDelayMs: 0 },
      retry: { write: { attempts: 3, initialDelayMs: 0, maxDelayMs: 0 } },
      faults: (point) => (life.reach(`fault:${point}`) ? never : undefined),
    });
    const work = (async () => {
      if (plan.recoverFirst) await gate.recover();
      return gate.runToolUses(content, scope);
    })();
    // A watchdog, not a synchronisation: a live worker that never finishes is a failure.
    let watchdog: NodeJS.Timeout | undefined;
    const hung = new Promise<"hung">((resolve) => (watchdog = setTimeout(() => resolve("hung"), 5_000)));
    const outcome = await Promise.race([work, life.died.then(() => "died" as const), hung]);
    clearTimeout(watchdog);
    if (outcome === "hung") throw new Error(`worker ${w} (${JSON.stringify(plan)}) neither finished nor crashed within 5 s`);
    if (outcome === "died") {
      diedAt.set(life.diedAt!, (diedAt.get(life.diedAt!) ?? 0) + 1);
      for (const state of ["in_progress", "uncertain"] as const) {
        for (const record of await ledger.calls.list({ state, tool: "unprobed", limit: 1000 })) {
          if (!interrupted.has(record.key)) interrupted.set(record.key, downstream.applied.get(record.key) ?? 0);
        }
      }
      now += LEASE_MS + 1; // the dead worker's leases run out
      continue;
    }
    expect(outcome.map((r) => r.tool_use_id)).toEqual(content.map((b) => b.id));
    for (const result of outcome) {
      const first = firstAnswer.get(result.tool_use_id);
      if (first) expect(result, `worker ${w} changed the answer to ${result.tool_use_id}`).toEqual(first);
      else if (!result.content.startsWith("EG_IN_PROGRESS")) firstAnswer.set(result.tool_use_id, result);
    }
    if (w === plans.length - 1) await checkFinal(outcome);
  }

  async function checkFinal(final: ToolResultBlock[]) {
    // At most once, for every key the downstream ever saw.
    for (const [key, times] of downstream.applied) expect(times, `effect ${key} applied ${times} times`).toBe(1);
    // No worker ever lost a compare-and-set race or a write: workers never ran side by side.
    expect(alerts.filter((a) => a.code !== "needs_human")).toEqual([]);
    for (const [i, block] of content.entries()) {
      const key = keyOf(block);
      const answer = final[i]!;
      const record = await ledger.calls.get(scope.tenant, key);
      const applied = downstream.applied.get(key) ?? 0;
      const { behaviour } = block.input;
      const where = `${block.id} (${block.name}, ${behaviour})`;
      const toHuman = () => {
        expect(record?.state, where).toBe("needs_human");
        expect(answer.is_error, where).toBe(true);
        expect(answer.content, where).toMatch(/^EG_NEEDS_HUMAN/);
      };
      if (block.name === "unprobed" && interrupted.has(key)) {
        // Its outcome was lost with a dead worker and nothing can ask: a person decides, nothing re-runs.
        toHuman();
        expect(applied, `${where} re-run after its worker died`).toBe(interrupted.get(key));
      } else if (behaviour === "fail") {
        expect(record?.state, where).toBe("failed");
        expect(answer.content, where).toBe(`EG_TOOL_FAILED: ${block.name} failed: downstream refused #${block.input.n}`);
        expect(applied, where).toBe(0);
      } else if (mayNeedHuman.has(key) && (block.name === "unprobed" || record?.state === "needs_human")) {
        // The effect happened, the reply was lost and nobody could ask the downstream (no probe, or
        // its probe failed every time): a person decides. A later worker may have settled it first.
        toHuman();
        expect(applied, where).toBe(1);
      } else {
        // Exactly once, and the agent's answer is the downstream's own record of it.
        expect(record?.state, where).toBe("completed");
        expect(applied, where).toBe(1);
        expect(answer.is_error, where).toBe(false);
        expect(JSON.parse(answer.content), where).toEqual(downstream.results.get(key));
        expect(record?.result, where).toEqual(downstream.results.get(key));
      }
    }
  }
}

describe("replays and crashes, in any interleaving", () => {
  it("apply each write effect at most once and keep each call's first answer", async () => {
    await fc.assert(fc.asyncProperty(scenarioArb, check), { seed: SEED, numRuns: RUNS });
    // Not vacuous: workers died at every kind of point, the take-over path included (checked at full size only).
    if (RUNS < 100) return;
    const kinds = [
      "fault:after_claim", "fault:after_execute", "fault:after_record", "tool:before_effect", "tool:after_effect", "probe",
      "ledger:claim:before", "ledger:claim:after", "ledger:update:before", "ledger:update:after", "ledger:takeOver:before", "ledger:takeOver:after",
    ];
    for (const kind of kinds) expect(diedAt.get(kind) ?? 0, `no worker died at ${kind}: ${JSON.stringify([...diedAt])}`).toBeGreaterThan(0);
  });
});
