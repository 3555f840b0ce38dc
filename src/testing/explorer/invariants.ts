/**
 * What must hold after every schedule, checked against the downstreams' own counters (what
 * actually happened), the answers the agent got, and the ledger's final records:
 *
 * - I1: no call's effect is applied twice where its tool has a probe or its downstream honours keys;
 * - I2: a tool without a probe, whose downstream does not honour keys, is never sent again after a
 *   send that may have applied (only a person could decide that);
 * - I3: no call is lost: each ends completed (its effect happened), failed (it did not) or with a
 *   person (needs_human), and every schedule settles;
 * - I4: the agent is never told nothing was executed by a worker that started the tool for that
 *   call, and no call is recorded failed when its effect happened;
 * - I5: every successful answer is the recorded result, verbatim, and that is the result the
 *   downstream actually produced (when the worker that got it died before its write landed, the
 *   call waits for a person, and the answer it gave is still the downstream's real result);
 * - I6: a stale holder never overwrites a newer holder's record (watched in ledger.ts);
 * - I7: no fault ends the process: an uncaught exception or unhandled rejection while a schedule
 *   runs (an unhandled 'error' of a database connection, say) would have ended an agent's process
 *   (watched in explore.ts, process-faults.ts);
 * - I8: a recorded state never contradicts the downstream without a finding: a call a person
 *   settled (schedule.ts, the person who settles calls given to a human) as failed, or as completed
 *   with another result, whose real reply then reached a live gate, carries a late_reply finding
 *   (or, when the ledger could not take one, an alert). A person's verdict itself is theirs: I3,
 *   I4 and I5 do not judge it against the downstream, I8 does once the gate hears otherwise.
 * - I9: a claim whose reply was lost (it committed; the gate was told it failed) is the gate's own
 *   call that never started: asked again while its record is still just that claim, the live gate
 *   that made it runs it (once), never gives it to a person (needs_human) as if its tool might have
 *   run. Judged from the faults the world injected (ledger.ts) and the runs it counted.
 */
import { renderResult } from "../../core/blocks.js";
import type { Json } from "../../core/json.js";
import type { AnyTool } from "../../core/tool.js";
import type { CallRecord } from "../../contracts/calls.js";
import type { SimulatedSystem } from "./downstream.js";

export type Invariant = "I1" | "I2" | "I3" | "I4" | "I5" | "I6" | "I7" | "I8" | "I9";

export const INVARIANTS: readonly Invariant[] = ["I1", "I2", "I3", "I4", "I5", "I6", "I7", "I8", "I9"];

export interface Violation {
  readonly seed: number;
  readonly invariant: Invariant;
  readonly message: string;
}

export interface Answer {
  readonly ref: string;
  readonly toolUseId: string;
  readonly worker: string;
  readonly phase: "run" | "final";
  readonly at: number;
  readonly content: string;
  readonly isError: boolean;
  /** How many times the call's effect had been applied downstream when the answer was given (I4 across workers). */
  readonly effectsBefore?: number;
  /** Whether the answering worker had started the tool for this call before answering. */
  readonly ranHere: boolean;
  /**
   * Whether, when this request reached the worker, its own claim had made the call's record, the
   * claim's reply had been lost (injected, so the world knows it committed and that no tool started
   * from it), and nobody had written the record since: the record was exactly the unanswered claim,
   * which only this gate can know, and no other process wrote it before the answer (I9).
   */
  readonly ownUnansweredClaim?: boolean;
}

/** How and when a person settled a call given to a human. */
export interface PersonVerdict {
  readonly as: "completed" | "failed";
  readonly at: number;
}

/** A run of a tool whose success reached its gate at `at` (for a call given to a person by then: a late reply). */
export interface LateSuccess {
  readonly key: string;
  readonly toolUseId: string;
  readonly at: number;
  readonly result: unknown;
}

