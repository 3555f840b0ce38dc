/**
 * One schedule: an agent sends its messages of tool calls to a few workers (each a gate in a
 * simulated process) on one shared ledger, against simulated downstreams, while the seed decides
 * every interleaving and every fault. Then faults stop, the world is settled (recovery until no
 * call is held, every message replayed once more) and the invariants are checked against what
 * the downstreams actually did (invariants.ts).
 */
import { isEffectgateError } from "../../core/errors.js";
import { isDeepStrictEqual } from "node:util";
import type { ToolResultBlock, ToolUseBlock } from "../../core/blocks.js";
import type { AnyTool } from "../../core/tool.js";
import type { CallRecord } from "../../contracts/calls.js";
import type { Json } from "../../core/json.js";
import type { Stores } from "../../contracts/stores.js";
import { createGate, type Gate } from "../../root/create-gate.js";
import { decideApproval } from "../../governance/approvals.js";
import { resolveCall } from "../../reconcile/queue.js";
import { simulatedDownstream, type SimulatedSystem } from "./downstream.js";
import { Faults, type FaultCounts } from "./faults.js";
import { gateEntry, type AskEntry } from "./entries/entry.js";
import { checkInvariants, type Answer, type LateSuccess, type PersonVerdict, type Violation } from "./invariants.js";
import { faultyLedger } from "./ledger.js";
import { seededRng, type Rng } from "./rng.js";
import { drawStalls, drawTurns, drawWorkload, type Turns, type Workload } from "./workload.js";
import { repeatPolicyOf } from "../../core/repeats.js";
import { World, type Process } from "./world.js";

/** Where a schedule keeps its records: a ledger (fresh, or shared with a tenant of its own). */
export interface ScheduleLedger {
  readonly stores: Stores;
  readonly tenant: string;
  /** Prefix for tool names, so schedules sharing one ledger never share a tool. */
  readonly prefix: string;
  release(): Promise<void>;
}

export interface ScheduleOptions {
  /** Opens the ledger this schedule runs on; `clock` is the world's (epoch ms). */
  readonly ledger: (seed: number, clock: () => number) => Promise<ScheduleLedger>;
  /** Your own downstream simulators instead of the built-in ones (docs/testing.md). */
  readonly systems?: (world: World, rng: Rng, prefix: string) => SimulatedSystem[];
  /** Keep the event trace (to read a failing schedule). */
  readonly trace?: boolean;
  /** Override the drawn workload (tests of the explorer itself). */
  readonly workload?: (rng: Rng, prefix: string) => Workload;
  /** How a worker is asked each call (default: its gate's runToolUses); see entries/entry.ts. */
  readonly entry?: AskEntry;
}

export interface ScheduleResult {
  readonly seed: number;
  readonly calls: number;
  readonly faults: FaultCounts;
  readonly workersStarted: number;
  readonly violations: readonly Violation[];
  readonly trace: readonly string[];
}

interface Worker {
  readonly process: Process;
  readonly gate: Gate;
}

interface Call {
  readonly ref: string;
  readonly block: ToolUseBlock;
  readonly system: SimulatedSystem;
  readonly tool: AnyTool;
  /** A later turn's call: another call under an earlier call's id, or a re-plan of an earlier call under a new id (workload.ts Turns). */
  readonly turn?: "reuse" | "replan";
}

/** Mixed into the seed for the turns' own stream (workload.ts drawTurns). */
const TURN_STREAM = 0x2545f491;
/** Mixed into the seed for the stalled holders' stream (workload.ts drawStalls). */
const STALL_STREAM = 0x1b873593;
/** Mixed into the seed for the over-long tool_use ids' stream. */
const LONG_ID_STREAM = 0x27d4eb2f;
/** Mixed into the seed for the person who settles calls given to a human (their own stream). */
const PERSON_STREAM = 0x7feb352d;
const PERSON = "explorer-person";

const ASK_AGAIN = /^(EG_IN_PROGRESS|EG_LEDGER_UNAVAILABLE|EG_AWAITING_APPROVAL)\b/;

