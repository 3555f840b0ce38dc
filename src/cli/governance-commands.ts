/**
 * The governance commands' definitions and help (`effectgate kill`, `breaker`, `approvals`).
 * Their actions live in governance.ts and load only when a command runs.
 */
import { type Command, InvalidArgumentError, Option } from "commander";
import { DEFAULT_LEDGER_PATH } from "./defaults.js";

const APPROVAL_STATES = ["pending", "approved", "denied", "expired", "consumed"] as const;
type ApprovalStateName = (typeof APPROVAL_STATES)[number];

const readDb = () =>
  new Option("--db <path>", "the ledger file (SQLite); read only, never created or changed").env("EFFECTGATE_DB").default(DEFAULT_LEDGER_PATH);
const writeDb = () =>
  new Option("--db <path>", "the ledger file (SQLite) the agents use; changed, but never created").env("EFFECTGATE_DB").default(DEFAULT_LEDGER_PATH);
const byOption = () => new Option("--by <name>", "who is doing this, recorded with the time (default: your user name)");

function positiveInt(value: string): number {
  const n = Number(value);
  if (!/^\d+$/.test(value.trim()) || !Number.isSafeInteger(n) || n < 1) throw new InvalidArgumentError("it must be a whole number of at least 1.");
  return n;
}

