/**
 * What a gate knows of its own calls that its ledger may not show: a claim whose reply was lost
 * (the INSERT may have committed, the tool certainly did not start), and an outcome the gate has
 * but could not record (the write failed after the tool ran). Both are in memory only: they make a
 * replay in this process truthful (the real result, or the claim run once) instead of probing its
 * own call as if a stranger's; once the process is gone, other workers settle the call by its lease
 * and probe, as for any crash.
 */
import type { CallRecord } from "../contracts/calls.js";
import { inflightId, type Runtime } from "./runtime.js";

/** Whether `record` is exactly what an unanswered claim of this gate (or its unanswered take-over of it, at one of `versions`) would have written. */
export function isOwnUnstartedClaim(record: CallRecord, owner: string, versions: readonly number[] = [1]): boolean {
  return record.owner === owner && record.state === "in_progress" && versions.includes(record.version) && record.attempts === 1;
}

/**
 * How many started-but-unwritten calls a gate remembers. Each is a run that ended without this
 * gate writing its record (a lost lease, failed writes): rare, so the bound is only a backstop; past
 * it the oldest is forgotten, and a lost claim reply on that very key would then be taken as unstarted.
 */
const STARTED_UNWRITTEN_MAX = 10_000;

/** The tool of `record` starts now under this gate's claim, which nobody has written since. */
export function markStarted(rt: Runtime, record: CallRecord): void {
  const id = inflightId(record);
  rt.startedUnwritten.delete(id);
  rt.startedUnwritten.add(id);
  if (rt.startedUnwritten.size > STARTED_UNWRITTEN_MAX) rt.startedUnwritten.delete(rt.startedUnwritten.values().next().value as string);
}

/** This gate wrote the record of a call it started: it no longer looks like an unstarted claim, nothing to remember. */
export function markWritten(rt: Runtime, record: CallRecord): void {
  rt.startedUnwritten.delete(inflightId(record));
}

/**
 * A claim of this gate whose reply was lost: if its record is there, unchanged since the claim,
 * the tool never started, so this gate takes it back (a fresh lease and fence) to run it, once.
 */
export async function ownUnansweredClaim(rt: Runtime, tenant: string, key: string): Promise<{ record: CallRecord; confirmedAt: number } | undefined> {
  const id = inflightId({ tenant, key });
  const known = rt.known.get(id);
  if (known?.kind !== "claim_unanswered") return undefined;
  const record = await rt.calls.get(tenant, key);
  // Its tool ran under the claim (this very record), and the lost reply was a later claim's, which found it.
  if (!record || !isOwnUnstartedClaim(record, rt.owner, known.versions) || rt.startedUnwritten.has(id)) {
    rt.known.delete(id);
    return undefined;
  }
  const confirmedAt = rt.time.monotonic();
  let taken: CallRecord | undefined;
  try {
    taken = await rt.calls.takeOver({ tenant, key, version: record.version, owner: rt.owner, leaseMs: rt.leaseMs, holderIsDead: true });
  } catch (err) {
    // Forgotten only once the take-over has an answer: one that failed (the ledger unreachable) leaves the claim this
    // gate's own and unstarted, at its version or, had the take-over committed unanswered, the next (seed 24736).
    rt.known.set(id, { kind: "claim_unanswered", versions: [record.version, record.version + 1] });
    throw err;
  }
  rt.known.delete(id);
  return taken && { record: taken, confirmedAt };
}

