/** `effectgate reconcile` and `effectgate queue ls|show|resolve`. */
import { defaultOperator } from "./operator.js";
import { existsSync } from "node:fs";
import { resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { isEffectgateError, messageOf } from "../core/errors.js";
import type { AnyTool } from "../core/tool.js";
import type { Json } from "../core/json.js";
import type { CallRecord } from "../contracts/calls.js";
import type { Stores } from "../contracts/stores.js";
import { listQueue, resolveQueueItem, showQueueItem, type QueueDetail, type QueueResolved } from "../reconcile/queue.js";
import { reconcile, type ReconcileSummary } from "../reconcile/scan.js";
import type { Finding } from "../contracts/findings.js";
import { CliError, EXIT_FAILURE, EXIT_USAGE } from "./errors.js";
import { hanging, indent, iso, relative, short, table } from "./format.js";
import { errorLabel, STATE_MEANING } from "./ledger.js";
import { openLedgerForChanges, openLedgerForReading, openNow } from "./open-ledger.js";


async function withLedger<T>(opened: { ledger: Stores; file: string } | Promise<{ ledger: Stores; file: string }>, fn: (ledger: Stores, file: string) => Promise<T>): Promise<T> {
  const { ledger, file } = await opened;
  try {
    return await fn(ledger, file);
  } finally {
    await ledger.close();
  }
}


// ---- reconcile ----------------------------------------------------------------------------------

export interface ReconcileCommandOptions {
  readonly db: string;
  readonly tools: string;
  readonly tool?: readonly string[];
  readonly since?: number;
  readonly until?: number;
  readonly settle: number;
  readonly skew: number;
  readonly json: boolean;
}

/** Imports the tools module: `export const tools = [...]`, `export default [...]`, or a default function returning them. */
async function loadTools(modulePath: string): Promise<AnyTool[]> {
  const file = resolve(modulePath);
  if (!existsSync(file)) throw new CliError(`there is no tools module at ${file}. Pass the built JavaScript module exporting your tools with --tools.`, EXIT_USAGE);
  let loaded: Record<string, unknown>;
  try {
    loaded = (await import(pathToFileURL(file).href)) as Record<string, unknown>;
  } catch (err) {
    throw new CliError(`could not load the tools module ${file}: ${messageOf(err)}`, EXIT_FAILURE);
  }
  let tools: unknown = loaded.tools ?? loaded.default;
  if (typeof tools === "function") tools = await (tools as () => unknown)();
  const isTool = (t: unknown) => typeof t === "object" && t !== null && typeof (t as AnyTool).name === "string" && typeof (t as AnyTool).execute === "function";
  if (!Array.isArray(tools) || !tools.every(isTool)) {
    throw new CliError(
      `${file} must export \`tools\` (or a default export): an array of tools made with defineTool, or a function returning one`,
      EXIT_USAGE,
    );
  }
  return tools as AnyTool[];
}

export async function reconcileCommand(options: ReconcileCommandOptions): Promise<void> {
  const tools = await loadTools(options.tools);
  if (options.since !== undefined && options.until !== undefined && options.since > options.until) {
    throw new CliError(`--since (${iso(options.since)}) is after --until (${iso(options.until)})`, EXIT_USAGE);
  }
  await withLedger(openNow(openLedgerForChanges(options.db)), async (ledger, file) => {
    let summary: ReconcileSummary;
    try {
      summary = await reconcile({ ledger, tools }, {
        settleMs: options.settle, skewMs: options.skew,
        ...(options.tool === undefined ? {} : { tools: options.tool }),
        ...(options.since === undefined ? {} : { since: options.since }),
        ...(options.until === undefined ? {} : { until: options.until }),
      });
    } catch (err) {
      if (isEffectgateError(err, "EG_UNKNOWN_TOOL") || isEffectgateError(err, "EG_BAD_TOOL_DEFINITION")) throw new CliError(err.message, EXIT_USAGE);
      throw err;
    }
    if (options.json) {
      process.stdout.write(`${JSON.stringify(summary, null, 2)}\n`);
      return;
    }
    process.stdout.write(describeScan(summary, file));
  });
}

function describeScan(summary: ReconcileSummary, file: string): string {
  const lines: string[] = [];
  const how = summary.incremental ? "incremental (from each tool's last scan)" : "explicit window (saved cursors untouched)";
  lines.push(`Reconciled ${file}: ${how}, up to ${iso(summary.horizon)}`, "");
  lines.push(table(
    ["TOOL", "LEDGER READ", "DOWNSTREAM READ", "CONFIRMED", "NEW FINDINGS", "SEEN AGAIN", "AUTO-RESOLVED", "DOWNSTREAM WINDOW"],
    summary.tools.map((t) => t.skipped !== undefined
      ? [t.tool, "-", "-", "-", "-", "-", "-", `skipped: ${t.skipped}`]
      : [t.tool, String(t.recordsRead), String(t.downstreamRead), String(t.confirmed), String(t.newFindings.length), String(t.seenAgain),
          String(t.autoResolved), t.window ? `${iso(t.window.since)} .. ${iso(t.window.until)}` : "-"]),
  ));
  lines.push("");
  if (summary.newFindings.length === 0) {
    lines.push(`No new differences.${summary.seenAgain > 0 ? ` ${summary.seenAgain} known finding${summary.seenAgain === 1 ? " was" : "s were"} seen again.` : ""}`);
  } else {
    lines.push(`${summary.newFindings.length} new finding${summary.newFindings.length === 1 ? "" : "s"}:`, "");
    lines.push(findingTable(summary.newFindings));
  }
  lines.push("", "Everything that needs a person: effectgate queue ls");
  return `${lines.join("\n")}\n`;
}

function findingTable(findings: readonly Finding[]): string {
  return table(["ID", "KIND", "TOOL", "TENANT", "KEY", "WHAT"],
    findings.map((f) => [f.id, f.kind, f.tool, f.tenant ?? "-", f.key, short(f.summary, 80)]));
}

// ---- queue ----------------------------------------------------------------------------------------

export async function queueLs(options: { db: string; tenant?: string; limit: number; json: boolean }): Promise<void> {
  await withLedger(openLedgerForReading(options.db), async (ledger, file) => {
    const items = await listQueue(ledger, { limit: options.limit, ...(options.tenant === undefined ? {} : { tenant: options.tenant }) });
    if (options.json) {
      process.stdout.write(`${JSON.stringify(items, null, 2)}\n`);
      return;
    }
    const where = `${file}${options.tenant === undefined ? "" : ` (tenant ${options.tenant})`}`;
    if (items.length === 0) {
      process.stdout.write(`Nothing needs a person in ${where}.\n`);
      return;
    }
    // IDs and keys in full: each is what `queue show` / `queue resolve` (or `ledger show`) takes.
    const rows = items.map((i) => [
      i.id, i.kind, i.tenant ?? "-", i.tool, i.key, iso(i.since),
      short(`${i.summary}${i.related.length > 0 ? ` (+${i.related.length} finding${i.related.length === 1 ? "" : "s"})` : ""}`, 72),
    ]);
    process.stdout.write(`${table(["ID", "KIND", "TENANT", "TOOL", "KEY", "WAITING SINCE", "WHAT"], rows)}\n`);
    process.stdout.write(`\n${items.length} item${items.length === 1 ? "" : "s"} need${items.length === 1 ? "s" : ""} a person in ${where}. Details: effectgate queue show ID\n`);
  });
}

export async function queueShow(id: string, options: { db: string; tenant?: string; json: boolean }): Promise<void> {
  await withLedger(openLedgerForReading(options.db), async (ledger, file) => {
    const item = await lookUp(ledger, file, id, options.tenant);
    process.stdout.write(options.json ? `${JSON.stringify(item, null, 2)}\n` : describeItem(item, file, Date.now()));
  });
}

async function lookUp(ledger: Stores, file: string, id: string, tenant: string | undefined): Promise<QueueDetail> {
  const found = await showQueueItem(ledger, id, tenant === undefined ? {} : { tenant });
  if (found.found) return found.item;
  if (found.why === "ambiguous") {
    throw new CliError(
      `key ${JSON.stringify(id)} exists in ${found.tenants.length} tenants (${found.tenants.join(", ")}); say which one with --tenant, e.g. --tenant ${found.tenants[0] ?? "TENANT"}`,
      EXIT_USAGE,
    );
  }
  throw new CliError(`no finding or call ${JSON.stringify(id)}${tenant === undefined ? "" : ` in tenant ${JSON.stringify(tenant)}`} in ${file}. List them with: effectgate queue ls --db ${file}`, EXIT_FAILURE);
}

function pretty(value: Json | null | undefined): string {
  if (value === undefined || value === null) return "(none)";
  return typeof value === "string" ? value : JSON.stringify(value, null, 2);
}

function describeItem(item: QueueDetail, file: string, now: number): string {
  const field = (name: string, value: string) => `  ${name.padEnd(12)} ${value}`;
  const lines: string[] = [];
  if (item.finding) {
    const f = item.finding;
    lines.push(`Finding ${f.id}  (${file})`, "");
    lines.push(field("kind", f.kind), field("status", f.status), hanging("", f.summary, 12, 100));
    lines.push(field("tool", f.tool), field("tenant", f.tenant ?? "- (no ledger call matches)"), field("key", f.key));
    lines.push(field("source", f.source === "scan" ? "a reconcile scan" : "a signed receipt"));
    lines.push(field("first seen", `${iso(f.firstSeenAt)} (${relative(f.firstSeenAt, now)})`));
    lines.push(field("last seen", `${iso(f.lastSeenAt)} (seen ${f.timesSeen} time${f.timesSeen === 1 ? "" : "s"})`));
    if (f.status === "resolved") {
      lines.push(field("resolved", `${iso(f.resolvedAt)}${f.resolvedBy === null ? "" : ` by ${f.resolvedBy}`}`), hanging("", f.resolution ?? "", 12, 100));
    }
    if (f.differences.length > 0) {
      lines.push("", "Differences:");
      for (const d of f.differences) lines.push(`  ${d.field}: ledger ${JSON.stringify(d.ledger)}, downstream ${JSON.stringify(d.downstream)}`);
    }
    lines.push("", "Downstream records:");
    lines.push(f.downstream.length === 0 ? "  (none)" : f.downstream.map((d) => `  ${d.ref}  key ${d.key}${d.at === undefined ? "" : `  at ${iso(d.at)}`}${d.fields === undefined ? "" : `  ${JSON.stringify(d.fields)}`}`).join("\n"));
  } else {
    lines.push(`Call ${item.key} in tenant ${item.tenant ?? "?"}  (${file})`);
    // A call off the queue says why (its state, and the saga it was settled with).
    if (item.kind === "call") lines.push("", hanging("", item.summary, 0, 100));
  }
  const call: CallRecord | null = item.call;
  if (call) {
    lines.push("", ...(item.finding ? ["The ledger's call:"] : []));
    lines.push(field("state", call.state), hanging("", STATE_MEANING[call.state], 12, 100));
    lines.push(field("tool", `${call.tool} (effect: ${call.effect})`), field("task", call.task), field("attempts", String(call.attempts)));
    lines.push(field("updated", `${iso(call.updatedAt)} (${relative(call.updatedAt, now)})`));
    lines.push("", "  Input:", indent(pretty(call.input), 4), "", "  Result:", indent(pretty(call.result), 4), "", `  ${errorLabel(call.state)}:`, indent(call.error ?? "(none)", 4));
  }
  if (!item.finding && item.related.length > 0) {
    lines.push("", "Open findings about this call:", findingTable(item.related));
  }
  if (item.confirmations.length > 0) {
    lines.push("", "Downstream records matched to this call:");
    for (const c of item.confirmations) lines.push(`  ${c.ref}  (${c.source === "scan" ? "scan" : "receipt"}, ${iso(c.at)})${c.fields === null ? "" : `  ${JSON.stringify(c.fields)}`}`);
  }
  lines.push("", "To resolve:", hanging("", item.resolveWith, 0, 100), "");
  return lines.join("\n");
}

export async function queueResolve(
  id: string,
  options: { db: string; tenant?: string; completedWith?: string; failed?: string; note?: string; by?: string; json: boolean },
): Promise<void> {
  let completedWith: Json | undefined;
  if (options.completedWith !== undefined) {
    try {
      completedWith = JSON.parse(options.completedWith) as Json;
    } catch (err) {
      throw new CliError(`--completed-with must be JSON (the call's result), e.g. '{"id":"ch_42"}' or '"sent"': ${messageOf(err)}`, EXIT_USAGE);
    }
  }
  const by = options.by ?? defaultOperator();
  await withLedger(openLedgerForChanges(options.db), async (ledger, file) => {
    const item = await lookUp(ledger, file, id, options.tenant);
    if (item.finding) {
      if (completedWith !== undefined || options.failed !== undefined) {
        throw new CliError(`${id} is a finding, not a call: resolve it with --note TEXT (--completed-with and --failed settle needs_human calls)`, EXIT_USAGE);
      }
      if (options.note === undefined || options.note.trim() === "") throw new CliError(`resolving finding ${id} needs --note saying what you found or did`, EXIT_USAGE);
      // The same move the console's API makes (reconcile/queue.ts).
      const resolved = await resolveQueueItem(ledger, id, { note: options.note, by });
      if (!("kind" in resolved) || resolved.kind !== "finding") throw new CliError(`finding ${id} vanished while it was being resolved`, EXIT_FAILURE);
      const done = resolved;
      if (options.json) process.stdout.write(`${JSON.stringify(done.finding, null, 2)}\n`);
      else if (done.changed) process.stdout.write(`Resolved finding ${id} (${done.finding.kind}, ${done.finding.tool} ${done.finding.key}). Later scans will not reopen it.\n`);
      else process.stdout.write(`Finding ${id} was already resolved on ${iso(done.finding.resolvedAt)}${done.finding.resolvedBy === null ? "" : ` by ${done.finding.resolvedBy}`}: ${done.finding.resolution ?? ""}. Left as it was.\n`);
      return;
    }
    const call = item.call;
    if (!call) throw new CliError(`no call ${JSON.stringify(id)} in ${file}`, EXIT_FAILURE);
    if ((completedWith === undefined) === (options.failed === undefined)) {
      throw new CliError(`settle call ${call.key} with exactly one of --completed-with JSON (its effect happened) or --failed REASON (it did not)`, EXIT_USAGE);
    }
    const extra = { by, ...(options.note === undefined ? {} : { note: options.note }) };
    let settled: Extract<QueueResolved, { kind: "call" }>;
    try {
      const resolved = await resolveQueueItem(ledger, call.key, completedWith !== undefined ? { completedWith, ...extra } : { failed: options.failed as string, ...extra }, { tenant: call.tenant });
      if (!("kind" in resolved) || resolved.kind !== "call") throw new CliError(`call ${call.key} vanished while it was being resolved`, EXIT_FAILURE);
      settled = resolved;
    } catch (err) {
      if (isEffectgateError(err, "EG_ILLEGAL_TRANSITION")) {
        throw new CliError(`${err.message}. Only a needs_human call is settled here; this one is ${call.state}.`, EXIT_FAILURE);
      }
      throw err;
    }
    if (options.json) {
      process.stdout.write(`${JSON.stringify(settled.record, null, 2)}\n`);
      return;
    }
    const closed = settled.closedFindings.length > 0 ? ` Closed ${settled.closedFindings.length} finding${settled.closedFindings.length === 1 ? "" : "s"} about it.` : "";
    process.stdout.write(
      `Call ${call.key} (tenant ${call.tenant}, ${call.tool}) is now ${settled.record.state}. ` +
        `The agent's next replay of it gets ${settled.record.state === "completed" ? "the result you recorded" : "this failure"}.${closed}\n`,
    );
  });
}
