/**
 * What one schedule does, drawn from its seed: the downstream systems and their behaviour, the
 * gate's settings, the agent's messages, how often they are delivered twice, and which faults are
 * injected how often. Every built-in downstream keeps the assumptions the guarantee states
 * (docs/guarantees.md): a request lands within the tool's settleMs, and a tool that waits before
 * sending (a window in which its process may stall past its lease and then send late) talks to a
 * downstream that honours keys: fences alone cannot refuse a late request that lands first.
 */
import type { FaultRates } from "./faults.js";
import type { DownstreamConfig } from "./downstream.js";
import type { Rng } from "./rng.js";

export interface Workload {
  readonly downstreams: readonly DownstreamConfig[];
  readonly workers: number;
  readonly leaseMs: number;
  readonly waitMs: number;
  readonly probe: { readonly attempts: number; readonly initialDelayMs: number; readonly maxDelayMs: number };
  /** Messages of tool calls; the agent sends each to a worker, then re-sends as needed. */
  readonly messages: readonly (readonly number[])[];
  /** Probability a message is delivered to two workers at once. */
  readonly twin: number;
  /** Probability the agent sends a message again after it was answered (a resume, a duplicate delivery). */
  readonly replay: number;
  /** How long after a crash the replacement worker starts. */
  readonly restartMs: readonly [number, number];
  /** Whether a restarted worker first runs gate.recover(). */
  readonly recoverOnStart: number;
  readonly rates: FaultRates;
  readonly budget: { readonly crashes: number; readonly freezes: number; readonly failures: number };
}

const PROFILES: readonly FaultRates[] = [
  { crash: 0, freeze: 0, freezeMs: [0, 0], fail: 0, lostReply: 0 },
  { crash: 0.03, freeze: 0.01, freezeMs: [100, 3_000], fail: 0.03, lostReply: 0.03 },
  { crash: 0.08, freeze: 0.03, freezeMs: [500, 10_000], fail: 0.06, lostReply: 0.06 },
  { crash: 0.15, freeze: 0.05, freezeMs: [1_000, 30_000], fail: 0.1, lostReply: 0.1 },
];

export function drawDownstream(rng: Rng, name: string): DownstreamConfig {
  const honoursKeys = rng.chance(0.35);
  const enforcesFence = rng.chance(0.4);
  const probe = rng.chance(0.75);
  const timeoutMs = rng.pick([50, 200, 1_000, 5_000]);
  const maxLandMs = rng.pick([0, 10, 100, 1_000, 8_000]);
  // The tool's declared settleMs covers every landing (the guarantee's assumption), or is absent.
  const settleMs = rng.chance(0.8) ? maxLandMs + rng.pick([0, 1, 50, 500]) : undefined;
  return {
    name, effect: rng.chance(0.2) ? "destructive" : "write",
    honoursKeys, enforcesFence, probe, probeSeesInflight: rng.chance(0.5),
    maxLandMs, settleMs, replyDelayMs: rng.pick([0, 5, 50, 2_000]), timeoutMs,
    dropReply: rng.pick([0, 0.05, 0.2]), reject: rng.pick([0, 0.05]), unavailable: rng.pick([0, 0.05, 0.15]),
    honoursCancel: rng.chance(0.5), toolHonoursAbort: rng.chance(0.6),
    preSendMs: honoursKeys ? rng.pick([0, 0, 20, 400]) : 0,
  };
}

