/**
 * Steps 3 and 4 of the pipeline (DESIGN.md §2), between the ledger gate and the claim, for
 * `write` and `destructive` calls only (reads are free and never governed):
 *
 *   kill switch → grant → rate breaker → quota (peek) → dry-run + approval → quota (charge)
 *
 * A call the ledger already knows never comes here: a completed call is replayed without
 * governance and is never sent for approval again. The rate breaker counts before the quota
 * so a runaway loop trips it (and alerts a person) even when a quota refuses its calls. The
 * quota is peeked before approval (nobody is asked about a call that could not run) and
 * charged atomically after it, so an approved call is checked again when it finally runs.
 */
import { EffectgateError, messageOf } from "../core/errors.js";
import type { AnyTool, ToolContext } from "../core/tool.js";
import type { Alert } from "../gate/alerts.js";
import type { Admission, GovernedCall, Governor } from "../gate/governor.js";
import { approvalDigest, approvalId, decideApproval, expireIfDue, type ApprovalDecision } from "./approvals.js";
import { planRates } from "./breakers.js";
import { compilePolicy, type CompiledPolicy } from "./compile.js";
import type { ApprovalRecord, GovernanceStore, QuotaCharge } from "../contracts/governance.js";
import type { DryRunPreview } from "../core/hooks.js";
import { checkPreview } from "./dry-run.js";
import * as say from "./messages.js";
import type { Policy } from "./policy.js";
import { planQuotas, type QuotaPlan } from "./quotas.js";
import { breakerScopes } from "./scopes.js";
import { stopOf, stoppedTools, stopsFor, type StopSources, type StoppedTool } from "./stopped.js";
import type { Scope } from "../core/keys.js";

/**
 * Where a call's durable approval stands (for an SDK's own approval surface):
 * `not_needed` (no rule asks for one), `refused` (governance refuses the call anyway: kill switch,
 * grant, breaker, failed dry run), `none` (needed, not filed yet), or the request's state.
 */
export type ApprovalStatus =
  | { readonly state: "not_needed" }
  | { readonly state: "refused"; readonly message: string }
  | { readonly state: "none"; readonly id: string; readonly reasons: readonly string[] }
  | { readonly state: ApprovalRecord["state"]; readonly id: string; readonly record: ApprovalRecord };

/** Decides a new approval request in code (return undefined to leave it to a person). Called once per request, by the worker that filed it. */
export type Approver = (request: ApprovalRecord) => ApprovalDecision | undefined | Promise<ApprovalDecision | undefined>;

export interface GovernanceOptions {
  readonly policy: Policy | string | undefined;
  readonly tools: ReadonlyMap<string, AnyTool>;
  /** The ledger's governance store; undefined for a ledger that keeps none. */
  readonly store: GovernanceStore | undefined;
  readonly location: string;
  readonly owner: string;
  readonly clock: () => number;
  readonly approver: Approver | undefined;
  readonly alert: (alert: Alert) => void;
}

/** The gate's Governor (src/gate/governor.ts), plus the compiled policy sagas consult and what adapters ask. */
export interface Governance extends Governor {
  readonly policy: CompiledPolicy;
  /** Where this call's durable approval stands, filing the request (with its dry run) when `file` and none exists. Runs nothing. */
  approvalStatus(call: GovernedCall, options: { readonly file: boolean; readonly known?: boolean }): Promise<ApprovalStatus>;
  /** The write and destructive tools a kill switch, a missing grant or an open breaker stops in this scope now. */
  stoppedTools(scope: Scope): Promise<StoppedTool[]>;
}

const OK: Admission = { ok: true };
const refuse = (message: string, approvalId?: string): Admission => ({ ok: false, message, ...(approvalId === undefined ? {} : { approvalId }) });

