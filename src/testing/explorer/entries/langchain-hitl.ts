/**
 * The LangChain human-in-the-loop entry: a world of its own. A real `createAgent` agent
 * (langchain 1.x) runs in each of a few worker processes, every one with its own gate on the one
 * shared ledger, and all on one shared checkpointer (as a PostgreSQL saver would be): the SDK's own
 * fake model answers the user with one AI message of tool calls; `effectgateHumanInTheLoop` pauses
 * the graph with a HITLRequest for the calls that need a person; the tools are the adapter's
 * `langchainTool`s, in front of the simulated downstreams.
 *
 * A job runner delivers the thread's inputs (the start, then the reviewer's resume
 * `{ decisions, by }`) at least once, as such runners do: a resume may be delivered to two workers
 * at once (both resume the one interrupted checkpoint), or its worker may die after the decisions
 * were stored and before the tools ran, and the resume is delivered again; the faults of the
 * schedule (kills, stalls, ledger failures at every ledger step) strike meanwhile.
 *
 * Invariants: I1–I6 per call against the downstream's counters (invariants.ts), and the
 * reviewer's decisions (reported under the closest general invariant):
 * - (I3) an approved or edited call runs: its record holds the decided input (an edit's new args);
 * - (I1) an edited call's original input, and a rejected call, never reach the downstream;
 * - (I4) no tool answer for an approved or edited call tells the model it was denied or mismatched
 *   its key, and the thread's last ToolMessage for each call is its recorded outcome (a rejected
 *   call's: the denial).
 *
 * Loaded only when a schedule asks for the "langchain-hitl" entry: it imports `langchain`,
 * `@langchain/core` and `@langchain/langgraph` (optional peers).
 */
import { AIMessage, type BaseMessage } from "@langchain/core/messages";
import { Command, MemorySaver } from "@langchain/langgraph";
import { createAgent, createMiddleware, fakeModel, type AgentMiddleware } from "langchain";
import { effectgateHumanInTheLoop, langchainTool, type HitlDecision, type HitlRequest } from "../../../langchain.js";
import { renderResult } from "../../../core/blocks.js";
import { messageOf } from "../../../core/errors.js";
import { isSettled } from "../../../core/states.js";
import type { AnyTool } from "../../../core/tool.js";
import type { CallRecord } from "../../../contracts/calls.js";
import type { GovernanceStore } from "../../../contracts/governance.js";
import { decideApproval } from "../../../governance/approvals.js";
import { createGate, type Gate } from "../../../root/create-gate.js";
import { simulatedDownstream, type SimulatedSystem } from "../downstream.js";
import { Faults } from "../faults.js";
import { checkInvariants, type Answer, type Violation } from "../invariants.js";
import { faultyLedger } from "../ledger.js";
import { seededRng } from "../rng.js";
import type { ScheduleOptions, ScheduleResult } from "../schedule.js";
import { drawDownstream, drawWorkload, type Workload } from "../workload.js";
import { World, type Process } from "../world.js";
import type { WorldEntry } from "./world-entry.js";
import { dedupe, machineClock, never } from "./support.js";

/** One tool call of the model's message, and what the reviewer decides for it (calls that need no person have none). */
interface HitlCall {
  readonly ref: string;
  readonly id: string;
  readonly system: SimulatedSystem & { readonly config: { readonly effect: string } };
  readonly args: { readonly ref: string; readonly amount: number };
  readonly decision: "approve" | "edit" | "reject";
  /** An edit's new amount. */
  readonly edited: number;
}

type Delivery = "once" | "twice" | "interrupted";

/** What the checkpointer says of the thread (LangGraph's StateSnapshot, the parts read here). */
interface ThreadState {
  readonly next: readonly string[];
  readonly values: unknown;
  readonly tasks?: readonly { readonly interrupts?: readonly { readonly value?: unknown }[] }[];
}

interface Worker {
  readonly process: Process;
  readonly gate: Gate;
  readonly agent: ReturnType<typeof createAgent>;
  /** Dies right after its human-in-the-loop hook returns (its decisions stored, no tool run yet), once. */
  killAfterReview: boolean;
  /** Stalls (as by SIGSTOP) this long after loading the checkpoint and before its human-in-the-loop hook runs, once. */
  stallBeforeReview: number;
}

const AI_MESSAGE_ID = "explorer-ai-1";
/** Answers that say to make the same call again later (the runner replays the thread's tool step for them). */
const ASK_AGAIN = /^(EG_IN_PROGRESS|EG_LEDGER_UNAVAILABLE|EG_AWAITING_APPROVAL)\b/;

