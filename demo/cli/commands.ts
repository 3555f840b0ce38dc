/**
 * The `demo` command and its subcommands: `blast` (the default), `crash`, and the hidden worker
 * commands their child processes run. The demo's heavy modules load only when one runs.
 */
import { type Command, InvalidArgumentError, Option } from "commander";
import { CRASH_INTRO, CRASH_WAYS, isCrashWayName } from "../crash-ways.js";
import type { DemoHost } from "./host.js";

// Repeated from demo/blast (runner.ts, levels/index.ts) so that --help loads none of the demo; test/demo checks they agree.
export const HELP_DEFAULT_TASKS = 120;
export const HELP_DEFAULT_SEED = 7;
export const LEVEL_KEYS = ["0", "1", "2", "3", "4", "5", "6", "ref"] as const;

function wholeNumber(min: number) {
  return (value: string): number => {
    const n = Number(value);
    if (!/^\d+$/.test(value.trim()) || !Number.isSafeInteger(n) || n < min) throw new InvalidArgumentError(`it must be a whole number of at least ${min}.`);
    return n;
  };
}

function levelList(value: string): string[] {
  const keys = value.split(",").map((k) => k.trim()).filter((k) => k !== "");
  const bad = keys.filter((k) => !(LEVEL_KEYS as readonly string[]).includes(k));
  if (keys.length === 0 || bad.length > 0) throw new InvalidArgumentError(`levels are ${LEVEL_KEYS.join(", ")} (comma-separated).`);
  return keys;
}

/** The blast demo's help: shown by `effectgate demo --help` (the default command) and `effectgate demo blast --help`. */
function blastHelp(exitCodes: string): string {
  return `
Every level runs the same seeded workload (support tickets and e-mails, card charges, orders run as
reserve → charge → ship, draft deletions) against four simulated services on 127.0.0.1 (ticketing,
payments, mail, storage), with the same injected faults: agent workers SIGKILLed mid-task and
resumed from their checkpoint, connections cut, replies lost after the effect, requests completing
after the client's timeout, messages delivered twice, two workers on one task, hallucinated
parameters, a runaway loop of deletions, refused shipments and refused compensations.

The numbers are what the services actually applied, never what the agent believes.

Columns (exact definitions in docs/demo.md): duplicates, lost, half-done, wrong params,
found/present (discrepancies), to a human, over quota, overhead p50 / p99, wall.

The default size (${HELP_DEFAULT_TASKS} tasks) takes well under a minute on a 2-core machine; a progress bar
shows on stderr when it is a terminal. Temp files go to the system temp directory and are removed;
with --keep DIR the ledgers of the levels that have one (3-6) are kept as DIR/level-<n>/ledger.db,
and the run ends with the commands that inspect them (the human queue, the calls a person must
settle, sagas, breakers). --keep never overwrites a ledger: give a new or empty directory.

Examples:
  effectgate demo                               the table, plus .effectgate/demo/blast-radius.{json,svg}
  effectgate demo --keep .effectgate/demo-ledgers   the same, and keep the ledgers to inspect
  effectgate demo --tasks 400 --seed 42         a bigger run with another seed
  effectgate demo --json > blast.json           the figures as JSON
  effectgate demo --store postgres --pg postgres://localhost/effectgate_demo
${exitCodes}`;
}

/** The blast demo's options, on `demo blast` (and shown in `demo --help`). */
function blastCommand(demo: Command, host: DemoHost, options: { isDefault: boolean }): Command {
  const { cliPath } = host;
  return demo
    .command("blast", { isDefault: options.isDefault })
    .description("the main demo: a support-and-billing agent's workload under injected faults, once per protection level; prints the blast-radius table (the default `effectgate demo`)")
    .option("--tasks <n>", "agent tasks in the workload", wholeNumber(1), HELP_DEFAULT_TASKS)
    .option("--seed <s>", "seed of the workload and every injected fault: the same seed gives the same counts", wholeNumber(0), HELP_DEFAULT_SEED)
    .addOption(new Option("--store <store>", "the ledger of the effectgate levels").choices(["sqlite", "postgres"]).default("sqlite"))
    .option("--pg <url>", "PostgreSQL connection string for --store postgres (default: $EFFECTGATE_PG_URL)")
    .option("--levels <keys>", `only these levels, comma-separated (${LEVEL_KEYS.join(", ")})`, levelList)
    .option("--json", 'print {"seed","tasks","levels":[{"level","name","duplicates","lost","halfDone","humanQueue","overQuota",…}]} on stdout instead of the table')
    .option("--out <dir>", "write blast-radius.json and blast-radius.svg here (default without --json: .effectgate/demo)")
    .option("--keep <dir>", "keep each level's ledger as DIR/level-<n>/ledger.db (with --store postgres: keep its schema) and print the commands that inspect them")
    .addHelpText("after", blastHelp(host.exitCodes))
    .action(async (opts: { tasks: number; seed: number; store: "sqlite" | "postgres"; pg?: string; levels?: string[]; json?: boolean; out?: string; keep?: string }) => {
      if (opts.pg !== undefined && opts.store !== "postgres") throw host.usageError("--pg is only used with --store postgres");
      const { demoBlast } = await import("./blast.js");
      await demoBlast({
        tasks: opts.tasks, seed: opts.seed, store: opts.store, json: opts.json === true,
        ...(opts.pg === undefined ? {} : { pg: opts.pg }),
        ...(opts.out === undefined ? {} : { out: opts.out }),
        ...(opts.keep === undefined ? {} : { keep: opts.keep }),
        ...(opts.levels === undefined ? {} : { levels: opts.levels }),
        workerCommand: [process.execPath, cliPath, "demo", "blast-worker"],
      }, host);
    });
}

