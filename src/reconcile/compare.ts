/** Comparing a completed call with its downstream record: `reconcileFields`, then the tool's own `compareDownstream`. */
import { canonicalJson } from "../core/keys.js";
import type { Json } from "../core/json.js";
import type { DownstreamRecord, FieldDifference, RecordedCall } from "../core/hooks.js";

/** What a tool declares about comparison (a subset of its definition). */
export interface Comparison {
  readonly reconcileFields?: readonly string[];
  compareDownstream?(recorded: RecordedCall, downstream: DownstreamRecord): readonly FieldDifference[];
}

/** The value at a dot path, or undefined when any step is missing. */
function valueAt(value: Json | null | undefined, path: string): Json | undefined {
  let node: Json | null | undefined = value;
  for (const part of path.split(".")) {
    if (typeof node !== "object" || node === null) return undefined;
    if (Array.isArray(node)) {
      if (!/^\d+$/.test(part)) return undefined;
      node = node[Number(part)];
    } else {
      if (!Object.prototype.hasOwnProperty.call(node, part)) return undefined;
      node = node[part];
    }
  }
  return node;
}

/** The fields in which `downstream` differs from what the ledger recorded for the call. */
export function compareRecord(tool: Comparison, recorded: RecordedCall, downstream: DownstreamRecord): FieldDifference[] {
  const differences: FieldDifference[] = [];
  for (const field of tool.reconcileFields ?? []) {
    const ledger = valueAt(recorded.result, field) ?? valueAt(recorded.input, field) ?? null;
    const theirs = valueAt(downstream.fields ?? null, field) ?? null;
    if (canonicalJson(ledger) !== canonicalJson(theirs)) differences.push({ field, ledger, downstream: theirs });
  }
  if (tool.compareDownstream) {
    for (const d of tool.compareDownstream(recorded, downstream)) {
      if (!differences.some((known) => known.field === d.field)) differences.push(d);
    }
  }
  return differences;
}
