/** `effectgate ledger ls` and `effectgate ledger show`: read-only views of a ledger file. */
import type { CallState } from "../core/states.js";
import type { Json } from "../core/json.js";
import type { CallRecord, ListQuery } from "../contracts/calls.js";
import { CliError, EXIT_FAILURE, EXIT_USAGE } from "./errors.js";
import { hanging, indent, iso, relative, short, table } from "./format.js";
import { openLedgerForReading } from "./open-ledger.js";

export interface LsOptions {
  readonly db: string;
  readonly tenant?: string;
  readonly state?: CallState;
  readonly tool?: string;
  readonly limit: number;
  readonly json: boolean;
}

export interface ShowOptions {
  readonly db: string;
  readonly tenant?: string;
  readonly json: boolean;
}

/** What each state means for the person reading it. */
export const STATE_MEANING: Readonly<Record<CallState, string>> = {
  in_progress: "claimed by a worker; the tool may be running right now. If that worker died, the next replay of this call (or gate.recover()) asks the tool's probe, or hands the call to a person, instead of re-running it blindly.",
  completed: "the tool ran and its result is stored; every replay of this key gets this result and nothing runs again.",
  failed: "the tool failed definitely (its effect did not happen); replays get this error.",
  uncertain: "the outcome is unknown (timeout, crash or lost reply); it will be probed with the same key, never blindly re-run.",
  needs_human: "effectgate cannot tell whether the effect happened: a person must check the downstream system and settle the call.",
  compensated: "the call was completed and later undone by its compensation.",
  compensation_failed: "the call was completed, but undoing it failed; a person must look at it.",
};

export async function ledgerLs(options: LsOptions): Promise<void> {
  const { ledger, file } = openLedgerForReading(options.db);
  try {
    const query: ListQuery = {
      limit: options.limit,
      ...(options.tenant === undefined ? {} : { tenant: options.tenant }),
      ...(options.state === undefined ? {} : { state: options.state }),
      ...(options.tool === undefined ? {} : { tool: options.tool }),
    };
    const records = await ledger.calls.list(query);
    if (options.json) {
      process.stdout.write(`${JSON.stringify(records, null, 2)}\n`);
      return;
    }
    const filters = [
      options.tenant === undefined ? "" : `tenant=${options.tenant}`,
      options.state === undefined ? "" : `state=${options.state}`,
      options.tool === undefined ? "" : `tool=${options.tool}`,
    ].filter((f) => f !== "");
    const where = `${file}${filters.length ? ` (${filters.join(", ")})` : ""}`;
    if (records.length === 0) {
      process.stdout.write(`No calls in ${where}.\n`);
      return;
    }
    const now = Date.now();
    const rows = records.map((r) => [r.key, r.tenant, r.tool, r.effect, r.state, String(r.attempts), iso(r.updatedAt), summary(r, now)]);
    process.stdout.write(`${table(["KEY", "TENANT", "TOOL", "EFFECT", "STATE", "ATTEMPTS", "UPDATED", "RESULT / ERROR"], rows)}\n`);
    const more = records.length === options.limit ? ` (the first ${options.limit}, oldest first; raise --limit to see more)` : "";
    process.stdout.write(`\n${records.length} call${records.length === 1 ? "" : "s"} in ${where}${more}. Details: effectgate ledger show KEY --tenant TENANT\n`);
  } finally {
    await ledger.close();
  }
}

