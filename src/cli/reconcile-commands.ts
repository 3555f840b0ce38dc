/**
 * The reconciliation commands' definitions and help (`effectgate reconcile`, `effectgate queue`).
 * Their actions live in reconcile.ts and load only when a command runs.
 */
import { type Command, InvalidArgumentError, Option } from "commander";
import { DEFAULT_LEDGER_PATH } from "./defaults.js";

const readDb = () =>
  new Option("--db <path>", "the ledger file (SQLite); read only, never created or changed").env("EFFECTGATE_DB").default(DEFAULT_LEDGER_PATH);
const writeDb = () =>
  new Option("--db <path>", "the ledger file (SQLite) the agents use; changed, but never created").env("EFFECTGATE_DB").default(DEFAULT_LEDGER_PATH);

function positiveInt(value: string): number {
  const n = Number(value);
  if (!/^\d+$/.test(value.trim()) || !Number.isSafeInteger(n) || n < 1) throw new InvalidArgumentError("it must be a whole number of at least 1.");
  return n;
}

function millis(value: string): number {
  const n = Number(value);
  if (!/^\d+$/.test(value.trim()) || !Number.isSafeInteger(n)) throw new InvalidArgumentError("it must be a whole number of milliseconds.");
  return n;
}

const UNITS: Readonly<Record<string, number>> = { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/** A point in time: epoch milliseconds, an ISO 8601 date or time, or a duration ago (90m, 24h, 7d). */
function parseTime(value: string, now: number = Date.now()): number {
  const text = value.trim();
  if (/^\d{10,}$/.test(text)) return Number(text);
  const ago = /^(\d+)([smhd])$/.exec(text);
  if (ago) return now - Number(ago[1]) * (UNITS[ago[2] as string] as number);
  const parsed = Date.parse(text);
  if (!Number.isFinite(parsed)) {
    throw new InvalidArgumentError("use an ISO date or time (2026-01-31, 2026-01-31T12:00:00Z), epoch milliseconds, or a duration ago (90m, 24h, 7d).");
  }
  return parsed;
}

const time = (value: string) => parseTime(value);

const QUEUE_KINDS = "needs_human, compensation_failed, missing_downstream, orphan_downstream, duplicate_downstream, mismatch, unresolved";

export function addReconcileCommands(program: Command, exitCodes: string): void {
  // ---- reconcile ------------------------------------------------------------------------------
  program
    .command("reconcile")
    .description("hold the ledger against what the downstream systems actually did: find missing, orphan, duplicate and altered effects")
    .addOption(writeDb())
    .addOption(new Option("--tools <module>", "a JavaScript module exporting the tools (see below); needed to ask each tool's lookup").env("EFFECTGATE_TOOLS").makeOptionMandatory())
    .option("--tool <name...>", "only these tools (default: every write or destructive tool with a lookup)")
    .option("--since <time>", "scan what changed since this time instead of since the last scan (does not move the saved cursor)", time)
    .option("--until <time>", "scan what changed up to this time (does not move the saved cursor)", time)
    .option("--settle <ms>", "stay this far behind the ledger's clock, so writes still committing are read next time", millis, 60_000)
    .option("--skew <ms>", "how far the downstream's clock may be from the ledger's; widens the window asked of lookup", millis, 300_000)
    .option("--json", "print the scan summary as JSON")
    .addHelpText("after", `
How a scan works. Each tool with a lookup(window, ctx) is asked for the downstream's own
records in a time window, each with the idempotency key it was made with. The scan reads the
tool's ledger records that changed since its last scan (a saved cursor: a daily scan costs what
is new, not the whole ledger) and reports every difference as a finding:

  missing_downstream    the ledger says completed; the downstream has no record with its key
  orphan_downstream     the downstream has an effect the ledger does not know (or records as failed)
  duplicate_downstream  the downstream has more than one record for one key
  mismatch              a compared field (the tool's reconcileFields, e.g. amount) differs
  unresolved            the ledger itself does not know the outcome (uncertain, needs_human)

Findings are stored in the ledger. The same difference found again is the same finding (a
resolved one stays resolved); see them with \`effectgate queue ls\`.

The tools module. --tools (or EFFECTGATE_TOOLS) names a JavaScript module (ESM) that exports the
same tools the agents use, made with defineTool:
  export const tools = [chargeCard, sendEmail];        // or: export default [...]
  export default async () => [await makeChargeCard()]; // or a function returning them
It is imported and only each tool's lookup is called: nothing executes. The queue commands below
do not need it.

Times: an ISO date or time (2026-01-31, 2026-01-31T12:00:00Z), epoch milliseconds, or a duration
ago (90m, 24h, 7d).

Examples:
  effectgate reconcile --tools ./dist/agent-tools.js              incremental: what changed since the last scan
  effectgate reconcile --tools ./tools.js --tool charge_card --json
  effectgate reconcile --tools ./tools.js --since 7d              re-check the last week (cursor untouched)
${exitCodes}`)
    .action(async (opts: { db: string; tools: string; tool?: string[]; since?: number; until?: number; settle: number; skew: number; json?: boolean }) => {
      const { reconcileCommand } = await import("./reconcile.js");
      await reconcileCommand({ ...opts, json: opts.json === true });
    });

  // ---- queue ----------------------------------------------------------------------------------
  const queue = program
    .command("queue")
    .description("the human queue: every call and difference that needs a person, in one list")
    .addHelpText("after", `
The queue gathers:
  needs_human           calls whose outcome effectgate cannot determine: check the downstream,
                        then record what actually happened (queue resolve KEY --completed-with / --failed)
  compensation_failed   completed calls whose undo failed
  open findings         differences found by \`effectgate reconcile\` or by signed receipts
                        (missing_downstream, orphan_downstream, duplicate_downstream, mismatch, unresolved):
                        fix what needs fixing downstream, then queue resolve ID --note TEXT

These commands need no tools module.
${exitCodes}`);

  queue
    .command("ls")
    .description("list everything waiting for a person, oldest first")
    .addOption(readDb())
    .option("--tenant <tenant>", "only this tenant's items")
    .option("--limit <n>", "at most n items of each kind of source (calls per state, findings)", positiveInt, 100)
    .option("--json", "print the items as JSON")
    .addHelpText("after", `
Columns: ID (a call's key, or a finding's id f_…; pass it to show/resolve), KIND (${QUEUE_KINDS}),
TENANT, TOOL, KEY, WAITING SINCE (UTC), WHAT (why a person is needed). A call's open findings are
shown with the call (+N findings), not as separate rows.

Examples:
  effectgate queue ls
  effectgate queue ls --tenant acme --json
${exitCodes}`)
    .action(async (opts: { db: string; tenant?: string; limit: number; json?: boolean }) => {
      const { queueLs } = await import("./reconcile.js");
      await queueLs({ ...opts, json: opts.json === true });
    });

  queue
    .command("show")
    .description("everything known about one queue item: the call, the downstream records, the differences, how to resolve it")
    .argument("<id>", "a finding id (f_…) or a call's key, as listed by `effectgate queue ls`")
    .addOption(readDb())
    .option("--tenant <tenant>", "the call's tenant, when its key exists in several")
    .option("--json", "print the item as JSON")
    .action(async (id: string, opts: { db: string; tenant?: string; json?: boolean }) => {
      const { queueShow } = await import("./reconcile.js");
      await queueShow(id, { ...opts, json: opts.json === true });
    });

  queue
    .command("resolve")
    .description("settle a needs_human call by recording what actually happened, or close a finding with a note")
    .argument("<id>", "a finding id (f_…) or a call's key")
    .addOption(writeDb())
    .option("--tenant <tenant>", "the call's tenant, when its key exists in several")
    .addOption(new Option("--completed-with <json>", "the call's effect happened: this JSON is its result (what the agent's replay of the call gets)").conflicts("failed"))
    .option("--failed <reason>", "the call's effect did not happen: why (the agent's replay gets it as an error)")
    .option("--note <text>", "what you found or did (required for a finding; kept with a call)")
    .option("--by <name>", "who resolved it (default: your user name)")
    .option("--json", "print the resolved call or finding as JSON")
    .addHelpText("after", `
A needs_human call may move to completed or failed only (the state table): pass exactly one of
--completed-with JSON or --failed REASON. The change is compare-and-set: if the call changed
meanwhile (a late reply settled it), nothing is written and the command says so (exit 1).
Resolving a call also closes its open \`unresolved\` findings.

A finding is resolved with --note. It then stays resolved: later scans that see the same
difference again do not reopen it. A new, different difference is a new finding.

Examples:
  effectgate queue resolve toolu_01ABC --completed-with '{"id":"ch_42","amount":1200}' --note "found in the Stripe dashboard"
  effectgate queue resolve toolu_01ABC --failed "no charge with this key in Stripe"
  effectgate queue resolve f_3a9c0e1d2b4f5a6c --note "refunded the duplicate ch_43 by hand"
${exitCodes}`)
    .action(async (id: string, opts: { db: string; tenant?: string; completedWith?: string; failed?: string; note?: string; by?: string; json?: boolean }) => {
      const { queueResolve } = await import("./reconcile.js");
      await queueResolve(id, { ...opts, json: opts.json === true });
    });
}
