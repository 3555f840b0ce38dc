/**
 * What the gate asks before it claims a write or destructive call (steps 3–4 of the pipeline):
 * may this call run now? The gate declares this interface and knows nothing else of governance;
 * src/governance implements it (kill switch, grants, rate breakers, quotas, dry run + approval)
 * and the composition root hands it to the gate.
 */
import type { Json } from "../core/json.js";
import type { Scope } from "../core/keys.js";
import type { AnyTool } from "../core/tool.js";

/** One validated call on its way to the claim. */
export interface GovernedCall {
  readonly tool: AnyTool;
  /** The input as the schema parsed it (conditions, quota sums and the dry run see this). */
  readonly input: unknown;
  /** The input as the block gave it (the approval digest binds this). */
  readonly rawInput: unknown;
  /** The input as stored (redacted fields replaced). */
  readonly storedInput: Json;
  readonly key: string;
  readonly scope: Scope;
  readonly toolUseId: string;
  /** Reasons of the gate's own for a person to approve the call, beside the policy's (a repeat of an earlier call: ToolSpec.repeats). */
  readonly approvalReasons?: readonly string[];
}

/**
 * `message` is the tool_result content of a refusal: it starts with its `EG_…` code and says what
 * to do. `approvalId` names the durable approval request the call was admitted under (consumed
 * for it), waits for, or was refused under (denied, expired); the gate hands it to its observers
 * as data, never read back out of the message.
 */
export type Admission =
  | { readonly ok: true; readonly approvalId?: string }
  | { readonly ok: false; readonly message: string; readonly approvalId?: string };

export interface Governor {
  /**
   * Only the checks that stop a call outright and only read (the kill switch, the grant): asked
   * before the gate looks for a call this one repeats (ToolSpec.repeats), so a call that may not
   * run at all is refused as such, and never answered with another agent's result. `admit` makes
   * them again.
   */
  screen?(call: GovernedCall): Promise<Admission>;
  /** Admits the call (quota charged, approval consumed) or refuses it. Nothing is executed here. */
  admit(call: GovernedCall): Promise<Admission>;
  /**
   * True when admitting `call` only reads (the kill switch, the grant): no breaker hit counted,
   * no quota charged, no approval asked for or consumed. The gate then governs the call before it
   * looks its key up and lets the claim find a known key (one ledger read fewer per call); a refused
   * call is still answered from the ledger when its key is known. Without it, the key is looked up first.
   */
  admitsByReadingOnly?(call: GovernedCall): boolean;
  /**
   * When admitting `call` comes down to "no kill switch of the ledger covers its tenant and agent"
   * (it reads only, and its grant holds): that check, for the claim to make atomically and without
   * a read of its own (CallStore.claimUnlessHalted). A claim that answers "halted" is governed
   * again in full (admit). Undefined otherwise.
   */
  killSwitchOnly?(call: GovernedCall): { readonly agent: string | undefined } | undefined;
  /**
   * Whether an approval request for exactly this call (its key and input) was ever filed: a call
   * once sent to a person as a repeat is still governed by that request after the earlier call
   * it repeated left the window.
   */
  hasApprovalRequest?(call: GovernedCall): Promise<boolean>;
}
