/**
 * Whose call is it? A call in a held state (in_progress, uncertain) has a holder working on it;
 * another worker waits for it, and takes the call over only once the holder is gone.
 */
import { isHeld } from "../core/states.js";
import { sleepOn } from "../core/time.js";
import type { CallRecord } from "../contracts/calls.js";
import { leaseRanOut } from "../contracts/call-rules.js";
import { isHolderDead } from "./owner.js";
import type { Runtime } from "./runtime.js";

/** Whether the call's holder is gone, so this gate may take the call over. */
export function isStaleHolder(rt: Runtime, record: CallRecord, now: number): boolean {
  if (!isHeld(record.state)) return false;
  if (leaseRanOut(record, now)) return true;
  // The caller holds this key's single flight, so a record held by this gate is not being
  // worked on by it: a run whose outcome could not be recorded.
  if (record.owner === rt.owner) return true;
  return isHolderDead(record.owner);
}

export type Waited =
  /** Not held (any more): settled, or waiting for a person. */
  | { readonly kind: "free"; readonly record: CallRecord }
  /** Held by a holder that is gone: the caller may take it over. */
  | { readonly kind: "stale"; readonly record: CallRecord }
  /** Still held by a live holder when the wait ran out. */
  | { readonly kind: "live"; readonly record: CallRecord }
  /** The record is not there (never claimed, or removed). */
  | { readonly kind: "gone" };

/** Waits, polling with backoff until `deadline` (rt.time.monotonic() ms), while a live holder has the call. */
export async function waitForHolder(rt: Runtime, first: CallRecord, deadline: number): Promise<Waited> {
  let record = first;
  for (let pause = 2; ; pause = Math.min(pause * 2, 250)) {
    if (!isHeld(record.state)) return { kind: "free", record };
    if (isStaleHolder(rt, record, await rt.calls.now())) return { kind: "stale", record };
    if (rt.time.monotonic() >= deadline) return { kind: "live", record };
    await sleepOn(rt.time, pause);
    const again = await rt.calls.get(record.tenant, record.key);
    if (!again) return { kind: "gone" };
    record = again;
  }
}