export async function runSchedule(seed: number, options: ScheduleOptions): Promise<ScheduleResult> {
  const rng = seededRng(seed);
  const world = new World(rng.fork(), options.trace === true);
  const opened = await options.ledger(seed, world.wall);
  const base = opened.stores;
  const scope = { tenant: opened.tenant, task: `schedule-${seed}` };
  const workloadRng = rng.fork();
  const drawn = options.workload?.(workloadRng, opened.prefix) ?? drawWorkload(workloadRng);
  // Reused ids, re-plans and stalled holders, on the gate's own entry with the built-in world (a scripted workload or your own systems keep theirs).
  const widened = !(options.workload || options.systems || (options.entry && options.entry.name !== "gate"));
  const workload = widened ? drawStalls(seededRng((seed ^ STALL_STREAM) >>> 0), drawn) : drawn;
  const turns: Turns | undefined = widened ? drawTurns(seededRng((seed ^ TURN_STREAM) >>> 0), workload) : undefined;
  const systemRng = rng.fork();
  const systems: SimulatedSystem[] = options.systems?.(world, systemRng, opened.prefix) ??
    workload.downstreams.map((config, i) => simulatedDownstream(world, systemRng.fork(), {
      ...config, name: `${opened.prefix}${config.name}`, ...(turns?.repeats[i] ? { repeats: turns.repeats[i] } : {}),
    }));
  const faults = new Faults(world, rng.fork(), workload.rates, { ...workload.budget });
  const agentRng = rng.fork();
  const violations: Violation[] = [];
  const answers: Answer[] = [];
  /** Runs of a tool, per process and tool_use id: "did this worker start the tool for this call?". */
  const runs = new Map<string, number>();
  const lateSuccesses: (LateSuccess & { readonly process: Process; readonly attempt: number })[] = [];
  /** The highest attempt started per key. */
  const lastRun = new Map<string, number>();
  const verdicts = new Map<string, PersonVerdict>();
  // A settle that failed may still have committed (its reply lost below the store): the final record tells.
  const unanswered = new Map<string, PersonVerdict>();
  const alerts: { readonly code: string; readonly key: string | undefined }[] = [];
  /**
   * Per worker and key: that worker's claim made the record, its reply was lost, and nobody has
   * written the record since (I9). `overtaken`: another process wrote it after (a request already
   * on its way then finds a record that is no longer just the claim).
   */
  const unansweredClaims = new Map<string, { overtaken: boolean }>();

  // The agent's calls: each a logical call (ref) of one system's tool.
  const calls: Call[] = [];
  const callCount = Math.max(...workload.messages.flat(), -1) + 1;
  for (let i = 0; i < callCount; i++) {
    const system = systems[agentRng.int(systems.length)]!;
    const ref = `${opened.prefix}call_${i}`;
    const made = system.newCall(agentRng, ref);
    const tool = system.toolsFor(world.process("probe-only")).find((t) => t.name === made.tool);
    if (!tool) throw new Error(`simulated system ${system.name} made a call of ${made.tool}, which is not one of its tools`);
    calls.push({ ref, system, tool, block: { type: "tool_use", id: `toolu_${i}`, name: made.tool, input: made.input } });
  }
  // Rarely (a stream of its own), a framework's tool_use id longer than a ledger keeps (KEY_LIMITS): refused up front on
  // every store, "nothing was executed", never written to a ledger that would refuse it at its index.
  const longRng = seededRng((seed ^ LONG_ID_STREAM) >>> 0);
  if (widened && calls.length > 0 && longRng.chance(0.08)) {
    const i = longRng.int(calls.length);
    const call = calls[i]!;
    const id = `${call.block.id}_${Array.from({ length: 2_900 }, () => longRng.int(36).toString(36)).join("")}`;
    calls[i] = { ...call, block: { ...call.block, id } };
  }
  const messages = workload.messages.map((ids) => ids.map((i) => calls[i]!));
  if (turns) extendTurns(turns);

  /** Puts each later turn's message right after the message it follows up (while a kept outcome may still be in memory). */
  function extendTurns(plan: Turns): void {
    const turnRng = seededRng((seed ^ TURN_STREAM ^ 0x68e31da4) >>> 0);
    const out: Call[][] = [];
    messages.forEach((message, m) => {
      out.push(message);
      for (const extra of plan.extra.filter((e) => e.after === m)) {
        const earlier = message[extra.at]!;
        if (extra.kind === "reuse") {
          const system = systems[turnRng.int(systems.length)]!;
          const ref = `${opened.prefix}call_${calls.length}`;
          const made = system.newCall(turnRng, ref);
          const tool = system.toolsFor(world.process("probe-only")).find((t) => t.name === made.tool)!;
          const call: Call = { ref, system, tool, turn: "reuse", block: { type: "tool_use", id: earlier.block.id, name: made.tool, input: made.input } };
          calls.push(call);
          out.push([call]);
        } else if (repeatPolicyOf(earlier.tool) && typeof earlier.block.input === "object" && earlier.block.input !== null) {
          // The same intent as the tool reads it: a field its schema strips, the keys in another order.
          const input = Object.fromEntries([["note", "re-planned"], ...Object.entries(earlier.block.input).reverse()]);
          const call: Call = { ...earlier, turn: "replan", block: { type: "tool_use", id: `${earlier.block.id}_r${calls.length}`, name: earlier.block.name, input } };
          calls.push(call);
          out.push([call]);
        }
      }
    });
    messages.splice(0, messages.length, ...out);
  }

  const live: Worker[] = [];
  /** A tool of this schedule stalls its process before it sends (workload.ts drawStalls). */
  const stalledHolder = workload.downstreams.some((d) => d.stallMs !== undefined);
  let started = 0;
  let waitingForWorker: (() => void)[] = [];

  function startWorker(name: string): Worker {
    const process = world.process(name);
    const release = name === "release" ? tightened : (tool: AnyTool) => tool;
    const tools = systems.flatMap((s) => s.toolsFor(process)).map((tool) => counted(release(tool), process));
    // The ledger wrapper reads the gate's owner id lazily, once the gate exists.
    const holder: { gate?: Gate } = {};
    const gate = createGate({
      tools,
      ledger: faultyLedger(world, base, process, () => holder.gate?.owner ?? "", faults, {
        overwrote: (p, owner, before, op) => violations.push({
          seed, invariant: "I6",
          message: `${p.name} (${owner}) wrote ${op} on ${before.key} while ${before.owner} held it (fence ${before.fence})`,
        }),
        // Any write after it (another worker's take-over, or this gate's own, to run it or not) ends "just the claim".
        wrote: (p, key) => {
          for (const [id, claim] of unansweredClaims) {
            if (!id.endsWith(`\u0001${key}`)) continue;
            if (!id.startsWith(`${p.name}\u0001`)) claim.overtaken = true;
            unansweredClaims.delete(id);
          }
        },
        // A write of this gate's own that failed (nothing written) leaves the claim just the claim: still judged (seed 186).
        failedWrite: () => undefined,
        claimReplyLost: (p, key) => void unansweredClaims.set(`${p.name}\u0001${key}`, { overtaken: false }),
      }),
      time: world.timeFor(process),
      random: () => agentRng.next(),
      leaseMs: workload.leaseMs,
      waitMs: workload.waitMs,
      probe: workload.probe,
      onAlert: (a) => {
        alerts.push({ code: a.code, key: a.key });
        world.log(`${name} alert ${a.code}: ${a.message}`);
      },
      faults: (point) => (faults.atPoint(process, point) === "crash" ? new Promise<void>(() => undefined) : undefined),
    });
    holder.gate = gate;
    const worker = { process, gate };
    world.log(`${name} started (${gate.owner.split("/").slice(0, 2).join("/")})`);
    return worker;
  }

  function counted(tool: AnyTool, process: Process): AnyTool {
    return {
      ...tool,
      execute(input, ctx) {
        const id = `${process.name}\u0001${ctx.toolUseId}`;
        lastRun.set(ctx.idempotencyKey, Math.max(ctx.attempt, lastRun.get(ctx.idempotencyKey) ?? 0));
        runs.set(id, (runs.get(id) ?? 0) + 1);
        world.log(`${process.name} starts ${tool.name} for ${ctx.toolUseId} (attempt ${ctx.attempt}, fence ${ctx.fence})`);
        const ran = tool.execute(input, ctx);
        // When each run's success reached its gate (a late reply, if the call was given to a person meanwhile): for I8.
        void Promise.resolve(ran).then((result) => lateSuccesses.push({ key: ctx.idempotencyKey, toolUseId: ctx.toolUseId, at: world.now, process, result, attempt: ctx.attempt }), () => undefined);
        return ran;
      },
    };
  }

  function spawn(name = `worker-${++started}`): Worker {
    const worker = startWorker(name);
    live.push(worker);
    const waiting = waitingForWorker;
    waitingForWorker = [];
    for (const wake of waiting) wake();
    void world.died(worker.process).then(() => {
      live.splice(live.indexOf(worker), 1);
      // A replacement starts after a while, like a supervisor restarting a crashed container.
      world.addTimer(agentRng.between(...workload.restartMs), () => {
        const next = spawn();
        if (agentRng.chance(workload.recoverOnStart)) void world.answerOf(next.process, next.gate.recover()).catch(() => undefined);
      });
    });
    return worker;
  }

  async function anyWorker(): Promise<Worker> {
    while (live.length === 0) await new Promise<void>((wake) => waitingForWorker.push(wake));
    return live[agentRng.int(live.length)]!;
  }

  /**
   * Sends one message to one worker; its answers, or "died" if the worker died first. Each call
   * of the message goes through runToolUses on its own, all at once (as runToolUses runs a
   * message's calls), so each answer is seen the moment it is given: whether this worker had
   * started the tool for that call by then is exact (I4).
   */
  async function ask(worker: Worker, message: readonly Call[], phase: Answer["phase"]): Promise<ToolResultBlock[] | "died"> {
    const entry = options.entry ?? gateEntry;
    const one = (call: Call): Promise<ToolResultBlock> => {
      // Judged as the request arrives: the record is still only this gate's unanswered claim, so this request must run it
      // unless another process writes the record before this gate reads it (I9).
      const unanswered = unansweredClaims.get(`${worker.process.name}\u0001${call.block.id}`);
      return world.answerOf(worker.process, entry.answer(worker.gate, call.block, scope)).then((block) => {
        answers.push({
          effectsBefore: call.system.effects(call.ref),
          ref: call.ref, toolUseId: call.block.id, worker: worker.process.name, phase, at: world.now,
          content: block.content, isError: block.is_error === true,
          ranHere: (runs.get(`${worker.process.name}\u0001${call.block.id}`) ?? 0) > 0,
          ownUnansweredClaim: unanswered !== undefined && !unanswered.overtaken,
        });
        world.log(`agent ← ${worker.process.name} ${call.block.id}: ${block.is_error === true ? "error " : ""}${block.content.slice(0, 160)}`);
        return block;
      });
    };
    const answered = Promise.all(message.map(one)).catch((err: unknown) => {
      violations.push({ seed, invariant: "I3", message: `${entry.name === "gate" ? "runToolUses" : `the ${entry.name} entry`} threw on ${worker.process.name}: ${String(err)}` });
      return "died" as const;
    });
    return Promise.race([answered, world.died(worker.process).then(() => "died" as const)]);
  }

  async function deliver(message: readonly Call[]): Promise<void> {
    for (let attempt = 0; attempt < 6; attempt++) {
      const first = await anyWorker();
      const targets = [first];
      if (agentRng.chance(workload.twin)) targets.push(live.length > 1 ? live.find((w) => w !== first)! : spawnTwin(first));
      world.log(`agent → ${targets.map((t) => t.process.name).join(" + ")}: ${message.map((c) => c.block.id).join(", ")}`);
      const outs = await Promise.all(targets.map((t) => ask(t, message, "run")));
      const answered = outs.filter((o): o is ToolResultBlock[] => o !== "died");
      const settled = answered.some((blocks) => blocks.every((b) => !ASK_AGAIN.test(b.content)));
      if (settled && !agentRng.chance(workload.replay)) return;
      await world.until(world.now + agentRng.pick([1, 200, 3_000, workload.leaseMs + 1]));
    }
  }

  function spawnTwin(first: Worker): Worker {
    // A stalled holder's twin runs in another process: one frozen beside it takes nothing over, and its
    // stale send then lands before the new holder's, the limit guarantees.md states for fences alone.
    return live.length < workload.workers || stalledHolder ? spawn() : live.find((w) => w !== first) ?? live[0]!;
  }

  /** A person deciding approval requests (destructive calls) from time to time, on the ledger itself. */
  async function decidePending(): Promise<void> {
    const governance = base.governance;
    if (!governance) return;
    for (const request of await world.track(governance.listApprovals({ tenant: scope.tenant, state: "pending" }))) {
      const approve = agentRng.chance(0.85);
      await world.track(decideApproval(governance, request.id, { approve, by: "explorer", note: approve ? "looks right" : "not this one" }, world.wall()));
      world.log(`person ${approve ? "approved" : "denied"} ${request.id} (${request.tool})`);
    }
  }
  let approving = true;
  const approver = async () => {
    while (approving) {
      await world.until(world.now + agentRng.pick([50, 1_000, 10_000]));
      if (approving) await decidePending();
    }
  };

  /**
   * In some schedules, a person who settles the calls given to a human (issue 23, "People"), on
   * the ledger through the operator API: mostly right (from what the downstream shows by then),
   * sometimes wrong; a request still on its way may land after, and its late reply must then
   * leave a finding (I8). Their own stream, so other schedules draw as before.
   */
  const personRng = seededRng((seed ^ PERSON_STREAM) >>> 0);
  const settler = widened && personRng.chance(0.4) ? async () => {
    while (approving) {
      await world.until(world.now + personRng.pick([100, 2_000, 15_000]));
      if (!approving) break;
      const parked = (await world.track(base.calls.list({ tenant: scope.tenant, limit: 1000 }))).filter((r) => r.state === "needs_human");
      for (const record of parked) {
        const call = calls.find((c) => c.block.id === record.key);
        if (!call || !personRng.chance(0.6)) continue;
        const applied = call.system.effects(call.ref) > 0;
        const right = personRng.chance(0.75);
        const as: PersonVerdict["as"] = applied === right ? "completed" : "failed";
        const resolution = as === "completed"
          ? { completedWith: (applied ? call.system.resultOf(call.ref) : { id: "confirmed-by-person", ref: call.ref }) as Json, by: PERSON }
          : { failed: "the downstream shows no such request", by: PERSON };
        const settled = await world.track(resolveCall(base, scope.tenant, record.key, resolution)).then(() => true, () => false);
        if (settled) verdicts.set(record.key, { as, at: world.now });
        else unanswered.set(record.key, { as, at: world.now });
        world.log(`person settled ${record.key} as ${as} (${right ? "right" : "wrong"}, ${settled ? "recorded" : "it had moved"})`);
      }
    }
  } : undefined;

  let records: CallRecord[] = [];
  const foundLate = new Set<string>();
  let finalRecovery: string | undefined;
  const main = (async () => {
    for (let i = 0; i < workload.workers; i++) spawn();
    const person = approver();
    const settling = settler?.();
    for (const message of messages) await deliver(message);
    approving = false;
    await person;
    await settling;
    await decidePending();

    // Settle: no more faults; thaw everything, let the live workers finish, recover, replay once.
    faults.stop();
    const operator = startWorker("final");
    // With a later release (tighter schemas), a worker of it replays the settled messages once more, after the operator's own replay.
    const release = turns?.tightenOnFinal === true ? startWorker("release") : undefined;
    const horizon = Math.max(workload.leaseMs, ...calls.map((c) => c.tool.settleMs ?? 0)) + 1;
    const heldNow = async () =>
      (await world.track(base.calls.list({ tenant: scope.tenant, limit: 1000 }))).filter((r) => r.state === "in_progress" || r.state === "uncertain");
    for (let round = 0; ; round++) {
      // Recover until nothing is held, then replay every message once (as the agent resuming would).
      await Promise.all(live.map((w) => world.answerOf(w.process, w.gate.drain())));
      // Faults below the store (a proxy's cut) go on meeting recovery's own reads: a round whose recovery could not read is another round.
      await world.answerOf(operator.process, operator.gate.recover()).catch((err: unknown) => {
        if (!isEffectgateError(err, "EG_LEDGER_UNAVAILABLE")) throw err;
      });
      let held = await heldNow();
      if (held.length === 0) {
        await decidePending();
        for (const message of messages) await ask(operator, message, "final");
        await operator.gate.drain();
        held = await heldNow();
        const open = answers.filter((a) => a.phase === "final").slice(-calls.length).some((a) => ASK_AGAIN.test(a.content));
        if (held.length === 0 && !open) {
          if (!release) break;
          for (const message of messages) await ask(release, message, "final");
          await release.gate.drain();
          // Driver faults go on meeting the release's replay too: one it must repeat is another round (seed 4030469).
          if (!answers.filter((a) => a.phase === "final").slice(-calls.length).some((a) => ASK_AGAIN.test(a.content))) break;
        }
      }
      if (round >= 40) {
        finalRecovery = `after 40 rounds of recovery and replay, ${held.map((r) => `${r.key} (${r.state}, owner ${r.owner ?? "none"})`).join(", ") || "some answers"} still not settled`;
        break;
      }
      await world.until(world.now + horizon + 30_000);
    }
    await operator.gate.drain();
    for (const w of [...live, operator, ...(release ? [release] : [])]) await w.gate.close();
    records = await world.track(base.calls.list({ tenant: scope.tenant, limit: 1000 }));
    for (const r of records) {
      const tried = unanswered.get(r.key);
      if (tried && !verdicts.has(r.key) && r.state === tried.as && r.error?.includes(`settled by a person (${PERSON})`)) verdicts.set(r.key, tried);
    }
    for (const [key] of verdicts) {
      const found = await world.track(base.reconcile?.listFindings({ tenant: scope.tenant, key, limit: 100 }) ?? Promise.resolve([]));
      if (found.some((f) => f.source === "late_reply")) foundLate.add(key);
    }
  })();

  const ended = await world.run(main);
  if (ended !== "done") {
    violations.push({ seed, invariant: "I3", message: ended === "stuck" ? "the schedule deadlocked: nothing could move and the agent was still waiting" : "the schedule did not settle within its step budget (a livelock)" });
  } else {
    await main;
  }
  if (finalRecovery) violations.push({ seed, invariant: "I3", message: finalRecovery });
  // A late reply counts for I8 only where its gate could still act on it: its process alive to the end.
  // Only the last run started for a call is the one its gate waits on after giving it to a person (an earlier abandoned run's reply is not followed: see docs/testing.md).
  const heard = lateSuccesses.filter((l) => l.process.state !== "dead" && l.attempt === lastRun.get(l.key));
  const flagged = new Set([...foundLate, ...alerts.filter((a) => a.code === "late_reply_contradicts" || a.code === "record_failed").flatMap((a) => (a.key ? [a.key] : []))]);
  for (const w of live) w.process.state = "dead";
  violations.push(...checkInvariants(seed, { calls, answers, records: new Map(records.map((r) => [r.key, r])), verdicts, lateSuccesses: heard, flagged }));
  await opened.release();
  return {
    seed, calls: calls.length, faults: faults.counts, workersStarted: started + 1,
    violations: dedupe(violations), trace: world.trace,
  };
}

/** The same tool in a later release whose schema refuses what the earlier one took (an amount over 250): a replay of a call the ledger holds must still be answered from its record. */
function tightened(tool: AnyTool): AnyTool {
  const inner = tool.input["~standard"];
  return {
    ...tool,
    input: {
      "~standard": {
        ...inner,
        validate: (value: unknown) => {
          const amount = (value as { amount?: unknown } | null)?.amount;
          return typeof amount === "number" && amount > 250 ? { issues: [{ message: "amount must be at most 250 (tightened in this release)" }] } : inner.validate(value);
        },
      },
    },
  };
}

function dedupe(violations: readonly Violation[]): Violation[] {
  const out: Violation[] = [];
  for (const v of violations) if (!out.some((o) => isDeepStrictEqual(o, v))) out.push(v);
  return out;
}
