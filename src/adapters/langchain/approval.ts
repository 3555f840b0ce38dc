/**
 * Approvals in a LangGraph run: while effectgate's durable request is pending the tool calls
 * `interrupt()` before anything runs, and the graph pauses with the request in its interrupt.
 * A person decides from `effectgate approvals approve ID` (any process), or the graph is resumed
 * with the decision itself, `Command({ resume: { approve: true, by: "alice" } })`, which is
 * recorded in effectgate's store. Either way the gate checks the digest-bound approval when the
 * call runs, so a resume for other input never releases it.
 */
import type { Json } from "../../core/json.js";
import type { Scope } from "../../core/keys.js";
import type { ApprovalDecision } from "../../governance/approvals.js";
import { decideCall } from "../../governance/operator.js";
import type { Gate } from "../../root/create-gate.js";
import type { ToolCall } from "../../root/tool-calls.js";

/** What the graph's interrupt carries, for the person or the UI deciding it. */
export interface ApprovalInterrupt {
  readonly type: "effectgate_approval";
  /** The request's id: `effectgate approvals approve ID`. */
  readonly approvalId: string;
  readonly callId: string;
  readonly tool: string;
  readonly input: unknown;
  readonly reasons: readonly string[];
  readonly preview: Json | null;
}

const isDecision = (value: unknown): value is ApprovalDecision =>
  typeof value === "object" && value !== null && typeof (value as { approve?: unknown }).approve === "boolean" &&
  typeof (value as { by?: unknown }).by === "string";

/**
 * Interrupts the graph while the call's approval is pending; after a resume, records a decision
 * the resume carried. Returns when the call may go to the gate (which has the last word).
 */
export async function awaitApproval(gate: Gate, interrupt: (value: unknown) => unknown, call: ToolCall, scope: Scope): Promise<void> {
  const status = await gate.approvalFor(call, scope);
  if (status.state !== "pending" && status.state !== "none") return;
  const request: ApprovalInterrupt = {
    type: "effectgate_approval", approvalId: status.id, callId: call.id, tool: call.name, input: call.input,
    reasons: "record" in status ? status.record.reasons : status.reasons,
    preview: "record" in status ? (status.record.preview as Json | null) : null,
  };
  // Throws the graph's interrupt the first time; returns the resume value when the graph resumes.
  const resumed = interrupt(request);
  if (isDecision(resumed)) await decideCall(gate.ledger, status.id, resumed);
}
