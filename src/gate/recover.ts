/**
 * `gate.recover()`: after a crash, settle what dead or vanished workers left `in_progress`
 * or `uncertain`, by the same rules a replay uses (see resolve.ts).
 */
import { validate } from "../core/standard-schema.js";
import { messageOf } from "../core/errors.js";
import type { CallRecord } from "../contracts/calls.js";
import { isStaleHolder } from "./holder.js";
import { executeHeld, NEVER_STARTED } from "./execute.js";
import { ownUnansweredClaim } from "./known.js";
import { flushKept } from "./record.js";
import { resolveStale, type Resolution } from "./resolve.js";
import { inflightId, singleFlight, type Runtime } from "./runtime.js";

export interface CallRecoverySummary {
  /** Unsettled records looked at. */
  readonly examined: number;
  /** Probed "done": completed with the probed result, nothing re-run. */
  readonly completed: number;
  /** Re-run with the same key (read tools, or the probe said "absent"). */
  readonly reexecuted: number;
  /** Sent to a person: no probe, so the outcome cannot be known. */
  readonly needsHuman: number;
  /** Left for later: still running downstream, probe failed, holder still alive, or input redacted. */
  readonly leftForLater: number;
  /** One line per record not settled, saying why. */
  readonly notes: readonly { readonly tenant: string; readonly key: string; readonly tool: string; readonly note: string }[];
}

export async function recover(rt: Runtime, options: { limit?: number } = {}): Promise<CallRecoverySummary> {
  const records = await rt.calls.listUnsettled({ includeLive: true, limit: options.limit ?? 1000 });
  const counts = { completed: 0, reexecuted: 0, needsHuman: 0, leftForLater: 0 };
  const notes: { tenant: string; key: string; tool: string; note: string }[] = [];
  const note = (r: CallRecord, text: string) => {
    counts.leftForLater++;
    notes.push({ tenant: r.tenant, key: r.key, tool: r.tool, note: text });
  };
  for (const record of records) {
    const tool = rt.tools.get(record.tool);
    if (!tool) {
      note(record, `no tool named ${record.tool} was given to this gate`);
      continue;
    }
    if (rt.inflight.has(inflightId(record))) {
      note(record, "this gate is working on it right now");
      continue;
    }
    if (rt.known.get(inflightId(record))?.kind === "outcome") {
      // The outcome is known here and its write is being retried: write it now if the store takes it.
      await flushKept(rt, record.tenant, record.key);
      if (rt.known.has(inflightId(record))) note(record, "its outcome is known to this gate, which keeps writing it (the ledger does not take it yet)");
      else counts.completed++;
      continue;
    }
    if (!isStaleHolder(rt, record, await rt.calls.now())) {
      note(record, `held by a live worker (${record.owner ?? "unknown"}) until its lease ends`);
      continue;
    }
    let input: unknown;
    if (!record.inputRedacted) {
      const checked = await validate(tool.input, record.input);
      if (!checked.ok) {
        note(record, `stored input no longer matches the tool's schema: ${checked.issues.join("; ")}`);
        continue;
      }
      input = checked.value;
    }
    let resolution: Resolution;
    try {
      const call = { tool, input, hasInput: !record.inputRedacted, scope: { tenant: record.tenant, task: record.task }, toolUseId: record.toolUseId };
      ({ resolution } = await singleFlight(rt, record.tenant, record.key, async () => {
        // A claim of this gate whose reply was lost, unchanged: its tool never started, so it runs now, once.
        const own = await ownUnansweredClaim(rt, record.tenant, record.key);
        if (own) {
          await executeHeld(rt, call, own.record, own.confirmedAt, NEVER_STARTED);
          return { resolution: "reexecuted" as const };
        }
        return resolveStale(rt, call, record, { probeRounds: 1 });
      }));
    } catch (err) {
      note(record, `could not be resolved: ${messageOf(err)}`);
      continue;
    }
    switch (resolution) {
      case "probed_done": counts.completed++; break;
      case "reexecuted": counts.reexecuted++; break;
      case "needs_human": counts.needsHuman++; break;
      case "moved": note(record, "another worker settled it meanwhile"); break;
      case "absent_failed": note(record, "its probe found no effect; recorded failed, nothing re-run"); break;
      case "probed_unknown": note(record, `left uncertain: ${(await rt.calls.get(record.tenant, record.key))?.error ?? "no answer"}`); break;
      case "deferred": note(record, "its stored input is redacted; replay the tool_use to finish it"); break;
    }
  }
  return { examined: records.length, ...counts, notes };
}
