/**
 * The ground truth of one level's run: what the downstream services actually applied, held
 * against what the workload intended. Definitions (docs/demo.md says the same):
 *
 * - duplicates: effects beyond the first for one business reference, summed (every service,
 *   compensations included).
 * - lost: required calls (a task's intended effects; an order whose shipment is planned to fail
 *   requires none) with no effect applied with the intended parameters, not counting calls the
 *   agent was told are waiting for a person or another worker. A call the agent was told is done
 *   whose effect is missing is therefore lost too.
 * - halfDone: orders (reserve → charge → ship) that end with some but not all of reservation,
 *   charge and shipment in place (each net of its undo).
 * - wrongParams: effects applied with parameters the workload never intended (hallucinations that
 *   got through).
 * - overQuota: destructive effects (draft deletions) beyond DESTRUCTIVE_QUOTA_PER_TASK in one task.
 * - discrepanciesPresent: business references where the agent's record and what the downstream
 *   holds at the end disagree: more than one effect; told done but no effect (never applied, or
 *   removed since by drift); an effect although the agent was told it failed or was refused (and
 *   no compensation undid it); or
 *   told done for parameters other than those applied. Calls the agent was told are waiting for a
 *   person are not counted (nobody claims to know).
 *
 * Overheads come from the outcome logs (time, not beliefs).
 */
import type { CallOutcome } from "./agent.js";
import type { Effect } from "./services.js";
import { percentile } from "./timing.js";
import { allSteps, DESTRUCTIVE_QUOTA_PER_TASK, undoRef, type Step, type Workload } from "./workload.js";
import { canonicalJson } from "../text.js";

export interface GroundTruth {
  readonly duplicates: number;
  readonly lost: number;
  /** Effect calls the agent was told are done whose input no downstream applied (a required one is also in `lost`). */
  readonly toldDoneNotApplied: number;
  readonly halfDone: number;
  readonly wrongParams: number;
  readonly overQuota: number;
  readonly discrepanciesPresent: number;
  /** Effects the downstreams applied, in all. */
  readonly effects: number;
  /** tool_use blocks answered (redeliveries and resumes count again). */
  readonly calls: number;
  readonly overheadMs: { readonly median: number | null; readonly p99: number | null };
  /** The business references behind some of the counts (for EFFECTGATE_DEMO_KEEP=1 and debugging). */
  readonly refs: { readonly duplicated: readonly string[]; readonly lost: readonly string[]; readonly discrepant: readonly string[] };
}

export function groundTruth(workload: Workload, effects: readonly Effect[], outcomes: readonly CallOutcome[]): GroundTruth {
  const byRef = new Map<string, Effect[]>();
  for (const e of effects) byRef.set(e.ref, [...(byRef.get(e.ref) ?? []), e]);
  const count = (ref: string) => byRef.get(ref)?.length ?? 0;

  // The last answer each agent loop got for each call.
  const finalBelief = new Map<string, CallOutcome>();
  for (const o of outcomes) finalBelief.set(`${o.loop}\u0000${o.id}`, o);
  const beliefsByRef = new Map<string, CallOutcome[]>();
  for (const o of finalBelief.values()) if (o.ref !== "") beliefsByRef.set(o.ref, [...(beliefsByRef.get(o.ref) ?? []), o]);

  let duplicates = 0;
  for (const list of byRef.values()) duplicates += Math.max(0, list.length - 1);

  const steps = new Map<string, Step>();
  for (const task of workload.tasks) for (const step of allSteps(task)) steps.set(step.ref, step);
  const intended = (step: Step) => canonicalJson(step.input);

  let lost = 0;
  const lostRefs: string[] = [];
  let wrongParams = 0;
  for (const task of workload.tasks) {
    const excused = task.kind === "order" && task.shipFails;
    for (const step of allSteps(task)) {
      const applied = byRef.get(step.ref) ?? [];
      wrongParams += applied.filter((e) => e.body !== intended(step)).length;
      if (!step.required || excused) continue;
      if (applied.some((e) => e.body === intended(step))) continue;
      const beliefs = beliefsByRef.get(step.ref) ?? [];
      if (beliefs.some((b) => b.belief === "unknown")) continue; // someone has it
      lost++;
      lostRefs.push(step.ref);
    }
  }
  // Calls (tool_use ids) the agent was told are done although their input was never applied.
  const phantom = new Set<string>();
  for (const o of finalBelief.values()) {
    if (o.belief === "done" && steps.has(o.ref) && !(byRef.get(o.ref) ?? []).some((e) => e.body === o.input)) phantom.add(o.id);
  }
  const toldDoneNotApplied = phantom.size;

  let halfDone = 0;
  let overQuota = 0;
  for (const task of workload.tasks) {
    if (task.kind === "order") {
      const net = (ref: string) => count(ref) - count(undoRef(ref)) > 0;
      const parts = [net(`${task.id}/reserve`), net(`${task.id}/charge`), count(`${task.id}/ship`) > 0];
      if (parts.some(Boolean) && !parts.every(Boolean)) halfDone++;
    }
    const destructive = effects.filter((e) => e.collection === "drafts" && e.ref.startsWith(`${task.id}/`)).length;
    overQuota += Math.max(0, destructive - DESTRUCTIVE_QUOTA_PER_TASK);
  }

  let discrepanciesPresent = 0;
  const discrepant: string[] = [];
  for (const ref of new Set([...steps.keys()].filter((r) => byRef.has(r) || beliefsByRef.has(r)))) {
    // What the downstream holds now: drift may have removed an effect since.
    const applied = (byRef.get(ref) ?? []).filter((e) => e.voided !== true);
    const beliefs = beliefsByRef.get(ref) ?? [];
    const done = beliefs.filter((b) => b.belief === "done");
    // An effect its saga undid (refund, release) agrees with an agent told the workflow failed.
    const undone = applied.length > 0 && count(undoRef(ref)) >= applied.length;
    const disagree =
      applied.length > 1 ||
      (done.length > 0 && applied.length === 0) ||
      (applied.length > 0 && !undone && done.length === 0 && !beliefs.some((b) => b.belief === "unknown")) ||
      (applied.length > 0 && done.some((b) => !applied.some((e) => e.body === b.input)));
    if (disagree) {
      discrepanciesPresent++;
      discrepant.push(ref);
    }
  }

  const overheads = outcomes.map((o) => Math.max(0, o.totalMs - o.downstreamMs));
  return {
    duplicates, lost, toldDoneNotApplied, halfDone, wrongParams, overQuota, discrepanciesPresent,
    effects: effects.length,
    calls: outcomes.length,
    overheadMs: { median: percentile(overheads, 50), p99: percentile(overheads, 99) },
    refs: { duplicated: [...byRef].filter(([, list]) => list.length > 1).map(([ref]) => ref), lost: lostRefs, discrepant },
  };
}
