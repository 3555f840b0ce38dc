/**
 * The saga commands' definitions and help (`effectgate saga ls|show|compensate|resolve`).
 * Their actions live in saga.ts and load only when a command runs.
 */
import { type Command, InvalidArgumentError, Option } from "commander";
import { SAGA_STATES } from "../contracts/saga-states.js";
import type { SagaState } from "../contracts/sagas.js";
import { DEFAULT_LEDGER_PATH } from "./defaults.js";

const readDb = () =>
  new Option("--db <path>", "the ledger file (SQLite); read only, never created or changed").env("EFFECTGATE_DB").default(DEFAULT_LEDGER_PATH);
const writeDb = () =>
  new Option("--db <path>", "the ledger file (SQLite) the agents use; changed, but never created").env("EFFECTGATE_DB").default(DEFAULT_LEDGER_PATH);
const tenant = () => new Option("--tenant <tenant>", "the saga's tenant; needed only when the id exists in several tenants");

function positiveInt(value: string): number {
  const n = Number(value);
  if (!/^\d+$/.test(value.trim()) || !Number.isSafeInteger(n) || n < 1) throw new InvalidArgumentError("it must be a whole number of at least 1.");
  return n;
}

const STATES_HELP = `
Saga states:
  running              its driver (code, or an agent's tagged calls) is adding steps
  stalled              its driver died mid-way; recovery does not continue forward steps. Run the
                       saga's code again to resume it, or roll it back with \`effectgate saga compensate\`
  completed            every step done
  compensating         its completed steps are being undone in reverse order
  compensated          every completed, compensable step was undone (approved non-compensable ones stay)
  compensation_failed  a compensation failed, or a step's outcome is unknown: a person must settle it
  resolved             a person settled it (\`effectgate saga resolve\`)`;

export function addSagaCommands(program: Command, exitCodes: string): void {
  const saga = program
    .command("saga")
    .description("inspect and operate sagas: multi-step workflows whose completed steps are undone in reverse order when one fails")
    .addHelpText("after", `
A saga's state, its steps and its full history live in the ledger next to its calls. Each step
is a call keyed saga:<id>:<step>, its compensation saga:<id>:<step>:compensate
(\`effectgate ledger show KEY\` shows either). See docs/sagas.md.
${STATES_HELP}`);

  saga
    .command("ls")
    .description("list sagas (oldest first), optionally filtered")
    .addOption(readDb())
    .option("--tenant <tenant>", "only sagas of this tenant")
    .addOption(new Option("--state <state>", "only sagas in this state (compensation_failed: the human queue)").choices(SAGA_STATES))
    .option("--limit <n>", "show at most n sagas", positiveInt, 100)
    .option("--json", "print an array of saga records as JSON instead of a table")
    .addHelpText("after", `
Columns: ID, TENANT, TASK, STATE, STEPS (how many), UPDATED (UTC), REASON (why it compensates,
stalled or failed, or how a person resolved it; shortened).
${STATES_HELP}

Examples:
  effectgate saga ls --state compensation_failed     the sagas a person must settle
  effectgate saga ls --tenant acme --json
${exitCodes}`)
    .action(async (opts: { db: string; tenant?: string; state?: SagaState; limit: number; json?: boolean }) => {
      const { sagaLs } = await import("./saga.js");
      await sagaLs({ ...opts, json: opts.json === true });
    });

  saga
    .command("show")
    .description("show one saga: its state, every step with its keys, results and errors, and its full history")
    .argument("<id>", "the saga id, as listed by `effectgate saga ls`")
    .addOption(readDb())
    .addOption(tenant())
    .option("--json", "print {saga, steps, history} as JSON")
    .addHelpText("after", `
For a compensation_failed saga it also says which steps need a person and what to do. Without
--tenant the id is looked up in every tenant: one match is shown, several ask for --tenant
(exit 2), none exits 1.
${exitCodes}`)
    .action(async (id: string, opts: { db: string; tenant?: string; json?: boolean }) => {
      const { sagaShow } = await import("./saga.js");
      await sagaShow(id, { ...opts, json: opts.json === true });
    });

  saga
    .command("compensate")
    .description("roll back a running, stalled or completed saga: mark it for compensation by the next gate.recover()")
    .argument("<id>", "the saga id")
    .addOption(writeDb())
    .addOption(tenant())
    .option("--note <text>", "why (kept in the saga's history)", "requested by an operator")
    .option("--by <name>", "who asks (default: your user name)")
    .addHelpText("after", `
This command does not run the compensations itself: undoing a step means calling its tools,
which live in your program, not in the ledger. It marks the saga \`compensating\` (releasing it
from its driver, whose next step is then refused), and the next \`gate.recover()\` of a process
created with the saga's tools undoes its completed steps in reverse order, each once, exactly
as after a failed step. Non-compensable steps that were approved stay. Check the outcome with
\`effectgate saga show ID\`.

A saga that is already compensating is left as it is; a compensated, compensation_failed or
resolved one is refused (exit 1).
${exitCodes}`)
    .action(async (id: string, opts: { db: string; tenant?: string; note: string; by?: string }) => {
      const { sagaCompensate } = await import("./saga.js");
      await sagaCompensate(id, opts);
    });

  saga
    .command("resolve")
    .description("settle a compensation_failed saga (the human queue) after looking at what it left behind")
    .argument("<id>", "the saga id")
    .addOption(writeDb())
    .addOption(tenant())
    .requiredOption("--note <text>", "what you found and did (required; kept in the saga's history)")
    .addOption(new Option("--undone", "you undid what its compensation could not: its open steps (and their calls) become compensated").conflicts("kept"))
    .addOption(new Option("--kept", "the effects stay as they are, knowingly (their calls stay compensation_failed)").conflicts("undone"))
    .option("--by <name>", "who resolves it (default: your user name)")
    .addHelpText("after", `
One of --undone or --kept is required. The saga moves to \`resolved\` with your note; nothing is
called. A step whose call's outcome was unknown keeps that call in needs_human: settle the
call itself in the ledger too.

Examples:
  effectgate saga resolve order-42 --undone --note "refunded P-17 by hand in the payments console"
  effectgate saga resolve order-42 --kept --note "customer agreed to keep the charge as store credit"
${exitCodes}`)
    .action(async (id: string, opts: { db: string; tenant?: string; note: string; undone?: boolean; kept?: boolean; by?: string }) => {
      const { sagaResolve } = await import("./saga.js");
      await sagaResolve(id, opts);
    });
}