export async function runHitlSchedule(seed: number, options: ScheduleOptions): Promise<ScheduleResult> {
  const rng = seededRng(seed);
  const world = new World(rng.fork(), options.trace === true);
  const opened = await options.ledger(seed, world.wall);
  const base = opened.stores;
  const scope = { tenant: opened.tenant, task: `hitl-${seed}` };
  const drawRng = rng.fork();
  const workload: Workload = drawWorkload(drawRng, []);
  const systemRng = rng.fork();
  // A refund a person must approve (destructive: every call asks), and a note beside it that needs nobody.
  const refund = simulatedDownstream(world, systemRng.fork(), { ...drawDownstream(drawRng, `${opened.prefix}refund`), effect: "destructive" });
  const note = simulatedDownstream(world, systemRng.fork(), { ...drawDownstream(drawRng, `${opened.prefix}note`), effect: "write" });
  const calls: HitlCall[] = [];
  const count = drawRng.between(1, 3);
  for (let i = 0; i < count; i++) {
    const system = i === 0 || drawRng.chance(0.7) ? refund : note;
    const amount = drawRng.between(20, 500);
    calls.push({
      ref: `${opened.prefix}hitl_${i}`, id: `call_${i}`, system, args: { ref: `${opened.prefix}hitl_${i}`, amount },
      decision: drawRng.pick(["approve", "edit", "edit", "reject"] as const), edited: Math.max(1, Math.floor(amount / 10)),
    });
  }
  const resumeDelivery: Delivery = drawRng.pick(["once", "twice", "twice", "interrupted", "interrupted"] as const);
  const faults = new Faults(world, rng.fork(), workload.rates, { ...workload.budget });
  const agentRng = rng.fork();
  const restoreClock = machineClock(world, 0);
  const violations: Violation[] = [];
  const answers: Answer[] = [];
  const runs = new Map<string, number>();
  const checkpointer = new MemorySaver();
  const thread = { configurable: { thread_id: scope.task } };
  const needsReview = (c: HitlCall) => c.system === refund;

  // The model: the user's turn is answered with the message of tool calls (always the same one), anything after with "done".
  const modelTurn = (messages: BaseMessage[]) => messages.some((m) => m.getType() === "ai")
    ? new AIMessage("done")
    : new AIMessage({ id: AI_MESSAGE_ID, content: "", tool_calls: calls.map((c) => ({ id: c.id, name: c.system.name, args: { ...c.args }, type: "tool_call" as const })) });

  const live: Worker[] = [];
  let started = 0;
  const wakeWaiting: (() => void)[] = [];

  function startWorker(name: string): Worker {
    const process = world.process(name);
    const holder: { gate?: Gate } = {};
    const tools = [refund, note].flatMap((s) => s.toolsFor(process)).map((t) => counted(t, process));
    const gate = createGate({
      tools,
      ledger: faultyLedger(world, base, process, () => holder.gate?.owner ?? "", faults, {
        overwrote: (p, owner, before, op) => violations.push({ seed, invariant: "I6", message: `${p.name} (${owner}) wrote ${op} on ${before.key} while ${before.owner} held it (fence ${before.fence})` }),
      }),
      time: world.timeFor(process), random: () => agentRng.next(),
      leaseMs: workload.leaseMs, waitMs: workload.waitMs, probe: workload.probe,
      onAlert: (a) => world.log(`${name} alert ${a.code}: ${a.message.slice(0, 160)}`),
      faults: (point) => (faults.atPoint(process, point) === "crash" ? never<void>() : undefined),
    });
    holder.gate = gate;
    const model = fakeModel();
    // The fake model answers one queued entry per call: enough of them for every run of the thread on this worker.
    for (let i = 0; i < 200; i++) model.respond(modelTurn);
    const worker: Worker = { process, gate, killAfterReview: false, stallBeforeReview: 0, agent: undefined as unknown as Worker["agent"] };
    const hitl = effectgateHumanInTheLoop(gate, { scope: () => scope, reviewer: "reviewer" });
    const agent = createAgent({
      model,
      tools: tools.map((t) => langchainTool(gate, t, { scope: () => scope })),
      middleware: [interruptibleAfter(hitl, worker), observer(worker)],
      checkpointer,
    });
    Object.assign(worker, { agent });
    world.log(`${name} started`);
    return worker;
  }

  /** The human-in-the-loop middleware, with a stall of its worker before its hook and a kill right after it (when armed). */
  function interruptibleAfter(hitl: AgentMiddleware, worker: Worker): AgentMiddleware {
    const own = hitl as unknown as { afterModel?: unknown };
    const hook = typeof own.afterModel === "function" ? (own.afterModel as (...args: unknown[]) => Promise<unknown>) : undefined;
    if (!hook) throw new Error("effectgateHumanInTheLoop has no afterModel hook to drive");
    return {
      ...hitl,
      afterModel: async (...args: unknown[]) => {
        if (worker.stallBeforeReview > 0) {
          world.freeze(worker.process, worker.stallBeforeReview, "before its human-in-the-loop hook (its checkpoint loaded)");
          worker.stallBeforeReview = 0;
          await world.running(worker.process);
        }
        const out = await hook(...args);
        if (worker.killAfterReview && worker.process.state === "running") {
          worker.killAfterReview = false;
          world.kill(worker.process, "after its decisions were stored, before the tools ran");
          return never();
        }
        return out;
      },
    } as AgentMiddleware;
  }

  /** Innermost: every ToolMessage a worker's tool node hands the graph, as the answer that worker gave. */
  function observer(worker: Worker): AgentMiddleware {
    return createMiddleware({
      name: "ExplorerObserver",
      wrapToolCall: async (request, handler) => {
        const out = await handler(request);
        const message = out as { content?: unknown; status?: string; tool_call_id?: string };
        const call = calls.find((c) => c.id === request.toolCall.id);
        if (call && worker.process.state !== "dead") {
          const content = typeof message.content === "string" ? message.content : JSON.stringify(message.content);
          answers.push({
            ref: call.ref, toolUseId: call.id, worker: worker.process.name, phase: "run", at: world.now, content, isError: message.status === "error",
            ranHere: (runs.get(`${worker.process.name}\u0001${call.id}`) ?? 0) > 0,
          });
          world.log(`agent ← ${worker.process.name} ${call.id}: ${message.status === "error" ? "error " : ""}${content.slice(0, 160)}`);
        }
        return out;
      },
    }) as AgentMiddleware;
  }

  function counted(tool: AnyTool, process: Process): AnyTool {
    return {
      ...tool,
      execute(input, ctx) {
        const id = `${process.name}\u0001${ctx.toolUseId}`;
        runs.set(id, (runs.get(id) ?? 0) + 1);
        world.log(`${process.name} starts ${tool.name} for ${ctx.toolUseId} ${JSON.stringify(input)} (attempt ${ctx.attempt}, fence ${ctx.fence})`);
        return tool.execute(input, ctx);
      },
    };
  }

  function spawn(): Worker {
    const worker = startWorker(`worker-${++started}`);
    live.push(worker);
    for (const wake of wakeWaiting.splice(0)) wake();
    void world.died(worker.process).then(() => {
      live.splice(live.indexOf(worker), 1);
      world.addTimer(agentRng.between(...workload.restartMs), () => void spawn());
    });
    return worker;
  }

  async function anyWorker(except?: Worker): Promise<Worker> {
    for (;;) {
      const choices = live.filter((w) => w !== except);
      if (choices.length > 0) return choices[agentRng.int(choices.length)]!;
      if (except && live.length > 0) return live[0]!;
      await new Promise<void>((wake) => wakeWaiting.push(wake));
    }
  }

  type Outcome = { readonly values: { messages?: BaseMessage[]; __interrupt__?: { value?: unknown }[] } } | "died" | "failed";

  async function invokeOn(worker: Worker, input: unknown, label: string, checkpoint?: string): Promise<Outcome> {
    world.log(`runner → ${worker.process.name}: ${label}`);
    const config = checkpoint === undefined ? thread : { configurable: { ...thread.configurable, checkpoint_id: checkpoint } };
    const run = world.answerOf(worker.process, worker.agent.invoke(input as never, config)).then(
      (values) => ({ values: values as Exclude<Outcome, string>["values"] }),
      (err: unknown) => {
        world.log(`${worker.process.name}: the graph failed: ${messageOf(err).slice(0, 160)}`);
        return "failed" as const;
      },
    );
    return Promise.race([run, world.died(worker.process).then(() => "died" as const)]);
  }

  /**
   * What a runner sends a thread again: the input itself while the thread waits for it (not started yet, or paused
   * on the interrupt a resume answers); `null` (go on from the last checkpoint) once a run got further and broke off;
   * nothing once the thread has gone past it (its outcome then, as the checkpointer holds it).
   */
  async function again(worker: Worker, input: unknown): Promise<{ readonly input: unknown } | { readonly outcome: Outcome }> {
    const state: ThreadState = await world.answerOf<ThreadState>(worker.process, worker.agent.getState(thread));
    const interrupts = (state.tasks ?? []).flatMap((t) => t.interrupts ?? []);
    const started = ((state.values as { messages?: unknown[] } | undefined)?.messages?.length ?? 0) > 0;
    if (!started) return { input };
    if (interrupts.length > 0) {
      return input instanceof Command ? { input } : { outcome: { values: { __interrupt__: interrupts.map((i) => ({ value: i.value })) } } };
    }
    if (state.next.length > 0) return { input: null };
    return { outcome: { values: state.values as Exclude<Outcome, string>["values"] } };
  }

  /** At least once: to one worker (two at once for "twice"), again to another after a death or a failure, until one finishes the run. */
  async function deliver(input: unknown, label: string, how: Delivery): Promise<Outcome> {
    let last: Outcome = "failed";
    for (let attempt = 0; attempt < 8; attempt++) {
      const first = await anyWorker();
      const targets = [first];
      if (attempt === 0 && how === "twice") {
        // The duplicate delivery: at once, or to a worker that stalls after loading the same checkpoint.
        const twin = await anyWorker(first);
        twin.stallBeforeReview = agentRng.pick([0, 0, 50, 3_000, 20_000]);
        targets.push(twin);
      }
      if (attempt === 0 && how === "interrupted") first.killAfterReview = true;
      const outs = await Promise.all(targets.map(async (w) => {
        const next = attempt === 0 ? { input } : await again(w, input);
        return "outcome" in next ? next.outcome : invokeOn(w, next.input, next.input === null ? `${label}: go on from the last checkpoint` : label);
      }));
      const done = outs.find((o): o is Exclude<Outcome, string> => typeof o !== "string");
      if (done) return done;
      last = outs[0] ?? last;
      await world.until(world.now + agentRng.pick([1, 200, 3_000, workload.leaseMs + 1]));
    }
    return last;
  }

  /** The reviewer's resume for a HITLRequest: a decision per action, in order, as LangChain's UI sends them. */
  function resumeFor(request: HitlRequest): Command {
    const decisions = request.actionRequests.map((action): HitlDecision => {
      const call = calls.find((c) => c.id === action.callId);
      if (!call || call.decision === "approve") return { type: "approve" };
      if (call.decision === "reject") return { type: "reject", message: "not this one" };
      return { type: "edit", editedAction: { name: action.name, args: { ...call.args, amount: call.edited } } };
    });
    world.log(`reviewer decides ${request.actionRequests.map((a, i) => `${a.callId}: ${decisions[i]?.type}`).join(", ")}`);
    return new Command({ resume: { decisions, by: "reviewer" } });
  }

  /** The same reviewer, deciding a request the graph paused on elsewhere (a tool's own interrupt) as they decided its call. */
  async function reviewLeftovers(): Promise<void> {
    const governance = base.governance;
    if (!governance) return;
    for (const request of await world.track(governance.listApprovals({ tenant: scope.tenant, state: "pending" }))) {
      const call = calls.find((c) => c.id === request.toolUseId);
      const approve = call ? call.decision !== "reject" : agentRng.chance(0.85);
      await world.track(decideApproval(governance, request.id, { approve, by: "reviewer", note: "decided in effectgate" }, world.wall()));
      world.log(`reviewer ${approve ? "approved" : "denied"} ${request.id} (${request.tool} ${request.toolUseId})`);
    }
  }

  /** The newest checkpoint of the thread whose next step is the tool node: where replaying that step starts. */
  async function toolStep(worker: Worker): Promise<string | undefined> {
    for await (const snapshot of worker.agent.graph.getStateHistory(thread)) {
      const snap = snapshot as { next: readonly string[]; config: { configurable?: { checkpoint_id?: string } } };
      if (snap.next.includes("tools")) return snap.config.configurable?.checkpoint_id;
    }
    return undefined;
  }

  const interruptOf = (outcome: Outcome) => (typeof outcome === "string" ? undefined : outcome.values.__interrupt__?.[0]?.value);
  const isHitlRequest = (value: unknown): value is HitlRequest => typeof value === "object" && value !== null && Array.isArray((value as HitlRequest).actionRequests);

  let records: CallRecord[] = [];
  let finalMessages: BaseMessage[] = [];
  let unsettled: string | undefined;
  const main = (async () => {
    for (let i = 0; i < Math.max(2, workload.workers); i++) spawn();
    let input: unknown = { messages: [{ role: "user", content: "refund what was asked" }] };
    let label = "start";
    let how: Delivery = "once";
    for (let turn = 0; turn < 6; turn++) {
      const outcome = await deliver(input, label, how);
      const paused = interruptOf(outcome);
      if (paused === undefined) break;
      if (isHitlRequest(paused)) {
        input = resumeFor(paused);
        label = "resume (the reviewer's decisions)";
        how = resumeDelivery;
      } else {
        await reviewLeftovers();
        input = new Command({ resume: "decided in effectgate" });
        label = "resume (decided in effectgate)";
        how = "once";
      }
    }

    // Settle: no more faults; recover what dead workers held, resume whatever still waits, until the thread ended.
    faults.stop();
    const operator = startWorker("final");
    for (let round = 0; ; round++) {
      // Late replies still being recorded land first (as in schedule.ts), so the thread is judged against the settled ledger.
      await Promise.all([...live, operator].map((w) => world.answerOf(w.process, w.gate.drain())));
      for (const w of [...live, operator]) await world.answerOf(w.process, w.gate.recover()).catch(() => undefined);
      await reviewLeftovers();
      const state: ThreadState = await world.answerOf<ThreadState>(operator.process, operator.agent.getState(thread));
      const pending = (state.tasks ?? []).flatMap((t) => t.interrupts ?? []).map((i) => i.value);
      const held = (await world.track(base.calls.list({ tenant: scope.tenant, limit: 1000 }))).filter((r) => !isSettled(r.state) && r.state !== "needs_human");
      const messages = (state.values as { messages?: BaseMessage[] }).messages ?? [];
      const settledNow = new Set((await world.track(base.calls.list({ tenant: scope.tenant, limit: 1000 }))).filter((r) => isSettled(r.state)).map((r) => r.key));
      // Told to repeat later: a wait, or a call a person was asked about that has an answer now ("this same call will return the answer once it is resolved").
      const toldToRepeat = state.next.length === 0 && lastAnswers(messages).some((m) => ASK_AGAIN.test(textOf(m)) ||
        (/^EG_NEEDS_HUMAN\b/.test(textOf(m)) && settledNow.has(String((m as unknown as { tool_call_id?: string }).tool_call_id))));
      if (state.next.length === 0 && held.length === 0 && !toldToRepeat) {
        finalMessages = messages;
        break;
      }
      if (round >= 20) {
        unsettled = `after 20 rounds the thread had not ended (next: ${state.next.join(", ") || "none"}; held: ${held.map((r) => `${r.key} ${r.state}`).join(", ") || "none"})`;
        break;
      }
      const request = pending.find(isHitlRequest);
      if (toldToRepeat) {
        // "Repeat this same call later": the runner replays the thread's tool step (the checkpoint before it ran), same calls, same ids.
        const before = await world.answerOf(operator.process, toolStep(operator));
        if (before !== undefined) await invokeOn(operator, null, "settle: the tool step again, as its answers said", before);
      } else {
        const resumeWith: unknown = request ? resumeFor(request) : pending.length > 0 ? new Command({ resume: "decided in effectgate" }) : state.next.length > 0 ? input : undefined;
        if (resumeWith !== undefined) await invokeOn(operator, resumeWith, "settle: the thread's next step");
      }
      await world.until(world.now + Math.max(workload.leaseMs, ...[refund, note].map((s) => s.config.settleMs ?? 0)) + 1_000);
    }
    for (const w of [...live, operator]) await w.gate.close();
    records = await world.track(base.calls.list({ tenant: scope.tenant, limit: 1000 }));
  })();

  let ended: Awaited<ReturnType<World["run"]>>;
  try {
    ended = await world.run(main);
    if (ended === "done") await main;
  } finally {
    restoreClock();
  }
  if (ended !== "done") violations.push({ seed, invariant: "I3", message: ended === "stuck" ? "the LangGraph schedule deadlocked" : "the LangGraph schedule did not settle within its step budget (a livelock)" });
  if (unsettled) violations.push({ seed, invariant: "I3", message: unsettled });
  for (const w of live) w.process.state = "dead";

  // The thread's last word on each call, as the model reads it from now on.
  for (const m of finalMessages) {
    if (m.getType() !== "tool") continue;
    const message = m as unknown as { tool_call_id?: string; content: unknown; status?: string };
    const call = calls.find((c) => c.id === message.tool_call_id);
    if (!call) continue;
    answers.push({
      ref: call.ref, toolUseId: call.id, worker: "thread", phase: "final", at: world.now, ranHere: false,
      content: typeof message.content === "string" ? message.content : JSON.stringify(message.content), isError: message.status === "error",
    });
  }
  const byKey = new Map(records.map((r) => [r.key, r]));
  const probeOnly = world.process("probe-only");
  violations.push(...checkInvariants(seed, {
    calls: calls.map((c) => ({ ref: c.ref, block: { id: c.id }, system: c.system, tool: c.system.toolsFor(probeOnly)[0] as AnyTool })),
    answers, records: byKey,
  }));
  violations.push(...await reviewerInvariants(seed, calls.filter(needsReview), answers, byKey, base.governance, scope.tenant));
  await opened.release();
  return { seed, calls: calls.length, faults: faults.counts, workersStarted: started + 1, violations: dedupe(violations), trace: world.trace };
}

