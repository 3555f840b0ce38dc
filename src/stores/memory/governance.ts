/**
 * Governance state in memory (memoryLedger's `governance`). Same semantics as the SQL stores:
 * all-or-nothing quota charges once per call, windows counted once per call, approvals moved
 * compare-and-set along the state table. Each method runs to completion without awaiting in
 * between, which is what makes it atomic in one process. Hands out copies only.
 */
import { EffectgateError } from "../../core/errors.js";
import { canMoveApproval } from "../../contracts/approval-states.js";
import type { ApprovalCountQuery, ApprovalRecord, Breaker, GovernanceStore, KillSwitch, QuotaCounter } from "../../contracts/governance.js";
import { recordId } from "./ids.js";

const EVERY = "";
const killId = (tenant: string, agent: string) => recordId(tenant, agent);
const useId = (tenant: string, key: string) => recordId(tenant, key);

const matchesApproval = (a: ApprovalRecord, query: ApprovalCountQuery) =>
  (query.state === undefined || a.state === query.state) && (query.tenant === undefined || a.tenant === query.tenant) &&
  (query.key === undefined || a.key === query.key);

/** The memory governance store, and whether a kill switch covers a call right now (for the call store's claimUnlessHalted, in the same turn). */
export function memoryGovernance(): GovernanceStore & { readonly halted: (tenant: string, agent: string | undefined) => boolean } {
  const switches = new Map<string, KillSwitch>();
  const counters = new Map<string, QuotaCounter>();
  const uses = new Set<string>();
  /** breaker id → (useId(tenant, key) → time counted) */
  const windows = new Map<string, Map<string, number>>();
  const breakers = new Map<string, Breaker>();
  const approvals = new Map<string, ApprovalRecord>();
  const copy = <T>(value: T): T => structuredClone(value);

  const active = (tenant: string, agent: string | undefined): KillSwitch | undefined => {
    for (const t of [EVERY, tenant]) {
      for (const a of agent === undefined || agent === "" ? [EVERY] : [EVERY, agent]) {
        const found = switches.get(killId(t, a));
        if (found) return found;
      }
    }
    return undefined;
  };

  return {
    halted: (tenant, agent) => active(tenant, agent) !== undefined,
    async activeKillSwitch(tenant, agent) {
      const found = active(tenant, agent);
      return found && copy(found);
    },
    async setKillSwitch(target, on, meta, now) {
      const id = killId(target.tenant ?? EVERY, target.agent ?? EVERY);
      if (!on) return switches.delete(id);
      if (switches.has(id)) return false;
      switches.set(id, { tenant: target.tenant ?? null, agent: target.agent ?? null, by: meta.by, reason: meta.reason ?? null, since: now });
      return true;
    },
    async listKillSwitches() {
      return [...switches.values()].map(copy);
    },

    async quotaUsage(names) {
      return new Map(names.map((n) => [n, counters.get(n)?.used ?? 0]));
    },
    async consumeQuota({ tenant, key, charges, now }) {
      if (uses.has(useId(tenant, key))) return { ok: true, charged: false };
      for (const c of charges) {
        const used = counters.get(c.counter)?.used ?? 0;
        if (used + c.amount > c.limit) return { ok: false, counter: c.counter, used, limit: c.limit, amount: c.amount };
      }
      for (const c of charges) counters.set(c.counter, { counter: c.counter, used: (counters.get(c.counter)?.used ?? 0) + c.amount, updatedAt: now });
      uses.add(useId(tenant, key));
      return { ok: true, charged: true };
    },
    async listQuotas(options = {}) {
      return [...counters.values()]
        .filter((c) => options.prefix === undefined || c.counter.startsWith(options.prefix))
        .sort((a, b) => a.counter.localeCompare(b.counter))
        .slice(0, options.limit ?? 100)
        .map(copy);
    },

    async hitRate({ tenant, key, scopes, counts, now }) {
      const open = [...breakers.values()].find((b) => b.state === "open" && scopes.includes(b.scope));
      if (open) return { ok: false, breaker: copy(open), opened: false };
      const call = useId(tenant, key);
      for (const c of counts) {
        const events = windows.get(c.breaker) ?? new Map<string, number>();
        for (const [k, at] of events) if (at <= now - c.windowMs) events.delete(k);
        windows.set(c.breaker, events);
        if (events.has(call)) continue;
        if (events.size + 1 > c.limit) {
          const breaker: Breaker = {
            id: c.breaker, tenant, scope: c.scope, state: "open", openedAt: now, closedBy: null, closedAt: null,
            reason: `more than ${c.limit} call${c.limit === 1 ? "" : "s"} within ${c.windowMs} ms`,
          };
          breakers.set(c.breaker, breaker);
          return { ok: false, breaker: copy(breaker), opened: true };
        }
      }
      for (const c of counts) {
        const events = windows.get(c.breaker);
        if (events && !events.has(call)) events.set(call, now);
      }
      return { ok: true };
    },
    async listBreakers(options = {}) {
      return [...breakers.values()]
        .filter((b) => options.includeClosed === true || b.state === "open")
        .sort((a, b) => a.openedAt - b.openedAt)
        .slice(0, options.limit ?? 100)
        .map(copy);
    },
    async countBreakers(options = {}) {
      let n = 0;
      for (const b of breakers.values()) if (options.includeClosed === true || b.state === "open") n++;
      return n;
    },
    async closeBreaker(id, by, now) {
      const breaker = breakers.get(id);
      if (!breaker || breaker.state !== "open") return undefined;
      const closed: Breaker = { ...breaker, state: "closed", closedBy: by, closedAt: now };
      breakers.set(id, closed);
      windows.delete(id);
      return copy(closed);
    },

    async putApproval(request) {
      const existing = approvals.get(request.id);
      if (existing) return { created: false, approval: copy(existing) };
      const record: ApprovalRecord = { ...copy(request), state: "pending", decidedBy: null, decidedAt: null, note: null, consumedAt: null };
      approvals.set(request.id, record);
      return { created: true, approval: copy(record) };
    },
    async getApproval(id) {
      const found = approvals.get(id);
      return found && copy(found);
    },
    async listApprovals(query = {}) {
      return [...approvals.values()]
        .filter((a) => matchesApproval(a, query))
        .sort((a, b) => a.requestedAt - b.requestedAt || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))
        .slice(0, query.limit ?? 100)
        .map(copy);
    },
    async countApprovals(query = {}) {
      let n = 0;
      for (const a of approvals.values()) if (matchesApproval(a, query)) n++;
      return n;
    },
    async moveApproval(id, from, move, now) {
      if (!canMoveApproval(from, move.to)) {
        throw new EffectgateError("EG_ILLEGAL_TRANSITION", `approval ${id} cannot move from ${from} to ${move.to}`);
      }
      const current = approvals.get(id);
      if (!current || current.state !== from) return undefined;
      const decided = move.to === "approved" || move.to === "denied";
      const next: ApprovalRecord = {
        ...current,
        state: move.to,
        ...(decided ? { decidedBy: move.by ?? null, decidedAt: now, note: move.note ?? null } : {}),
        ...(move.to === "consumed" ? { consumedAt: now } : {}),
        ...(move.expiresAt === undefined ? {} : { expiresAt: move.expiresAt }),
      };
      approvals.set(id, next);
      return copy(next);
    },
  };
}