export function createGovernance(options: GovernanceOptions): Governance {
  const policy = compilePolicy(options.policy, options.tools);
  const store = options.store ?? noStore(options, policy);
  const stopSources: StopSources = { store, isGranted: policy.isGranted, policySource: policy.source };

  /** The checks that stop a call outright and only read: the kill switch, then the grant. */
  async function screen(call: GovernedCall): Promise<Admission> {
    const { tool, scope } = call;
    if (tool.effect === "read") return OK;
    if (store) {
      const killed = await store.activeKillSwitch(scope.tenant, scope.agent);
      if (killed) return refuse(say.killSwitchMessage(tool, killed));
    }
    if (!policy.isGranted(tool, scope)) return refuse(say.notGrantedMessage(tool, scope, policy.source));
    return OK;
  }

  async function admit(call: GovernedCall): Promise<Admission> {
    const { tool, scope } = call;
    if (tool.effect === "read") return OK;
    const now = options.clock();
    const screened = await screen(call);
    if (!screened.ok) return screened;

    if (store && policy.rates.length > 0) {
      const verdict = await store.hitRate({
        tenant: scope.tenant, key: call.key, scopes: breakerScopes(scope), counts: planRates(policy.rates, tool, scope), now,
      });
      if (!verdict.ok) {
        if (verdict.opened) {
          options.alert({
            code: "breaker_open",
            message: `rate breaker ${verdict.breaker.id} opened (${verdict.breaker.reason}): write and destructive calls in ${verdict.breaker.scope} ` +
              `are refused until an operator closes it (effectgate breaker close ${verdict.breaker.id})`,
            tenant: scope.tenant, key: call.key, tool: tool.name,
          });
        }
        return refuse(say.breakerOpenMessage(tool, verdict.breaker));
      }
    }

    const plan = planQuotas(policy.quotas, tool, call.input, scope);
    if ("problem" in plan) return refuse(say.quotaInputMessage(tool, plan.problem));
    if (store && plan.charges.length > 0) {
      const usage = await store.quotaUsage(plan.charges.map((c) => c.counter));
      const over = plan.charges.find((c) => (usage.get(c.counter) ?? 0) + c.amount > c.limit);
      if (over) return refuse(quotaMessage(tool, plan, over, usage.get(over.counter) ?? 0));
    }

    const reasons = [...policy.approvalReasons(tool, call.input), ...(call.approvalReasons ?? [])];
    let approvalId: string | undefined;
    if (reasons.length > 0) {
      const approved = await approval(call, reasons, now);
      if (!approved.ok) return approved;
      approvalId = approved.approvalId;
    }

    if (store && plan.charges.length > 0) {
      const charged = await store.consumeQuota({ tenant: scope.tenant, key: call.key, charges: plan.charges, now });
      if (!charged.ok) {
        const over = plan.charges.find((c) => c.counter === charged.counter) ?? { counter: charged.counter, limit: charged.limit, amount: charged.amount };
        return refuse(quotaMessage(tool, plan, over, charged.used), approvalId);
      }
    }
    return approvalId === undefined ? OK : { ok: true, approvalId };
  }

  async function approval(call: GovernedCall, reasons: string[], now: number): Promise<Admission> {
    if (!store) throw new EffectgateError("EG_BAD_POLICY", `${call.tool.name} needs approval but the ledger ${options.location} keeps no approvals`);
    const { tool, scope } = call;
    const digest = approvalDigest({ tenant: scope.tenant, key: call.key, tool: tool.name, input: call.rawInput, policyVersion: policy.version });
    const id = approvalId(digest);
    let record = await store.getApproval(id);
    let created = false;
    if (!record) {
      const filed = await fileApproval(store, call, { id, digest, reasons }, now);
      if (!filed.ok) return filed;
      record = filed.record;
      created = filed.created;
    }
    for (;;) {
      record = await expireIfDue(store, record, now);
      switch (record.state) {
        case "pending":
          return refuse(say.awaitingApprovalMessage(tool, record, created), record.id);
        case "denied":
          return refuse(say.approvalDeniedMessage(tool, record), record.id);
        case "expired":
          return refuse(say.approvalExpiredMessage(tool, record), record.id);
        case "consumed":
          // Consumed by this very call (same digest, so the same key) earlier: a crash or a twin
          // between consuming and claiming. The ledger lets the key run at most once.
          return { ok: true, approvalId: record.id };
        case "approved": {
          const consumed = await store.moveApproval(record.id, "approved", { to: "consumed" }, now);
          if (consumed) return { ok: true, approvalId: record.id };
          record = (await store.getApproval(record.id)) ?? record;
        }
      }
    }
  }

  /** Stores a new pending request for the call (its dry run first), and announces it when this worker created it. */
  async function fileApproval(
    store: GovernanceStore, call: GovernedCall, at: { id: string; digest: string; reasons: string[] }, now: number,
  ): Promise<{ ok: true; record: ApprovalRecord; created: boolean } | { ok: false; message: string }> {
    const { tool, scope } = call;
    let preview: DryRunPreview | null = null;
    if (tool.dryRun) {
      const ran = await dryRun(call);
      if (!ran.ok) return ran;
      preview = ran.preview;
    } else if (tool.effect === "destructive") {
      return { ok: false, message: say.dryRunFailedMessage(tool, "the tool has no dryRun (every destructive tool needs one)") };
    }
    const put = await store.putApproval({
      id: at.id, tenant: scope.tenant, key: call.key, tool: tool.name, effect: tool.effect, task: scope.task, agent: scope.agent ?? null,
      toolUseId: call.toolUseId, input: call.storedInput, preview, reasons: at.reasons, digest: at.digest, policyVersion: policy.version,
      requestedBy: `${scope.agent ?? "an agent"} (worker ${options.owner})`, requestedAt: now, expiresAt: now + policy.ttlMs,
    });
    return { ok: true, record: put.created ? await announce(put.approval, now) : put.approval, created: put.created };
  }

  // `known`: the ledger already has the call, which is answered from it, never governed again: report its request as it stands.
  async function approvalStatus(call: GovernedCall, { file, known = false }: { readonly file: boolean; readonly known?: boolean }): Promise<ApprovalStatus> {
    const reasons = [...policy.approvalReasons(call.tool, call.input), ...(call.approvalReasons ?? [])];
    if (reasons.length === 0) return { state: "not_needed" };
    // A call governance would refuse anyway is not put before a person.
    const stop = known ? undefined : stopOf(stopSources, call.tool, call.scope, await stopsFor(stopSources, call.scope));
    if (stop) return { state: "refused", message: stop.message };
    if (!store) throw new EffectgateError("EG_BAD_POLICY", `${call.tool.name} needs approval but the ledger ${options.location} keeps no approvals`);
    const now = options.clock();
    const digest = approvalDigest({ tenant: call.scope.tenant, key: call.key, tool: call.tool.name, input: call.rawInput, policyVersion: policy.version });
    const id = approvalId(digest);
    let record = await store.getApproval(id);
    if (!record) {
      if (known) return { state: "not_needed" };
      if (!file) return { state: "none", id, reasons };
      const filed = await fileApproval(store, call, { id, digest, reasons }, now);
      if (!filed.ok) return { state: "refused", message: filed.message };
      record = filed.record;
    }
    record = await expireIfDue(store, record, now);
    return { state: record.state, id, record };
  }

  /** A new request: let the `approver` callback decide if there is one; if it stays pending, tell the operators. */
  async function announce(record: ApprovalRecord, now: number): Promise<ApprovalRecord> {
    let current = record;
    if (options.approver && store) {
      try {
        const decision = await options.approver(record);
        if (decision !== undefined) current = (await decideApproval(store, record.id, decision, now)).approval ?? record;
      } catch (err) {
        options.alert({
          code: "approval_requested",
          message: `the approver callback failed for ${record.id} (${messageOf(err)}); the request stays pending for a person`,
          tenant: record.tenant, key: record.key, tool: record.tool, cause: err,
        });
      }
    }
    if (current.state === "pending") {
      options.alert({
        code: "approval_requested",
        message: `${record.tool} call ${record.key} waits for approval ${record.id} (${record.reasons.join("; ")}): effectgate approvals approve ${record.id}`,
        tenant: record.tenant, key: record.key, tool: record.tool,
      });
    }
    return current;
  }

  async function dryRun(call: GovernedCall): Promise<{ ok: true; preview: DryRunPreview } | { ok: false; message: string }> {
    const ctx: ToolContext = {
      idempotencyKey: call.key, toolUseId: call.toolUseId, scope: call.scope, fence: 0, signal: new AbortController().signal, attempt: 0,
    };
    let value: unknown;
    try {
      value = await call.tool.dryRun?.(call.input, ctx);
    } catch (err) {
      return { ok: false, message: say.dryRunFailedMessage(call.tool, `it threw: ${messageOf(err)}`) };
    }
    const checked = checkPreview(value);
    if (!checked.ok) return { ok: false, message: say.dryRunFailedMessage(call.tool, `its preview is malformed: ${checked.problem}`) };
    return { ok: true, preview: checked.preview };
  }

  /** No rate breakers, no quotas, no approval for this call: admit() only reads (see Governor). */
  function admitsByReadingOnly(call: GovernedCall): boolean {
    return policy.rates.length === 0 && policy.quotas.length === 0 && policy.approvalReasons(call.tool, call.input).length === 0;
  }

  /** Granted and reading only, with the kill switches in the ledger's own store: the claim can check them itself. */
  function killSwitchOnly(call: GovernedCall): { agent: string | undefined } | undefined {
    if (!options.store || !admitsByReadingOnly(call) || !policy.isGranted(call.tool, call.scope)) return undefined;
    return { agent: call.scope.agent };
  }

  async function hasApprovalRequest(call: GovernedCall): Promise<boolean> {
    if (!store) return false;
    const digest = approvalDigest({ tenant: call.scope.tenant, key: call.key, tool: call.tool.name, input: call.rawInput, policyVersion: policy.version });
    return (await store.getApproval(approvalId(digest))) !== undefined;
  }

  return { policy, screen, admit, admitsByReadingOnly, killSwitchOnly, hasApprovalRequest, approvalStatus, stoppedTools: (scope) => stoppedTools(stopSources, options.tools.values(), scope) };
}