const NOT_RUN = /^EG_(APPROVAL_DENIED|KEY_MISMATCH)\b/;

/** A message's content as the model reads it. */
function textOf(message: BaseMessage): string {
  return typeof message.content === "string" ? message.content : JSON.stringify(message.content);
}

/** The last ToolMessage of each call in a thread's messages. */
function lastAnswers(messages: readonly BaseMessage[]): BaseMessage[] {
  const byCall = new Map<string, BaseMessage>();
  for (const m of messages) {
    const id = m.getType() === "tool" ? (m as unknown as { tool_call_id?: string }).tool_call_id : undefined;
    if (id !== undefined) byCall.set(id, m);
  }
  return [...byCall.values()];
}

/** What the reviewer decided is what happened (see the header). */
async function reviewerInvariants(
  seed: number, calls: readonly HitlCall[], answers: readonly Answer[], records: ReadonlyMap<string, CallRecord>,
  governance: GovernanceStore | undefined, tenant: string,
): Promise<Violation[]> {
  const out: Violation[] = [];
  const fail = (invariant: Violation["invariant"], message: string) => out.push({ seed, invariant, message: `[langchain-hitl: ${message}` });
  for (const call of calls) {
    const record = records.get(call.id);
    const decided = call.decision === "edit" ? call.edited : call.args.amount;
    const applied = call.system.resultOf(call.ref) as { amount?: number } | undefined;
    const final = answers.filter((a) => a.ref === call.ref && a.phase === "final").at(-1);
    if (call.decision === "reject") {
      if (call.system.effects(call.ref) > 0) fail("I1", `a rejected call never runs] ${call.id} was rejected by the reviewer, yet applied ${call.system.effects(call.ref)} time(s)`);
      if (final && !/^EG_APPROVAL_DENIED\b/.test(final.content)) fail("I4", `the thread's last word is the outcome] ${call.id} was rejected, but the thread's last ToolMessage says: ${final.content.slice(0, 160)}`);
      continue;
    }
    const recordedAmount = (record?.input as { amount?: unknown } | null | undefined)?.amount;
    if (!record || recordedAmount !== decided) {
      fail("I3", `an approved or edited call runs] the reviewer decided ${call.decision} of ${call.id} (amount ${decided}), but ${record ? `its record holds amount ${String(recordedAmount)}` : "it has no record: it never ran"}${
        governance ? `; its approvals: ${(await governance.listApprovals({ tenant, limit: 50 })).filter((r) => r.toolUseId === call.id).map((r) => `${r.state}${r.note ? ` (${r.note.slice(0, 60)})` : ""}`).join(", ")}` : ""}`);
    }
    if (applied !== undefined && applied.amount !== decided) {
      fail("I1", `an edited call's original input never runs] ${call.id} was applied with amount ${String(applied.amount)}, not the ${call.decision === "edit" ? "edited" : "approved"} ${decided}`);
    }
    for (const a of answers.filter((x) => x.ref === call.ref && NOT_RUN.test(x.content))) {
      fail("I4", `the model is told the outcome of an approved call] ${a.worker} answered ${call.id} (${call.decision}, ${record ? `recorded ${record.state}` : "no record"}) with: ${a.content.slice(0, 160)}`);
      break;
    }
    if (final && record?.state === "completed" && final.content !== renderResult(record.result)) {
      fail("I4", `the thread's last word is the outcome] ${call.id} is recorded completed, but the thread's last ToolMessage says: ${final.content.slice(0, 160)}`);
    }
  }
  return out;
}

export const langchainHitlEntry: WorldEntry = { kind: "world", name: "langchain-hitl", run: runHitlSchedule };
