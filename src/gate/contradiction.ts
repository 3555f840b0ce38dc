/**
 * A reply that arrives after its call was settled (by a person, most often: "it failed") and says
 * otherwise. The record keeps the verdict it was given — a person's decision is not overwritten by
 * the machine — but the contradiction is never dropped: it becomes a finding on the call (the
 * human queue shows it beside the call) and an operator alert, so someone looks again.
 */
import { isDeepStrictEqual } from "node:util";
import { messageOf } from "../core/errors.js";
import { renderResult } from "../core/blocks.js";
import type { Json } from "../core/json.js";
import type { CallRecord } from "../contracts/calls.js";
import { findingId } from "../contracts/finding-rules.js";
import type { FindingReport } from "../contracts/findings.js";
import type { Runtime } from "./runtime.js";

/** Whether a reply saying the call completed with `result` contradicts `record` as it stands. */
export function contradicts(record: CallRecord, result: Json): boolean {
  if (record.state === "completed") return !isDeepStrictEqual(record.result, result);
  // A call still being worked on is settled by the reply, not contradicted; a compensated one did complete.
  return record.state === "failed";
}

/** Records the contradiction as a finding (when the ledger keeps findings) and raises an alert. Never throws. */
export async function reportContradiction(rt: Runtime, record: CallRecord, result: Json, how: string): Promise<void> {
  const said = clip(renderResult(result));
  const was = record.state === "completed" ? `completed with ${clip(renderResult(record.result))}` : record.state;
  const summary = `${how} says this ${record.tool} call completed (${said}), but it was settled as ${was}${record.error ? ` (${record.error})` : ""}`;
  const kind = record.state === "completed" ? "mismatch" : "orphan_downstream";
  const report: FindingReport = {
    id: findingId(kind, record.tool, record.tenant, record.key, { lateReply: result, settledAs: record.state }),
    kind, tool: record.tool, tenant: record.tenant, key: record.key, summary,
    ledger: { state: record.state, input: record.input, result: record.result, error: record.error, updatedAt: record.updatedAt },
    downstream: [{ ref: "late reply", key: record.key, tenant: record.tenant, fields: { result } }],
    differences: [{ field: "state", ledger: record.state, downstream: "completed" }],
    source: "late_reply",
  };
  let recorded = "";
  try {
    if (rt.findings) {
      const { finding } = await rt.findings.recordFinding(report);
      recorded = `; recorded as finding ${finding.id}`;
    }
  } catch (err) {
    recorded = `; the finding could not be recorded (${messageOf(err)})`;
  }
  rt.alert({
    code: "late_reply_contradicts",
    message: `${record.tool} call ${record.key}: ${summary}${recorded}. Check the downstream and settle the call again if the verdict was wrong`,
    tenant: record.tenant, key: record.key, tool: record.tool,
  });
}

const clip = (text: string) => (text.length > 200 ? `${text.slice(0, 200)}…` : text);
