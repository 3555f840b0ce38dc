/**
 * Writing a held call's record after its tool started. Such a write may fail (the store is busy
 * or unreachable) or lose its reply (committed, but the answer never came back); neither may turn
 * into a false answer. So a write:
 * - reads back on a compare-and-set miss, and counts a record that already shows this write (its
 *   own commit, whose reply was lost) as written;
 * - when it fails and carries the agent's answer (`block`), keeps the outcome in memory (known.ts),
 *   raises one operator alert, and writes it again in the background (gate.drain() waits), so a
 *   replay in this process is answered with the true result meanwhile.
 */
import { isDeepStrictEqual } from "node:util";
import { reasonAfterStart } from "../core/errors.js";
import { sleepUnless } from "../core/time.js";
import { renderResult, type ToolResultBlock } from "../core/blocks.js";
import type { CallRecord, RecordUpdate } from "../contracts/calls.js";
import { contradicts, reportContradiction } from "./contradiction.js";
import { markWritten } from "./known.js";
import { inflightId, type Runtime } from "./runtime.js";

export type Written =
  | { readonly kind: "written"; readonly record: CallRecord }
  /** Another worker moved the record first (it took the call over). */
  | { readonly kind: "lost" }
  /** The store did not take the write; `kept`: the outcome is held in memory and being written again. */
  | { readonly kind: "failed"; readonly reason: string; readonly kept: boolean };

export interface WriteOptions {
  /** The answer the agent gets for this outcome: kept (and written again) if the write fails. */
  readonly block?: ToolResultBlock;
  /** false: do not keep or retry (a write whose failure the caller handles itself). */
  readonly keep?: boolean;
}

const RETRY_FIRST_MS = 50;
const RETRY_MAX_MS = 5_000;
const RETRIES = 40;

export async function record(rt: Runtime, held: CallRecord, update: RecordUpdate, options: WriteOptions = {}): Promise<Written> {
  try {
    return await writeOnce(rt, held, update);
  } catch (err) {
    const reason = reasonAfterStart(err);
    if (options.keep === false || options.block === undefined) return { kind: "failed", reason, kept: false };
    keep(rt, held, update, options.block, err);
    return { kind: "failed", reason, kept: true };
  }
}

/** One compare-and-set write; a miss whose record already shows this very write counts as written (a lost reply). */
async function writeOnce(rt: Runtime, held: CallRecord, update: RecordUpdate): Promise<Written> {
  const written = await rt.calls.update(held.tenant, held.key, held.version, update);
  if (written) return wrote(rt, written);
  const current = await rt.calls.get(held.tenant, held.key);
  if (current && shows(current, held, update)) return wrote(rt, current);
  // Another worker took the call over while this one ran it, and, unable to tell what happened,
  // gave it to a person. This worker knows: its run is the only one (no start since), so its
  // definite outcome settles the call, as a late reply does, instead of asking a person.
  if (current?.state === "needs_human" && current.attempts === held.attempts && (update.state === "completed" || update.state === "failed")) {
    const settled = await rt.calls.update(held.tenant, held.key, current.version, {
      ...update, owner: null,
      ...(update.state === "completed" ? { error: "completed: the worker that ran it got the reply after another worker had taken the call over" } : {}),
    });
    if (settled) return wrote(rt, settled);
  }
  return { kind: "lost" };
}

function wrote(rt: Runtime, written: CallRecord): Written {
  markWritten(rt, written);
  return { kind: "written", record: written };
}

function shows(current: CallRecord, held: CallRecord, update: RecordUpdate): boolean {
  return current.version === held.version + 1 && current.state === update.state &&
    (update.result === undefined || isDeepStrictEqual(current.result, update.result)) &&
    (update.error === undefined || current.error === update.error) &&
    (update.owner === undefined || current.owner === update.owner);
}

/**
 * The background writes stop (all retries spent, or the gate closed): the outcome stays known to
 * this process (a replay here still gets it) and to this alert, which carries it, but the ledger
 * does not show it: other workers will probe the call, or a person will settle it.
 */