export function addGovernanceCommands(program: Command, exitCodes: string): void {
  // ---- kill -----------------------------------------------------------------------------------
  const kill = program
    .command("kill")
    .description("the kill switch: stop every write and destructive call at once (everywhere, per tenant or per agent), across all workers sharing the ledger")
    .addHelpText("after", `
A kill switch is a durable flag in the ledger. Every worker checks it before each write or
destructive call (one indexed read), so a switch turned on here stops calls in every process
sharing the ledger from their next call on. Reads still run. Calls already running finish, and
a completed call is still replayed from the ledger. Switches add up: with a global switch on,
turning a tenant's off does not let that tenant's calls run.

Examples:
  effectgate kill on --reason "runaway refunds"        stop everything
  effectgate kill on --tenant acme                     stop tenant acme's agents
  effectgate kill on --agent billing-bot               stop one agent in every tenant
  effectgate kill ls                                   which switches are on
  effectgate kill off --tenant acme                    let acme's calls run again
${exitCodes}`);

  const target = (cmd: Command) => cmd
    .addOption(writeDb())
    .option("--tenant <tenant>", "only this tenant's calls (default: every tenant)")
    .option("--agent <agent>", "only this agent's calls, as named in the scope (default: every agent)");

  target(kill.command("on").description("turn a kill switch on: matching write and destructive calls are refused with EG_KILL_SWITCH"))
    .addOption(byOption())
    .option("--reason <text>", "why, shown to the agent and in `kill ls`")
    .action(async (opts: { db: string; tenant?: string; agent?: string; by?: string; reason?: string }) => {
      const { killSet } = await import("./governance.js");
      await killSet(true, opts);
    });

  target(kill.command("off").description("turn a kill switch off (the same --tenant/--agent it was turned on with); exits 1 if it was not on"))
    .action(async (opts: { db: string; tenant?: string; agent?: string }) => {
      const { killSet } = await import("./governance.js");
      await killSet(false, opts);
    });

  kill.command("ls")
    .description("list the kill switches that are on")
    .addOption(readDb())
    .option("--json", "print them as JSON")
    .action(async (opts: { db: string; json?: boolean }) => {
      const { killLs } = await import("./governance.js");
      await killLs({ db: opts.db, json: opts.json === true });
    });

  // ---- breaker --------------------------------------------------------------------------------
  const breaker = program
    .command("breaker")
    .description("rate breakers: list the ones a runaway loop opened, and close them")
    .addHelpText("after", `
A policy's rateLimits say how many write/destructive calls a task, agent or tenant may make in
a sliding window. One call more opens that scope's breaker: from then on every write and
destructive call in the scope is refused with EG_BREAKER_OPEN, and an operator alert is raised
(code breaker_open). Only a person closes it; closing also resets its window.

Breaker ids are RULE@SCOPE, e.g. task/destructive/60000ms@task:acme/t-42.

Examples:
  effectgate breaker ls
  effectgate breaker ls --all --json
  effectgate breaker close 'task/destructive/60000ms@task:acme/t-42' --by alice
${exitCodes}`);

  breaker.command("ls")
    .description("list open rate breakers (with --all, closed ones too)")
    .addOption(readDb())
    .option("--all", "include closed breakers")
    .option("--json", "print them as JSON")
    .action(async (opts: { db: string; all?: boolean; json?: boolean }) => {
      const { breakerLs } = await import("./governance.js");
      await breakerLs({ db: opts.db, all: opts.all === true, json: opts.json === true });
    });

  breaker.command("close")
    .description("close an open breaker so calls in its scope run again; exits 1 if no such breaker is open")
    .argument("<id>", "the breaker id, as listed by `effectgate breaker ls`")
    .addOption(writeDb())
    .addOption(byOption())
    .action(async (id: string, opts: { db: string; by?: string }) => {
      const { breakerClose } = await import("./governance.js");
      await breakerClose(id, opts);
    });

  // ---- approvals ------------------------------------------------------------------------------
  const approvals = program
    .command("approvals")
    .description("durable approvals: calls that wait for a person (every destructive call, and what the policy says)")
    .addHelpText("after", `
A call that needs approval is stored as a request with its tool, input, dry-run preview, who
asked and when; the agent is told EG_AWAITING_APPROVAL and to repeat the same call later. An
approval releases exactly that call (same tenant, key, tool, input and policy version), once.
When the agent repeats it, it runs once (quotas are checked again then); a denied or expired
request never runs.

States: pending (waiting for a decision), approved (will run when the agent repeats the call),
denied, expired (nobody decided in time, or approved but not run in time), consumed (released
its call).

Examples:
  effectgate approvals ls                                   pending requests
  effectgate approvals show apr_3f2a…                       input, preview, reasons
  effectgate approvals approve apr_3f2a… --by alice
  effectgate approvals deny apr_3f2a… --note "wrong account"
${exitCodes}`);

  approvals.command("ls")
    .description("list approval requests (default: pending ones)")
    .addOption(readDb())
    .addOption(new Option("--state <state>", "only requests in this state").choices(APPROVAL_STATES))
    .option("--all", "requests in every state")
    .option("--tenant <tenant>", "only this tenant's requests")
    .option("--limit <n>", "show at most n", positiveInt, 100)
    .option("--json", "print full requests as JSON")
    .action(async (opts: { db: string; state?: ApprovalStateName; all?: boolean; tenant?: string; limit: number; json?: boolean }) => {
      const { approvalsLs } = await import("./governance.js");
      await approvalsLs({ ...opts, all: opts.all === true, json: opts.json === true });
    });

  approvals.command("show")
    .description("everything about one request: input, dry-run preview, why it needs approval, its decision")
    .argument("<id>", "the request id (apr_…)")
    .addOption(readDb())
    .option("--json", "print it as JSON")
    .action(async (id: string, opts: { db: string; json?: boolean }) => {
      const { approvalsShow } = await import("./governance.js");
      await approvalsShow(id, { db: opts.db, json: opts.json === true });
    });

  for (const [name, approve] of [["approve", true], ["deny", false]] as const) {
    approvals.command(name)
      .description(approve
        ? "approve a pending request: its call runs once when the agent repeats it (exits 1 if it is not pending or has expired)"
        : "deny a pending request: its call never runs (exits 1 if it is not pending or has expired)")
      .argument("<id>", "the request id (apr_…)")
      .addOption(writeDb())
      .addOption(byOption())
      .option("--note <text>", "a note kept with the decision (the agent sees it on a denial)")
      .action(async (id: string, opts: { db: string; by?: string; note?: string }) => {
        const { approvalsDecide } = await import("./governance.js");
        await approvalsDecide(id, approve, opts);
      });
  }
}