function quotaMessage(tool: AnyTool, plan: QuotaPlan, over: QuotaCharge, used: number): string {
  const about = plan.about.get(over.counter);
  return say.quotaExceededMessage(tool, {
    description: about?.quota.description ?? over.counter,
    where: about?.where ?? over.counter,
    used, limit: over.limit, amount: over.amount,
    sum: about?.quota.rule.sum,
  });
}

/** A ledger without a governance store can only enforce grants; anything needing state is refused up front. */
function noStore(options: GovernanceOptions, policy: CompiledPolicy): undefined {
  const needs: string[] = [];
  const destructive = [...options.tools.values()].filter((t) => t.effect === "destructive").map((t) => t.name);
  if (destructive.length > 0) needs.push(`approvals for the destructive tools ${destructive.join(", ")}`);
  if (policy.hasApprovalRules) needs.push("approvals for the policy's approval rules");
  if (policy.quotas.length > 0) needs.push("quota counters");
  if (policy.rates.length > 0) needs.push("rate breakers");
  if (needs.length > 0) {
    throw new EffectgateError(
      "EG_BAD_POLICY",
      `the ledger ${options.location} keeps no governance state (it has no \`governance\` store), but this gate needs ${needs.join(", ")}. ` +
        `Use memoryLedger(), sqliteLedger() or postgresLedger(), which keep it.`,
    );
  }
  return undefined;
}
