/**
 * `effectgate kill`, `effectgate breaker` and `effectgate approvals`: operator commands on the
 * governance state kept in the ledger file. Listing opens the ledger read-only; changing
 * (kill on/off, breaker close, approve, deny) opens it writable but never creates a file.
 */
import { defaultOperator } from "./operator.js";
import type { Stores } from "../contracts/stores.js";
import { closeBreaker, decideCall, getApproval, listApprovals, listBreakers, listKillSwitches, setKillSwitch } from "../governance/operator.js";
import type { ApprovalRecord, ApprovalState, GovernanceStore, KillSwitch, KillTarget } from "../contracts/governance.js";
// Every command below goes through the operator layer (governance/operator.ts), as the console's API does.
import { describePreview } from "../governance/dry-run.js";
import { CliError, EXIT_FAILURE } from "./errors.js";
import { indent, iso, relative, short, table } from "./format.js";
import { openLedgerForChanges, openLedgerForReading } from "./open-ledger.js";


interface Opened {
  readonly ledger: Stores;
  readonly store: GovernanceStore;
  readonly file: string;
}

async function withStore<T>(db: string, write: boolean, fn: (opened: Opened) => Promise<T>): Promise<T> {
  const { ledger, file } = write ? openLedgerForChanges(db) : openLedgerForReading(db);
  try {
    const store = ledger.governance;
    if (!store) throw new CliError(`the ledger ${file} keeps no governance state`, EXIT_FAILURE);
    return await fn({ ledger, store, file });
  } finally {
    await ledger.close();
  }
}

const out = (text: string) => process.stdout.write(text.endsWith("\n") ? text : `${text}\n`);

// ---- kill ------------------------------------------------------------------------------------

export interface KillOptions {
  readonly db: string;
  readonly tenant?: string;
  readonly agent?: string;
  readonly by?: string;
  readonly reason?: string;
}

function targetOf(o: KillOptions): KillTarget {
  return { ...(o.tenant === undefined ? {} : { tenant: o.tenant }), ...(o.agent === undefined ? {} : { agent: o.agent }) };
}

function describeKill(sw: Pick<KillSwitch, "tenant" | "agent">): string {
  if (sw.tenant === null && sw.agent === null) return "every tenant and agent";
  if (sw.tenant !== null && sw.agent !== null) return `agent ${sw.agent} in tenant ${sw.tenant}`;
  return sw.tenant !== null ? `tenant ${sw.tenant} (every agent)` : `agent ${sw.agent ?? ""} (every tenant)`;
}

export async function killSet(on: boolean, o: KillOptions): Promise<void> {
  await withStore(o.db, true, async ({ ledger, file }) => {
    const target = targetOf(o);
    const what = describeKill({ tenant: target.tenant ?? null, agent: target.agent ?? null });
    const changed = await setKillSwitch(ledger, on, target, { by: o.by ?? defaultOperator(), ...(o.reason === undefined ? {} : { reason: o.reason }) });
    if (on) {
      out(changed
        ? `Kill switch ON for ${what} in ${file}: every write and destructive call there is refused from its next call on, in every worker sharing this ledger. Reads still run.\nTurn it off with: effectgate kill off${flags(o)}`
        : `The kill switch for ${what} was already on in ${file}; nothing changed.`);
      return;
    }
    if (!changed) {
      const on = await listKillSwitches(ledger);
      const list = on.length ? ` Switches that are on: ${on.map(describeKill).join("; ")}.` : " No kill switch is on.";
      throw new CliError(`no kill switch was on for ${what} in ${file}; nothing changed.${list}`, EXIT_FAILURE);
    }
    out(`Kill switch OFF for ${what} in ${file}: calls there run again (other switches that are on still apply).`);
  });
}

function flags(o: KillOptions): string {
  return `${o.tenant === undefined ? "" : ` --tenant ${o.tenant}`}${o.agent === undefined ? "" : ` --agent ${o.agent}`}`;
}

export async function killLs(o: { db: string; json: boolean }): Promise<void> {
  await withStore(o.db, false, async ({ ledger, file }) => {
    const switches = await listKillSwitches(ledger);
    if (o.json) return out(JSON.stringify(switches, null, 2));
    if (switches.length === 0) return out(`No kill switch is on in ${file}.`);
    const now = Date.now();
    out(table(["STOPS", "SINCE", "BY", "REASON"], switches.map((s) => [describeKill(s), `${iso(s.since)} (${relative(s.since, now)})`, s.by, short(s.reason ?? "-", 60)])));
  });
}

// ---- breaker ---------------------------------------------------------------------------------

export async function breakerLs(o: { db: string; all: boolean; json: boolean }): Promise<void> {
  await withStore(o.db, false, async ({ ledger, file }) => {
    const breakers = await listBreakers(ledger, { includeClosed: o.all, limit: 1000 });
    if (o.json) return out(JSON.stringify(breakers, null, 2));
    if (breakers.length === 0) return out(`No ${o.all ? "" : "open "}rate breakers in ${file}.`);
    const now = Date.now();
    out(table(["ID", "STATE", "OPENED", "WHY", "CLOSED BY"], breakers.map((b) => [
      b.id, b.state, `${iso(b.openedAt)} (${relative(b.openedAt, now)})`, b.reason, b.closedBy === null ? "-" : `${b.closedBy} at ${iso(b.closedAt)}`,
    ])));
    if (breakers.some((b) => b.state === "open")) out("\nWhile a breaker is open, write and destructive calls in its scope are refused. Close one with: effectgate breaker close ID");
  });
}