export interface Evidence {
  readonly calls: readonly {
    readonly ref: string; readonly block: { readonly id: string }; readonly system: SimulatedSystem; readonly tool: AnyTool;
    /** A later turn's call (schedule.ts): another call under an earlier id, or a re-plan of an earlier call under a new id. */
    readonly turn?: "reuse" | "replan";
  }[];
  readonly answers: readonly Answer[];
  /** The final record of each call, by key (the tool_use id). */
  readonly records: ReadonlyMap<string, CallRecord>;
  /** Calls a person settled, by key. */
  readonly verdicts?: ReadonlyMap<string, PersonVerdict>;
  /** Successful tool runs whose gate stayed alive (I8). */
  readonly lateSuccesses?: readonly LateSuccess[];
  /** Keys with a late_reply finding or a late-reply alert. */
  readonly flagged?: ReadonlySet<string>;
}

const NOTHING_RAN = /nothing was executed/i;
const NEEDS_HUMAN = /^EG_NEEDS_HUMAN\b/;
/** Answers that end a call before it was ever claimed: a person (or the policy) refused it. */
const REPEATED = /^EG_REPEATED_CALL\b/;
/** A repeat answered with the earlier call's result (core/repeats.ts collapsedPreamble). */
const COLLAPSED = /^\[effectgate: this \S+ call repeats call /;
const REFUSED = /^EG_(KEY_TOO_LONG|INVALID_INPUT|APPROVAL_DENIED|APPROVAL_EXPIRED|AWAITING_APPROVAL|NOT_GRANTED|KILL_SWITCH|QUOTA_EXCEEDED|BREAKER_OPEN)\b/;

/** The logical call a record's input names, when the input names one (the built-in downstreams' `ref`). */
function refOf(record: CallRecord): string | undefined {
  const input = record.input as { ref?: unknown } | null;
  return typeof input === "object" && input !== null && typeof input.ref === "string" ? input.ref : undefined;
}

export function checkInvariants(seed: number, evidence: Evidence): Violation[] {
  const out: Violation[] = [];
  const fail = (invariant: Invariant, message: string) => out.push({ seed, invariant, message });
  for (const a of evidence.answers) {
    if (a.ownUnansweredClaim === true && !a.ranHere && NEEDS_HUMAN.test(a.content)) {
      fail("I9", `${a.worker} lost the reply of its own claim of ${a.toolUseId} (${a.ref}; it committed, no tool started, nobody had written the record since), then gave the call to a person: "${a.content.slice(0, 160)}"`);
    }
  }
  for (const call of evidence.calls) {
    const { ref, system, tool } = call;
    const effects = system.effects(ref);
    const sends = system.sends(ref);
    const protectedByProbe = tool.probe !== undefined || tool.downstreamIdempotent === true;
    // An id a later turn reused for another call (workload.ts Turns): the one record is the call's whose input it holds.
    const shared = evidence.calls.some((c) => c !== call && c.block.id === call.block.id);
    const held = evidence.records.get(call.block.id);
    const record = held && (!shared || refOf(held) === ref) ? held : undefined;
    const said = evidence.answers.filter((a) => a.ref === ref && a.toolUseId === call.block.id);
    // Re-planned (same logical call under another id): whichever of the two runs first is the call, the other its repeat.
    const replanned = call.turn === undefined && evidence.calls.some((c) => c.turn === "replan" && c.ref === ref);
    const siblingRecorded = replanned && evidence.calls.some((c) => c.turn === "replan" && c.ref === ref && evidence.records.has(c.block.id));
    // A person settled the re-plan "failed" before this call first ran: the re-plan ran first, so this call is its repeat,
    // run again on the person's word (seed 29724; a late reply that proves the person wrong is I8's to judge).
    const firstRun = said.filter((a) => a.ranHere).reduce((at, a) => Math.min(at, a.at), Infinity);
    const replanSettledFailedBefore = replanned && evidence.calls.some((c) => {
      const verdict = c.turn === "replan" && c.ref === ref ? evidence.verdicts?.get(c.block.id) : undefined;
      return verdict?.as === "failed" && verdict.at < firstRun;
    });
    const lastFinal = said.filter((a) => a.phase === "final").at(-1)?.content ?? "";
    // Answered as a repeat of the re-plan, which ran first: refused, or collapsed onto its result (recorded so, seed 45718).
    const answeredAsRepeat = REPEATED.test(lastFinal) || said.some((a) => COLLAPSED.test(a.content));
    const repeatOfReplan = replanned && (replanSettledFailedBefore || answeredAsRepeat || (record
      ? record.state === "failed" // refused as a repeat, or failed before a re-plan ran (the effect counted for both is the re-plan's)
      : siblingRecorded));

    if (call.turn === "replan" || repeatOfReplan) {
      // The logical call's effects are counted here when the first call is the repeat: once, and once more for each time
      // a person said one of its calls failed (wrongly, maybe), which licenses a run again.
      if (repeatOfReplan) {
        const licensed = 1 + evidence.calls.filter((c) => c.ref === ref && evidence.verdicts?.get(c.block.id)?.as === "failed").length;
        if (effects > licensed) fail(protectedByProbe ? "I1" : "I2", `${ref} (${tool.name}) was applied ${effects} times downstream (a re-plan and its repeat; ${licensed - 1} "failed" verdicts)`);
      }
      // The same logical call as the one it re-plans (its effects are counted there): told the one result, or nothing ran.
      if (record && record.state !== "completed" && record.state !== "failed" && record.state !== "needs_human") {
        fail("I3", `${ref}'s ${call.turn === "replan" ? "re-plan" : "call"} ${call.block.id} ended ${record.state} (owner ${record.owner ?? "none"})`);
      }
      for (const a of said) {
        if (a.ranHere && NOTHING_RAN.test(a.content)) fail("I4", `${a.worker} told the agent "${a.content.slice(0, 200)}" for ${a.toolUseId} after it had started the tool`);
      }
      const real = system.resultOf(ref);
      // A person who said the call failed (wrongly, maybe) let its re-plan run: that run's result is the answer then.
      const personSaidFailed = evidence.calls.some((c) => c.ref === ref && evidence.verdicts?.get(c.block.id)?.as === "failed");
      // A person who said it completed (wrongly, maybe) wrote the result the ledger holds: a repeat told that result relays the verdict.
      const personRecorded = evidence.calls.flatMap((c) => {
        const settled = evidence.verdicts?.get(c.block.id)?.as === "completed" ? evidence.records.get(c.block.id) : undefined;
        return c.ref === ref && settled?.state === "completed" ? [renderResult(settled.result)] : [];
      });
      const told = (a: Answer, result: string) => a.content.includes(result);
      const wrong = personSaidFailed ? undefined : said.find((a) => !a.isError &&
        (real === undefined || !told(a, renderResult(real as Json))) && !personRecorded.some((result) => told(a, result)));
      if (wrong) fail("I5", `${wrong.worker} answered ${call.turn === "replan" ? "the re-plan " : ""}${wrong.toolUseId} of ${ref} with ${wrong.content.slice(0, 160)}, not the one result the downstream produced (${real === undefined ? "none" : renderResult(real as Json).slice(0, 120)})`);
      continue;
    }

    if (protectedByProbe && effects > 1) fail("I1", `${ref} (${tool.name}) was applied ${effects} times downstream`);
    if (!protectedByProbe && effects > 1) fail("I2", `${ref} (${tool.name}, no probe) was applied ${effects} times downstream`);
    if (!protectedByProbe && system.sentAfterApplied?.(ref) === true) {
      fail("I2", `${ref} (${tool.name}, no probe) was sent again after a send that applied (${sends} sends)`);
    }

    const verdict = record ? evidence.verdicts?.get(record.key) : undefined;
    if (verdict && record) {
      // I8: the real reply came after the person's verdict and says otherwise: a finding must say so.
      const late = (evidence.lateSuccesses ?? []).find((l) => l.key === record.key && l.at > verdict.at &&
        (record.state === "failed" || (record.state === "completed" && renderResult(l.result as Json) !== renderResult(record.result))));
      if (late && !(evidence.flagged?.has(record.key) ?? false)) {
        fail("I8", `${ref} was settled by a person as ${record.state}; its real reply ${renderResult(late.result as Json).slice(0, 120)} reached the gate after, and no finding or alert says so`);
      }
    }

    const last = said.filter((a) => a.phase === "final").at(-1);
    if (!record) {
      // Never claimed is an end only when a person or the policy refused it (or its id was another call's) and nothing reached the downstream.
      // An id another call took over after this one failed (nothing applied): only nothing downstream is asked of it.
      const ended = last && ((REFUSED.test(last.content) && sends === 0) || (shared && /^EG_KEY_MISMATCH\b/.test(last.content) && effects === 0));
      if (!ended) {
        fail("I3", `${ref} (${call.block.id}) has no record after the schedule settled (last answer: ${last?.content.slice(0, 120) ?? "none"}; ${sends} sends)`);
      }
    } else if (record.state !== "completed" && record.state !== "failed" && record.state !== "needs_human") {
      fail("I3", `${ref} ended ${record.state} (owner ${record.owner ?? "none"}), not completed, failed or with a person`);
    } else if (record.state === "completed" && effects === 0 && verdict?.as !== "completed") {
      fail("I3", `${ref} is recorded completed but its effect never happened downstream (${sends} sends)`);
    }

    if (record?.state === "failed" && effects > 0 && verdict?.as !== "failed") fail("I4", `${ref} is recorded failed (${record.error ?? ""}) but its effect happened ${effects} time(s)`);
    for (const a of said) {
      if (verdict && a.at >= verdict.at) continue; // the person's verdict, relayed
      if (a.ranHere && NOTHING_RAN.test(a.content)) {
        fail("I4", `${a.worker} told the agent "${a.content.slice(0, 200)}" for ${a.toolUseId} after it had started the tool`);
      } else if ((a.effectsBefore ?? 0) > 0 && NOTHING_RAN.test(a.content)) {
        // Judged across workers: whoever answers, the downstream had already applied this call.
        fail("I4", `${a.worker} told the agent "${a.content.slice(0, 200)}" for ${a.toolUseId}, whose effect had already happened downstream`);
      }
    }

    const real = system.resultOf(ref);
    // A call a person settled: a success the gate saw itself (before the verdict, or a late reply after it, which leaves a
    // finding: I8) is the downstream's real result; any other is the person's recorded one.
    const before = verdict ? said.filter((a) => !a.isError && real !== undefined && a.content === renderResult(real as Json)) : [];
    const successes = said.filter((a) => !a.isError && !before.includes(a));
    if (successes.length > 0 && record?.state === "needs_human") {
      // The worker that got the reply answered, then died before its write landed: the ledger
      // never learnt it, and a person settles the call. That answer must still be the real one.
      for (const a of successes) {
        if (real === undefined || a.content !== renderResult(real as Json)) {
          fail("I5", `${a.worker} answered ${a.toolUseId} with ${a.content.slice(0, 120)}, which the downstream never produced; its record waits for a person`);
          break;
        }
      }
    } else if (successes.length > 0) {
      const expected = record?.state === "completed" ? renderResult(record.result) : undefined;
      for (const a of successes) {
        if (expected === undefined) {
          fail("I5", shared && held && !record
            ? `${a.worker} answered ${a.toolUseId} (${ref}) with ${a.content.slice(0, 120)}: the result of another call under the same id (${refOf(held) ?? held.key})`
            : `${a.worker} answered ${a.toolUseId} with a result, but its record is ${record?.state ?? "missing"}`);
          break;
        }
        if (a.content !== expected) {
          fail("I5", `${a.worker} answered ${a.toolUseId} with ${a.content.slice(0, 120)}, not the recorded ${expected.slice(0, 120)}`);
          break;
        }
      }
      if (expected !== undefined && real !== undefined && verdict?.as !== "completed" && expected !== renderResult(real as Json)) {
        fail("I5", `${ref}'s recorded result ${expected.slice(0, 120)} is not what the downstream produced: ${renderResult(real as Json).slice(0, 120)}`);
      }
    }
  }
  return out;
}