/**
 * The demo's commands. `blast` is the default (`effectgate demo [options]`), so `effectgate demo
 * --help` also lists its options. With `blastIsDefault: false` the same tree reports a word
 * that is not one of its commands as an unknown command (see demo/main.ts).
 */
export function addDemoCommands(demo: Command, host: DemoHost, options: { blastIsDefault?: boolean } = {}): void {
  const { cliPath, exitCodes, wrap, hanging } = host;
  const blast = blastCommand(demo, host, { isDefault: options.blastIsDefault ?? true });
  demo.addHelpText("after", () => {
    // The default command's options, as `demo blast --help` prints them (without its usage line and description).
    const options = blast.helpInformation().split("\n");
    const from = options.findIndex((line) => line.startsWith("Options:"));
    return `
Without a command, \`effectgate demo [options]\` runs the blast-radius demo, the same as
\`effectgate demo blast [options]\`. Its options:
${options.slice(from + 1).join("\n").trimEnd()}
${blastHelp(exitCodes)}`;
  });

  demo
    .command("blast-worker", { hidden: true })
    .description("internal: one agent worker process of `demo blast`")
    .requiredOption("--dir <dir>", "the level's directory (config.json)")
    .requiredOption("--role <role>", "steady, or crash-<n>")
    .action(async (opts: { dir: string; role: string }) => {
      const { isWorkerRole, runBlastWorker } = await import("../blast/worker.js");
      if (!isWorkerRole(opts.role)) throw host.usageError(`unknown worker role ${JSON.stringify(opts.role)}`);
      await runBlastWorker({ dir: opts.dir, role: opts.role });
    });

  demo
    .command("crash")
    .description("kill an agent right after it created a support ticket, resume it, and count the tickets: without a ledger, with a ledger written after execution, and with effectgate")
    .option("--json", 'print {"scenarios":[{"name","ticketsCreated","duplicates","resultTicketId"}]} instead of a table')
    .addHelpText("after", `
${wrap(CRASH_INTRO, 96)}

Ways:
${CRASH_WAYS.map((w) => hanging(w.name, w.how, 24)).join("\n")}

Output columns: way, tickets created (counted by the ticket service), duplicates (tickets
beyond the one the report called for), agent got (the ticket id the resumed agent received).
Takes a few seconds; temp files go to the system temp directory and are removed afterwards.
${exitCodes}`)
    .action(async (opts: { json?: boolean }) => {
      const { demoCrash } = await import("./crash.js");
      await demoCrash({ json: opts.json === true, workerCommand: [process.execPath, cliPath, "demo", "crash-worker"] }, host);
    });

  demo
    .command("crash-worker", { hidden: true })
    .description("internal: one agent process of `demo crash`")
    .requiredOption("--way <way>", "which way to run")
    .addOption(new Option("--phase <phase>", "crash or resume").choices(["crash", "resume"]).makeOptionMandatory())
    .requiredOption("--service <url>", "the ticket service URL")
    .requiredOption("--dir <dir>", "this way's temp directory")
    .action(async (opts: { way: string; phase: "crash" | "resume"; service: string; dir: string }) => {
      if (!isCrashWayName(opts.way)) throw host.usageError(`unknown way ${JSON.stringify(opts.way)}; one of ${CRASH_WAYS.map((w) => w.name).join(", ")}`);
      const { runCrashWorker } = await import("../crash.js");
      await runCrashWorker({ way: opts.way, phase: opts.phase, service: opts.service, dir: opts.dir });
    });
}
