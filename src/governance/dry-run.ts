/**
 * Dry runs: what a call would do, computed by the tool's `dryRun` hook and committing
 * nothing. Every destructive tool must have one (defineTool refuses it otherwise); the preview
 * goes into the approval request so the approver sees the effect, not just the arguments.
 */
import { messageOf } from "../core/errors.js";
import type { Json } from "../core/json.js";
import type { DryRunPreview } from "../core/hooks.js";

const EFFECT = /^would_[a-z0-9_]+$/;

/** The preview, or what is wrong with its shape. */
export function checkPreview(value: unknown): { ok: true; preview: DryRunPreview } | { ok: false; problem: string } {
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    return { ok: false, problem: `it returned ${value === null ? "null" : Array.isArray(value) ? "an array" : typeof value}, not { effect, would_affect, reversible }` };
  }
  const v = value as Record<string, unknown>;
  if (typeof v.effect !== "string" || !EFFECT.test(v.effect)) {
    return { ok: false, problem: `effect must be a string such as "would_delete" or "would_charge" (would_ + lower-case words), got ${JSON.stringify(v.effect)}` };
  }
  if (typeof v.would_affect !== "object" || v.would_affect === null || Array.isArray(v.would_affect)) {
    return { ok: false, problem: "would_affect must be an object describing what the call would touch (e.g. { \"account\": \"acc_1\" })" };
  }
  if (typeof v.reversible !== "boolean") return { ok: false, problem: "reversible must be true or false" };
  let wouldAffect: { [key: string]: Json };
  try {
    wouldAffect = JSON.parse(JSON.stringify(v.would_affect)) as { [key: string]: Json };
  } catch (err) {
    return { ok: false, problem: `would_affect is not JSON: ${messageOf(err)}` };
  }
  return { ok: true, preview: { effect: v.effect, would_affect: wouldAffect, reversible: v.reversible } };
}

/** "would_delete {"account":"acc_1"} (irreversible)" */
export function describePreview(preview: DryRunPreview): string {
  return `${preview.effect} ${JSON.stringify(preview.would_affect)} (${preview.reversible ? "reversible" : "irreversible"})`;
}