export function drawWorkload(rng: Rng, downstreams?: readonly DownstreamConfig[]): Workload {
  const systems = downstreams ?? Array.from({ length: rng.between(1, 3) }, (_, i) => drawDownstream(rng, `tool_${String.fromCharCode(97 + i)}`));
  const leaseMs = rng.pick([300, 1_000, 5_000, 30_000]);
  const calls = rng.between(1, 6);
  const messages: number[][] = [];
  for (let i = 0; i < calls; ) {
    const size = Math.min(calls - i, rng.between(1, 3));
    messages.push(Array.from({ length: size }, (_, j) => i + j));
    i += size;
  }
  const profile = rng.pick(PROFILES);
  return {
    downstreams: systems,
    workers: rng.between(1, 3),
    leaseMs,
    waitMs: rng.pick([0, leaseMs / 2, leaseMs * 2]),
    probe: { attempts: rng.between(1, 6), initialDelayMs: rng.pick([1, 50, 200]), maxDelayMs: rng.pick([100, 2_000]) },
    messages,
    twin: rng.pick([0, 0.2, 0.6]),
    replay: rng.pick([0, 0.3]),
    restartMs: [10, rng.pick([100, 2_000, 40_000])],
    recoverOnStart: rng.pick([0, 0.5, 1]),
    rates: profile,
    budget: { crashes: rng.between(0, 3), freezes: rng.between(0, 2), failures: rng.between(0, 4) },
  };
}

/**
 * What real agents do beyond one fresh id per call (issue 23), drawn from a stream of its own so a
 * seed's other draws stay as they were: after a message, a new turn may reuse one of its tool_use
 * ids for another call (another input, maybe another tool), or re-plan one of its calls under a
 * new id with an input the tool reads the same (a field its schema strips, keys in another
 * order); write tools may declare an intent window for such re-plans.
 */
export interface Turns {
  /** The intent window of each downstream's tool (by index), if any. */
  readonly repeats: readonly ("collapse" | "refuse" | undefined)[];
  /** After message `after`: reuse the id of its call at `at` for a new call, or re-plan that call. */
  readonly extra: readonly { readonly after: number; readonly at: number; readonly kind: "reuse" | "replan" }[];
  /** The worker that settles the schedule runs a release whose schemas are tighter (an amount over 250 is refused). */
  readonly tightenOnFinal: boolean;
}

export function drawTurns(rng: Rng, workload: Workload): Turns {
  const none: Turns = { repeats: workload.downstreams.map(() => undefined), extra: [], tightenOnFinal: false };
  if (!rng.chance(0.5)) return none;
  const repeats = workload.downstreams.map((d) => (d.effect === "write" && rng.chance(0.6) ? rng.pick(["collapse", "refuse"] as const) : undefined));
  const extra: { after: number; at: number; kind: "reuse" | "replan" }[] = [];
  workload.messages.forEach((message, after) => {
    if (rng.chance(0.35)) extra.push({ after, at: rng.int(message.length), kind: "reuse" });
    if (rng.chance(0.35)) extra.push({ after, at: rng.int(message.length), kind: "replan" });
  });
  return { repeats, extra, tightenOnFinal: rng.chance(0.4) };
}

/**
 * The stalled holder fencing is for (issue 12 defect 4), drawn from a stream of its own: a tool
 * with a probe and a settle horizon, whose downstream does not honour keys but refuses an older
 * fence (docs/guarantees.md, "Fencing"), waits before it sends and ignores ctx.signal; once, its
 * process stalls there well past its lease while a twin delivery waits the lease out and takes
 * the call over. The new holder sends first with a higher fence, so the stale send is refused.
 */
export function drawStalls(rng: Rng, workload: Workload): Workload {
  if (!rng.chance(0.25)) return workload;
  let changed = false;
  const downstreams = workload.downstreams.map((d) => {
    if (changed || d.honoursKeys || !d.probe || d.settleMs === undefined || d.lie) return d;
    changed = true;
    // Past the lease, the take-over's probing and its settle horizon, and the new holder's own send.
    const stallMs = workload.leaseMs * 3 + d.settleMs + d.maxLandMs + 60_000 + rng.pick([0, 30_000]);
    // Its probe sees a request in flight ("running"): a stale send that arrived before the new holder's is then waited for, not sent beside.
    return { ...d, enforcesFence: true, probeSeesInflight: true, preSendMs: rng.pick([20, 400]), toolHonoursAbort: false, honoursCancel: false, stallMs };
  });
  if (!changed) return workload;
  return { ...workload, downstreams, twin: Math.max(workload.twin, 0.6), waitMs: workload.leaseMs * 2 };
}
