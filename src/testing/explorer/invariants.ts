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
 * - I6: a stale holder never overwrites a newer holder's record (watched in ledger.ts).
 */
import { renderResult } from "../../core/blocks.js";
import type { Json } from "../../core/json.js";
import type { AnyTool } from "../../core/tool.js";
import type { CallRecord } from "../../contracts/calls.js";
import type { SimulatedSystem } from "./downstream.js";

export type Invariant = "I1" | "I2" | "I3" | "I4" | "I5" | "I6";

export const INVARIANTS: readonly Invariant[] = ["I1", "I2", "I3", "I4", "I5", "I6"];

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
  /** Whether the answering worker had started the tool for this call before answering. */
  readonly ranHere: boolean;
}

export interface Evidence {
  readonly calls: readonly { readonly ref: string; readonly block: { readonly id: string }; readonly system: SimulatedSystem; readonly tool: AnyTool }[];
  readonly answers: readonly Answer[];
  /** The final record of each call, by key (the tool_use id). */
  readonly records: ReadonlyMap<string, CallRecord>;
}

const NOTHING_RAN = /nothing was executed/i;
/** Answers that end a call before it was ever claimed: a person (or the policy) refused it. */
const REFUSED = /^EG_(APPROVAL_DENIED|APPROVAL_EXPIRED|AWAITING_APPROVAL|NOT_GRANTED|KILL_SWITCH|QUOTA_EXCEEDED|BREAKER_OPEN)\b/;

export function checkInvariants(seed: number, evidence: Evidence): Violation[] {
  const out: Violation[] = [];
  const fail = (invariant: Invariant, message: string) => out.push({ seed, invariant, message });
  for (const call of evidence.calls) {
    const { ref, system, tool } = call;
    const effects = system.effects(ref);
    const sends = system.sends(ref);
    const protectedByProbe = tool.probe !== undefined || tool.downstreamIdempotent === true;
    const record = evidence.records.get(call.block.id);
    const said = evidence.answers.filter((a) => a.ref === ref);

    if (protectedByProbe && effects > 1) fail("I1", `${ref} (${tool.name}) was applied ${effects} times downstream`);
    if (!protectedByProbe && effects > 1) fail("I2", `${ref} (${tool.name}, no probe) was applied ${effects} times downstream`);
    if (!protectedByProbe && system.sentAfterApplied?.(ref) === true) {
      fail("I2", `${ref} (${tool.name}, no probe) was sent again after a send that applied (${sends} sends)`);
    }

    const last = said.filter((a) => a.phase === "final").at(-1);
    if (!record) {
      // Never claimed is an end only when a person or the policy refused it and nothing reached the downstream.
      if (!(last && REFUSED.test(last.content) && sends === 0)) {
        fail("I3", `${ref} (${call.block.id}) has no record after the schedule settled (last answer: ${last?.content.slice(0, 120) ?? "none"}; ${sends} sends)`);
      }
    } else if (record.state !== "completed" && record.state !== "failed" && record.state !== "needs_human") {
      fail("I3", `${ref} ended ${record.state} (owner ${record.owner ?? "none"}), not completed, failed or with a person`);
    } else if (record.state === "completed" && effects === 0) {
      fail("I3", `${ref} is recorded completed but its effect never happened downstream (${sends} sends)`);
    }

    if (record?.state === "failed" && effects > 0) fail("I4", `${ref} is recorded failed (${record.error ?? ""}) but its effect happened ${effects} time(s)`);
    for (const a of said) {
      if (a.ranHere && NOTHING_RAN.test(a.content)) {
        fail("I4", `${a.worker} told the agent "${a.content.slice(0, 200)}" for ${a.toolUseId} after it had started the tool`);
      }
    }

    const successes = said.filter((a) => !a.isError);
    const real = system.resultOf(ref);
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
          fail("I5", `${a.worker} answered ${a.toolUseId} with a result, but its record is ${record?.state ?? "missing"}`);
          break;
        }
        if (a.content !== expected) {
          fail("I5", `${a.worker} answered ${a.toolUseId} with ${a.content.slice(0, 120)}, not the recorded ${expected.slice(0, 120)}`);
          break;
        }
      }
      if (expected !== undefined && real !== undefined && expected !== renderResult(real as Json)) {
        fail("I5", `${ref}'s recorded result ${expected.slice(0, 120)} is not what the downstream produced: ${renderResult(real as Json).slice(0, 120)}`);
      }
    }
  }
  return out;
}