function gaveUp(rt: Runtime, held: CallRecord, update: RecordUpdate, why: string): void {
  const outcome = update.state === "completed" ? `completed with ${renderResult(update.result ?? null).slice(0, 500)}` : update.state;
  rt.alert({
    code: "record_gave_up",
    message: `${held.tool} call ${held.key} ${outcome}, but effectgate stopped trying to record it (${why}). ` +
      "The ledger still shows it unsettled: its probe will be asked, or a person must settle it with this outcome",
    tenant: held.tenant, key: held.key, tool: held.tool,
  });
}

/** The gate closes: every outcome still kept here stops being written, each with its alert. */
export function giveUpKept(rt: Runtime, why: string): void {
  for (const [id, known] of rt.known) {
    if (known.kind !== "outcome") continue;
    rt.known.delete(id);
    gaveUp(rt, known.record, known.update, why);
  }
}

function keep(rt: Runtime, held: CallRecord, update: RecordUpdate, block: ToolResultBlock, err: unknown): void {
  const id = inflightId(held);
  rt.known.set(id, { kind: "outcome", record: held, update, block });
  rt.alert({
    code: "record_failed",
    message: `${held.tool} call ${held.key} ${update.state === "completed" ? "completed but its result" : `ran, but its outcome (${update.state})`} could not be recorded: ${reasonAfterStart(err)}. ` +
      `The agent got the true answer; effectgate keeps writing it, and a replay here is answered from memory meanwhile`,
    tenant: held.tenant, key: held.key, tool: held.tool, cause: err,
  });
  const retrying = (async () => {
    for (let n = 0, pause = RETRY_FIRST_MS; n < RETRIES && rt.known.get(id)?.kind === "outcome"; n++, pause = Math.min(pause * 2, RETRY_MAX_MS)) {
      await sleepUnless(rt.time, pause, rt.closing.promise, { background: true });
      // Closed: close() has raised the alert for what is still kept.
      if (rt.known.get(id)?.kind !== "outcome" || rt.closing.closed) return;
      try {
        // Keep the lease meanwhile, so no other worker takes a call whose outcome is known here.
        if (update.owner === null || update.owner === undefined) await rt.calls.renewLease(held.tenant, held.key, held.version, rt.owner, rt.leaseMs).catch(() => false);
        const done = await writeOnce(rt, held, update);
        rt.known.delete(id);
        if (done.kind === "lost") {
          const current = await rt.calls.get(held.tenant, held.key).catch(() => undefined);
          if (current && update.state === "completed" && update.result !== undefined && contradicts(current, update.result)) {
            await reportContradiction(rt, current, update.result, "the outcome this worker kept while its ledger was failing");
          }
          rt.alert({
            code: "record_lost_race",
            message: `${held.tool} call ${held.key}: another worker took it over before its outcome (${update.state}) could be recorded; check what that worker recorded`,
            tenant: held.tenant, key: held.key, tool: held.tool,
          });
        }
        return;
      } catch {
        // Still failing: try again after a longer pause.
      }
    }
    if (rt.known.get(id)?.kind === "outcome" && !rt.closing.closed) gaveUp(rt, held, update, `${RETRIES} writes failed`);
  })();
  rt.background.add(retrying);
  void retrying.finally(() => rt.background.delete(retrying));
}

/**
 * A replay of a call whose outcome is kept here: write it now if the store takes it, and answer
 * with it either way. `record` is the call the outcome belongs to: the caller checks that the
 * replay is that call (fingerprint and tool) before answering with `block`.
 */
export async function flushKept(rt: Runtime, tenant: string, key: string): Promise<{ readonly block: ToolResultBlock; readonly record: CallRecord } | undefined> {
  const id = inflightId({ tenant, key });
  const known = rt.known.get(id);
  if (known?.kind !== "outcome") return undefined;
  try {
    await writeOnce(rt, known.record, known.update);
    // Written, or another worker moved the record meanwhile: the ledger answers the next replay.
    rt.known.delete(id);
  } catch {
    // The background writer keeps trying.
  }
  return { block: known.block, record: known.record };
}