export async function breakerClose(id: string, o: { db: string; by?: string }): Promise<void> {
  await withStore(o.db, true, async ({ ledger, file }) => {
    const closed = await closeBreaker(ledger, id, o.by ?? defaultOperator());
    if (!closed) {
      const open = await listBreakers(ledger, { limit: 1000 });
      const hint = open.length ? ` Open breakers: ${open.map((b) => b.id).join(", ")}.` : " No breaker is open.";
      throw new CliError(`no open rate breaker ${JSON.stringify(id)} in ${file}.${hint}`, EXIT_FAILURE);
    }
    out(`Closed rate breaker ${closed.id} (by ${closed.closedBy ?? "?"}); its window was reset, so calls in ${closed.scope} run again.`);
  });
}

// ---- approvals -------------------------------------------------------------------------------

export async function approvalsLs(o: { db: string; state?: ApprovalState; all: boolean; tenant?: string; limit: number; json: boolean }): Promise<void> {
  await withStore(o.db, false, async ({ ledger, file }) => {
    const state = o.all ? undefined : (o.state ?? "pending");
    const list = await listApprovals(ledger, { ...(state === undefined ? {} : { state }), ...(o.tenant === undefined ? {} : { tenant: o.tenant }), limit: o.limit });
    if (o.json) return out(JSON.stringify(list, null, 2));
    if (list.length === 0) return out(`No ${state === undefined ? "" : `${state} `}approval requests in ${file}${o.tenant === undefined ? "" : ` for tenant ${o.tenant}`}.`);
    const now = Date.now();
    out(table(["ID", "STATE", "TENANT", "TOOL", "REQUESTED", "EXPIRES", "WHAT IT WOULD DO"], list.map((a) => [
      a.id, a.state, a.tenant, a.tool, relative(a.requestedAt, now), relative(a.expiresAt, now),
      short(a.preview ? describePreview(a.preview) : JSON.stringify(a.input), 60),
    ])));
    out(`\n${list.length} request${list.length === 1 ? "" : "s"}. Details: effectgate approvals show ID · decide: effectgate approvals approve ID | deny ID [--note TEXT]`);
  });
}

export async function approvalsShow(id: string, o: { db: string; json: boolean }): Promise<void> {
  await withStore(o.db, false, async ({ ledger, file }) => {
    const a = await getApproval(ledger, id);
    if (!a) throw new CliError(`no approval request ${JSON.stringify(id)} in ${file}. List them with: effectgate approvals ls --all`, EXIT_FAILURE);
    out(o.json ? JSON.stringify(a, null, 2) : describeApproval(a, file, Date.now()));
  });
}

export async function approvalsDecide(id: string, approve: boolean, o: { db: string; by?: string; note?: string }): Promise<void> {
  await withStore(o.db, true, async ({ ledger, file }) => {
    const decided = await decideCall(ledger, id, { approve, by: o.by ?? defaultOperator(), ...(o.note === undefined ? {} : { note: o.note }) });
    if (!decided.ok) {
      const a = decided.approval;
      switch (decided.reason) {
        case "not_found":
          throw new CliError(`no approval request ${JSON.stringify(id)} in ${file}. List pending ones with: effectgate approvals ls`, EXIT_FAILURE);
        case "expired":
          throw new CliError(`approval request ${id} expired at ${iso(a?.expiresAt ?? null)} before anyone decided; it is now expired and its call will never run under it.`, EXIT_FAILURE);
        case "already_decided":
          throw new CliError(`approval request ${id} is already ${a?.state ?? "decided"}${a?.decidedBy ? ` (by ${a.decidedBy} at ${iso(a.decidedAt)})` : ""}; a decision is made once.`, EXIT_FAILURE);
      }
    }
    const a = decided.approval;
    out(approve
      ? `Approved ${a.id} (${a.tool} in tenant ${a.tenant}, task ${a.task}) by ${a.decidedBy ?? "?"}. The call runs once, when the agent repeats it, ` +
        `if it does so before ${iso(a.expiresAt)}; quotas are checked again then.`
      : `Denied ${a.id} (${a.tool} in tenant ${a.tenant}, task ${a.task}) by ${a.decidedBy ?? "?"}. The call will never run; the agent is told so when it repeats it.`);
  });
}

function describeApproval(a: ApprovalRecord, file: string, now: number): string {
  const field = (name: string, value: string) => `  ${name.padEnd(13)} ${value}`;
  return [
    `Approval request ${a.id}  (${file})`,
    "",
    field("state", a.state),
    field("tool", `${a.tool} (effect: ${a.effect})`),
    field("tenant", a.tenant),
    field("task", a.task),
    field("agent", a.agent ?? "-"),
    field("key", a.key),
    field("tool_use_id", a.toolUseId),
    field("requested", `${iso(a.requestedAt)} (${relative(a.requestedAt, now)}) by ${a.requestedBy}`),
    field("expires", `${iso(a.expiresAt)} (${relative(a.expiresAt, now)})`),
    field("decided", a.decidedAt === null ? "-" : `${iso(a.decidedAt)} by ${a.decidedBy ?? "?"}${a.note === null ? "" : `: ${a.note}`}`),
    field("consumed", a.consumedAt === null ? "-" : iso(a.consumedAt)),
    field("policy", a.policyVersion),
    field("digest", a.digest),
    "",
    "Why it needs approval:",
    indent(a.reasons.map((r) => `- ${r}`).join("\n")),
    "",
    "Dry run (what it would do):",
    indent(a.preview ? `${a.preview.effect}, ${a.preview.reversible ? "reversible" : "irreversible"}\n${JSON.stringify(a.preview.would_affect, null, 2)}` : "(no dry run)"),
    "",
    "Input:",
    indent(JSON.stringify(a.input, null, 2)),
    "",
  ].join("\n");
}
