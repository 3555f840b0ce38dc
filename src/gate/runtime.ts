/** What one gate instance shares across its calls. Internal to the gate: features use kernel.ts. */
import { errorMessage } from "../core/errors.js";
import type { Scope } from "../core/keys.js";
import type { AnyTool } from "../core/tool.js";
import type { CallRecord, CallStore, RecordUpdate } from "../contracts/calls.js";
import type { ReconcileStore } from "../contracts/reconcile.js";
import { errorResult, renderResult, resultBlock, type ToolResultBlock } from "../core/blocks.js";
import type { ProbePolicy, RetryPolicy } from "../core/policies.js";
import type { TimeSource } from "../core/time.js";
import type { Alert, GateStats } from "./alerts.js";
import type { FaultHook } from "./faults.js";
import type { Admission, Governor } from "./governor.js";
import type { CallNote } from "./observe.js";

/** A tool's effective timeout, retry and probe settings (its own, else the gate's, else the class default). */
export interface ToolPolicy {
  readonly timeoutMs: number;
  readonly retry: RetryPolicy;
  readonly probe: ProbePolicy;
}

export interface Runtime {
  readonly calls: CallStore;
  /** Where a late reply that contradicts a settled record is recorded as a finding (contradiction.ts); none: an alert only. */
  readonly findings: ReconcileStore | undefined;
  /** Kill switch, grants, quotas, rate breakers and approvals, between the ledger gate and the claim. */
  readonly governor: Governor | undefined;
  readonly tools: ReadonlyMap<string, AnyTool>;
  readonly owner: string;
  readonly leaseMs: number;
  readonly waitMs: number;
  readonly faults: FaultHook | undefined;
  readonly stats: GateStats;
  /**
   * Keys this gate is working on (claiming, running, probing, recovering): one call per key at
   * a time in this process, so an in-process twin waits without polling and never races its
   * sibling for the same record.
   */
  readonly inflight: Map<string, Promise<void>>;
  /** Tool runs that timed out and may still answer late; aborted on close. */
  readonly abandoned: Set<AbortController>;
  /** Background work (late replies and outcomes being recorded) that `gate.drain()` waits for. */
  readonly background: Set<Promise<void>>;
  /** Set once the gate is closing: background work stops waiting and says what it leaves undone. */
  readonly closing: Closing;
  /**
   * What this gate knows of a call that the ledger does not (yet): an outcome whose write failed
   * and is being retried, or a claim whose reply was lost before the tool started. A replay in
   * this process is answered from it, never by running the tool again (see known.ts).
   */
  readonly known: Map<string, Known>;
  /**
   * Calls whose tool this gate started under its claim and whose record it has not written since
   * (the lease was lost, the outcome write failed): such a record looks exactly like a claim whose
   * reply was lost, but its tool ran, so it is never taken back as unstarted (known.ts).
   */
  readonly startedUnwritten: Set<string>;
  /** Every clock reading and wait of the gate (real time unless a test passes a simulated one). */
  readonly time: TimeSource;
  /** Jitter source for retry backoff (tests pass a seeded one). */
  readonly random: () => number;
  readonly policyFor: (tool: AnyTool) => ToolPolicy;
  readonly alert: (alert: Alert) => void;
}

export interface Closing {
  readonly closed: boolean;
  /** Resolves when the gate starts closing. */
  readonly promise: Promise<void>;
}

/** What this gate knows of a call that its ledger may not show (see known.ts). */
export type Known =
  /**
   * The claim was sent but its reply lost: if the record is this gate's, unchanged, the tool never
   * started. `versions`: what that record's version may be (default 1, the claim's; a take-over of
   * it whose reply was lost too may have left the next one).
   */
  | { readonly kind: "claim_unanswered"; readonly versions?: readonly number[] }
  /** The outcome, and the answer the agent got; `record` is what the write compares against. */
  | { readonly kind: "outcome"; readonly record: CallRecord; readonly update: RecordUpdate; readonly block: ToolResultBlock };

/** One validated call on its way through the pipeline. */
export interface Call {
  readonly tool: AnyTool;
  /** The input as the schema parsed it; undefined when recovering a call whose stored input was redacted. */
  readonly input: unknown;
  readonly hasInput: boolean;
  readonly scope: Scope;
  readonly toolUseId: string;
  /** What observers are told about the call (only when the gate has observers). */
  readonly note?: CallNote;
}

/** JSON of [tenant, key], not the two joined by NUL: tenant "a\u0000b" + key "c" must not be tenant "a" + key "b\u0000c". */
export const inflightId = (record: Pick<CallRecord, "tenant" | "key">) => JSON.stringify([record.tenant, record.key]);

/** Runs `work` as the only call for this key in this gate, after any call already on it. */
export async function singleFlight<T>(rt: Runtime, tenant: string, key: string, work: () => Promise<T>): Promise<T> {
  const id = inflightId({ tenant, key });
  for (let current = rt.inflight.get(id); current; current = rt.inflight.get(id)) await current;
  let release!: () => void;
  rt.inflight.set(id, new Promise<void>((resolve) => (release = resolve)));
  try {
    return await work();
  } finally {
    rt.inflight.delete(id);
    release();
  }
}

/** The answer a settled record gives on every replay. */
export function replayRecord(toolUseId: string, record: CallRecord): ToolResultBlock {
  if (record.state === "failed") return resultBlock(toolUseId, record.error ?? errorMessage("EG_TOOL_FAILED", "the call failed"), true);
  return resultBlock(toolUseId, renderResult(record.result), false);
}

export function needsHumanResult(toolUseId: string, record: CallRecord): ToolResultBlock {
  return errorResult(toolUseId, "EG_NEEDS_HUMAN",
    `the outcome of this ${record.tool} call is unknown (${record.error ?? "it was interrupted"}). ` +
      `A person has been asked to check it. Do not retry it under a new id; this same call will return the answer once it is resolved.`);
}

export function inProgressResult(toolUseId: string, record: CallRecord, why: string): ToolResultBlock {
  return errorResult(toolUseId, "EG_IN_PROGRESS",
    `this ${record.tool} call is ${why}. Its outcome is not known yet. Do not retry it under a new id; repeat this same call later to get its result.`);
}

/** For the gate's observers: the approval request governance admitted or refused the call under, as governance named it. */
export function noteApproval(call: Call, admitted: Admission): void {
  if (call.note && admitted.approvalId !== undefined) call.note.approvalId = admitted.approvalId;
}