export async function ledgerShow(key: string, options: ShowOptions): Promise<void> {
  const { ledger, file } = openLedgerForReading(options.db);
  try {
    let record: CallRecord | undefined;
    if (options.tenant !== undefined) {
      record = await ledger.calls.get(options.tenant, key);
      if (!record) {
        const elsewhere = await tenantsWithKey(key);
        const hint = elsewhere.length ? ` It exists in tenant${elsewhere.length === 1 ? "" : "s"} ${elsewhere.join(", ")}.` : "";
        throw new CliError(`no call with key ${JSON.stringify(key)} in tenant ${JSON.stringify(options.tenant)} of ${file}.${hint}`, EXIT_FAILURE);
      }
    } else {
      const matches = await withKey(key);
      if (matches.length === 0) {
        throw new CliError(`no call with key ${JSON.stringify(key)} in ${file}. List the keys with: effectgate ledger ls --db ${file}`, EXIT_FAILURE);
      }
      if (matches.length > 1) {
        throw new CliError(
          `key ${JSON.stringify(key)} exists in ${matches.length} tenants (${matches.map((m) => m.tenant).join(", ")}); ` +
            `say which one with --tenant, e.g. effectgate ledger show ${key} --tenant ${matches[0]?.tenant ?? "TENANT"}`,
          EXIT_USAGE,
        );
      }
      record = matches[0];
    }
    if (!record) throw new CliError(`no call with key ${JSON.stringify(key)} in ${file}.`, EXIT_FAILURE);
    process.stdout.write(options.json ? `${JSON.stringify(record, null, 2)}\n` : describe(record, file, Date.now()));
  } finally {
    await ledger.close();
  }

  // A key without its tenant: one indexed lookup across tenants.
  async function withKey(k: string): Promise<CallRecord[]> {
    return ledger.calls.list({ key: k, limit: 1000 });
  }
  async function tenantsWithKey(k: string): Promise<string[]> {
    try {
      return (await withKey(k)).map((r) => r.tenant);
    } catch {
      return [];
    }
  }
}

/**
 * What a record's `error` field holds: why it failed or is stuck, except in a call that did its
 * effect (completed, compensated), where it is a note on how it got there ("settled by a person…",
 * "completed by a reply that arrived after the timeout").
 */
export function errorLabel(state: CallState): "Error" | "Note" {
  return state === "completed" || state === "compensated" ? "Note" : "Error";
}

/** The short result/error column of `ls`. */
function summary(r: CallRecord, now: number): string {
  switch (r.state) {
    case "completed":
    case "compensated":
      return short(render(r.result));
    case "in_progress":
      return short(r.owner === null ? "not held" : `held by ${r.owner}${r.leaseExpiresAt === null ? "" : `, lease ends ${relative(r.leaseExpiresAt, now)}`}`);
    default:
      return short(r.error ?? (r.result === null ? "" : render(r.result)));
  }
}

function render(value: Json | null): string {
  return typeof value === "string" ? value : JSON.stringify(value);
}

function pretty(value: Json | null): string {
  return typeof value === "string" ? value : JSON.stringify(value, null, 2);
}

function describe(r: CallRecord, file: string, now: number): string {
  const field = (name: string, value: string) => `  ${name.padEnd(12)} ${value}`;
  const lease = r.leaseExpiresAt === null ? "- (nobody holds the call)" : `${iso(r.leaseExpiresAt)} (${r.leaseExpiresAt > now ? "ends" : "ended"} ${relative(r.leaseExpiresAt, now)})`;
  const lines = [
    `Call ${r.key} in tenant ${r.tenant}  (${file})`,
    "",
    field("state", r.state),
    hanging("", STATE_MEANING[r.state], 12, 100),
    field("tool", `${r.tool} (effect: ${r.effect})`),
    field("task", r.task),
    field("tool_use_id", r.toolUseId),
    field("attempts", `${r.attempts} (times the tool was started for this key)`),
    field("owner", r.owner ?? "- (nobody)"),
    field("lease", lease),
    field("created", `${iso(r.createdAt)} (${relative(r.createdAt, now)})`),
    field("updated", `${iso(r.updatedAt)} (${relative(r.updatedAt, now)})`),
    field("version", String(r.version)),
    field("fingerprint", r.fingerprint),
    "",
    r.inputRedacted ? "Input (fields the tool marks `redact` are stored as \"[redacted]\"):" : "Input:",
    indent(pretty(r.input)),
    "",
    "Result:",
    indent(r.result === null ? "(none)" : pretty(r.result)),
    "",
    `${errorLabel(r.state)}:`,
    indent(r.error ?? "(none)"),
    "",
  ];
  return lines.join("\n");
}
