/**
 * Approvals through the host: when the host declared the elicitation capability, a new approval
 * request is put to its user as a form (approve: yes / no). Fail closed: no capability, a
 * cancelled form or a failed request leaves the approval pending for `effectgate approvals`, and
 * a pending call does not run. A declined form, or "no", denies it.
 */
import type { ApprovalRecord } from "../contracts/governance.js";
import { hostCalls } from "./host-context.js";

/** The gate's approver shape (governance's ApprovalDecision, structurally). */
export type ElicitingApprover = (request: ApprovalRecord) => Promise<{ approve: boolean; by: string; note?: string } | undefined>;

export function elicitingApprover(options: { timeoutMs: number }): ElicitingApprover {
  return async (request) => {
    const host = hostCalls.getStore();
    if (!host?.server.getClientCapabilities()?.elicitation) return undefined;
    const who = host.server.getClientVersion()?.name ?? "the host";
    const preview = request.preview ? ` It would do: ${request.preview.effect} ${JSON.stringify(request.preview.would_affect)}` +
      ` (${request.preview.reversible ? "reversible" : "irreversible"}).` : "";
    const answer = await host.server.elicitInput({
      mode: "form",
      message: `effectgate: the agent asks to run ${request.tool} (${request.effect}), which needs your approval ` +
        `(${request.reasons.join("; ")}).${preview} Approval ${request.id}.`,
      requestedSchema: {
        type: "object",
        properties: { approve: { type: "boolean", title: `Run ${request.tool}?`, description: "Yes runs this one call once; no refuses it." } },
        required: ["approve"],
      },
    }, { timeout: options.timeoutMs });
    if (answer.action === "cancel") return undefined;
    const by = `${who} user (MCP elicitation)`;
    if (answer.action === "accept" && answer.content?.approve === true) return { approve: true, by };
    return { approve: false, by, note: answer.action === "decline" ? "declined in the host" : "answered no in the host" };
  };
}
