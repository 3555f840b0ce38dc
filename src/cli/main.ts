#!/usr/bin/env node
/**
 * The `effectgate` command. Exit codes: 0 success; 1 the command could not do its job
 * (unknown key, damaged or unavailable ledger, demo failure); 2 usage error (unknown command
 * or option, bad value, missing ledger file, ambiguous key).
 */
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { Command, CommanderError, InvalidArgumentError, Option } from "commander";
import { isEffectgateError } from "../core/errors.js";
import { DEFAULT_SERVER_LIMITS } from "../core/local-server.js";
import { CALL_STATES, type CallState } from "../core/states.js";
import { DEFAULT_LEDGER_PATH } from "./defaults.js";
import { CliError, EXIT_FAILURE, EXIT_OK, EXIT_USAGE } from "./errors.js";
import { hanging, table, wrap } from "./format.js";
import { addGovernanceCommands } from "./governance-commands.js";
import { addMcpCommand } from "./mcp-command.js";
import { addReconcileCommands } from "./reconcile-commands.js";
import { addSagaCommands } from "./saga-commands.js";
import type { ServeOptions } from "./serve.js";
import { unknownCommandAskedForHelp } from "./unknown-command.js";

// The commands' modules (SQLite driver, gate, demo) load only when a command runs, so --help stays fast.

const CLI_PATH = fileURLToPath(import.meta.url);

function version(): string {
  try {
    const pkg = JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as { version?: unknown };
    return typeof pkg.version === "string" ? pkg.version : "unknown";
  } catch {
    return "unknown";
  }
}

function positiveInt(value: string): number {
  const n = Number(value);
  if (!/^\d+$/.test(value.trim()) || !Number.isSafeInteger(n) || n < 1) throw new InvalidArgumentError("it must be a whole number of at least 1.");
  return n;
}

function port(value: string): number {
  const n = Number(value);
  if (!/^\d+$/.test(value.trim()) || n > 65535) throw new InvalidArgumentError("it must be a port number from 0 to 65535.");
  return n;
}

const dbOption = () =>
  new Option("--db <path>", "the ledger file (SQLite) to read; it is never created or changed by this command")
    .env("EFFECTGATE_DB")
    .default(DEFAULT_LEDGER_PATH);

const EXIT_CODES = `
Exit codes:
  0  success
  1  the command could not do its job: unknown key, damaged or unavailable ledger, demo failure
  2  usage error: unknown command or option, bad option value, missing ledger file, ambiguous key`;

function buildProgram(): Command {
  const program = new Command();
  program
    .enablePositionalOptions()
    .name("effectgate")
    .description(
      "effectgate makes the side effects of AI-agent tool calls (tickets, charges, e-mails…) happen effectively once " +
        "through crashes, retries and replays: every write call is recorded in a ledger before it runs. " +
        "This command inspects and operates that ledger (approvals, kill switch, breakers, the human queue, sagas, " +
        "reconciliation) and runs demonstrations.",
    )
    .version(version(), "-V, --version", "print the effectgate version")
    .helpOption("-h, --help", "show help for a command")
    .helpCommand("help [command]", "show help for a command")
    .exitOverride()
    .configureOutput({ outputError: (text, write) => write(parserError(text)) })
    .showHelpAfterError("(add --help for usage)")
    .showSuggestionAfterError(true)
    .addHelpText("after", `
Examples:
  effectgate ledger ls                          list the calls in .effectgate/ledger.db
  effectgate ledger ls --state needs_human      calls a person has to settle
  effectgate ledger show toolu_01ABC            everything recorded about one call
  effectgate saga ls --state compensation_failed  sagas whose rollback a person must settle
  effectgate demo                               the blast-radius table: duplicates, lost effects… per protection level
  effectgate demo crash                         see a crash duplicate a ticket, and effectgate prevent it
  effectgate serve                              the operator console on http://127.0.0.1:4820/ (token printed on first start)
${EXIT_CODES}`);

  // ---- ledger -------------------------------------------------------------------------------
  const ledger = program
    .command("ledger")
    .description("inspect the effects ledger: one record per tool call (its key, state, input, result), read-only")
    .addHelpText("after", `
The ledger is the SQLite file the gate writes (default ${DEFAULT_LEDGER_PATH}, relative to the
current directory; set --db or EFFECTGATE_DB to read another). These commands never change it;
a missing file is an error, never an empty list, and the file is checked whole first: a damaged
one, or one that is not a ledger, is refused (exit 1), never shown as if all were well.

Call states: ${CALL_STATES.join(", ")}.`);

  ledger
    .command("ls")
    .description("list recorded tool calls as a table (oldest first), optionally filtered")
    .addOption(dbOption())
    .option("--tenant <tenant>", "only calls made for this tenant (customer, team or user)")
    .addOption(new Option("--state <state>", "only calls in this state").choices(CALL_STATES))
    .option("--tool <name>", "only calls of this tool, e.g. create_ticket")
    .option("--limit <n>", "show at most n calls", positiveInt, 100)
    .option("--json", "print an array of full call records as JSON instead of a table")
    .addHelpText("after", `
Columns: KEY (the idempotency key, usually the model's tool_use id), TENANT, TOOL, EFFECT
(read | write | destructive), STATE, ATTEMPTS (times the tool was started), UPDATED (UTC),
RESULT / ERROR (the stored result or why the call failed or is stuck, shortened).

States:
  in_progress          claimed by a worker, the tool may be running; a dead worker's call is probed on resume
  completed            ran; its stored result is replayed, nothing runs again
  failed               failed definitely, no effect happened
  uncertain            outcome unknown (timeout, crash, lost reply); will be probed, never blindly re-run
  needs_human          effectgate cannot tell whether the effect happened: check the downstream system
  compensated          completed, then undone
  compensation_failed  completed, undoing it failed: look at it

Examples:
  effectgate ledger ls --db /var/lib/agent/ledger.db
  effectgate ledger ls --tenant acme --state needs_human
  effectgate ledger ls --tool create_ticket --limit 20 --json
${EXIT_CODES}`)
    .action(async (opts: { db: string; tenant?: string; state?: CallState; tool?: string; limit: number; json?: boolean }) => {
      const { ledgerLs } = await import("./ledger.js");
      await ledgerLs({ ...opts, json: opts.json === true });
    });

  ledger
    .command("show")
    .description("show everything recorded about one call: input, result, error, owner, lease, timestamps")
    .argument("<key>", "the call's idempotency key, as listed by `effectgate ledger ls` (usually the tool_use id)")
    .addOption(dbOption())
    .option("--tenant <tenant>", "the tenant the call belongs to; needed only when the key exists in several tenants")
    .option("--json", "print the full record as JSON")
    .addHelpText("after", `
Without --tenant, the key is looked up in every tenant: if exactly one has it, that call is
shown; if several do, the command names them and asks for --tenant (exit 2). An unknown key
exits with 1.

Examples:
  effectgate ledger show toolu_01ABC
  effectgate ledger show toolu_01ABC --tenant acme --json
${EXIT_CODES}`)
    .action(async (key: string, opts: { db: string; tenant?: string; json?: boolean }) => {
      const { ledgerShow } = await import("./ledger.js");
      await ledgerShow(key, { ...opts, json: opts.json === true });
    });

  // ---- kill, breaker, approvals (governance) --------------------------------------------------
  addGovernanceCommands(program, EXIT_CODES);

  // ---- reconcile, queue ---------------------------------------------------------------------
  addReconcileCommands(program, EXIT_CODES);

  // ---- saga ---------------------------------------------------------------------------------
  addSagaCommands(program, EXIT_CODES);

  // ---- migrate ------------------------------------------------------------------------------
  program
    .command("migrate")
    .description("create the ledger, or bring its schema up to this version, ahead of the agents (they also do it on first use)")
    .addOption(new Option("--db <path>", "the SQLite ledger file to create or migrate").env("EFFECTGATE_DB").default(DEFAULT_LEDGER_PATH))
    .addHelpText("after", `
With --pg URL (or EFFECTGATE_PG_URL) the PostgreSQL ledger in --pg-schema is migrated instead.
Migrations are append-only; a ledger written by a newer effectgate is refused by name. An
existing file is checked first and refused untouched when it is damaged, empty (0 bytes) or
another program's database; the command says whether it created, migrated or left the ledger.
${EXIT_CODES}`)
    .action(async (opts: { db: string }) => {
      const { migrateLedger } = await import("./migrate.js");
      await migrateLedger(opts);
    });

  // ---- mcp ----------------------------------------------------------------------------------
  addMcpCommand(program, EXIT_CODES);
  // ---- serve --------------------------------------------------------------------------------
  program
    .command("serve")
    .description("serve the operator console and its JSON API on this ledger: approvals, the human queue, ledger search, sagas, kill switch and breakers")
    .addOption(new Option("--db <path>", "the SQLite ledger file to serve (never created)").env("EFFECTGATE_DB").default(DEFAULT_LEDGER_PATH))
    .option("--port <n>", "the port to listen on (0: any free port)", port, 4820)
    .option("--host <address>", "the address to bind", "127.0.0.1")
    .option("--allow-remote", "allow binding an address other machines can reach (put TLS in front)")
    .option("--token-file <path>", "where the bearer token is kept (default: console-token beside the ledger file)")
    .option("--poll-ms <n>", "how often the ledger is checked for live updates while a browser is open", positiveInt, 1000)
    .option("--headers-timeout-ms <ms>", "how long a client may take to send a request's headers", positiveInt, DEFAULT_SERVER_LIMITS.headersTimeoutMs)
    .option("--request-timeout-ms <ms>", "how long a client may take to send a whole request, headers and body; a live-update stream is not bound by it", positiveInt, DEFAULT_SERVER_LIMITS.requestTimeoutMs)
    .option("--keep-alive-timeout-ms <ms>", "how long an idle kept-alive connection stays open", positiveInt, DEFAULT_SERVER_LIMITS.keepAliveTimeoutMs)
    .option("--max-connections <n>", "connections open at once; one more is closed at once", positiveInt, DEFAULT_SERVER_LIMITS.maxConnections)
    .option("--max-event-streams <n>", "live-update streams open at once, one per console tab; one more gets 503 with Retry-After", positiveInt, 32)
    .addHelpText("after", `
The console binds 127.0.0.1 unless --host says otherwise, and refuses an address other machines
can reach without --allow-remote. Every API request needs the bearer token: on first start a
token is made, saved with mode 0600 beside the ledger (or in --token-file) and printed once,
inside the link that opens the console. A token file others can read is refused.

Limits: a client that sends its headers or its request slower than the timeouts above gets 408
and is disconnected; connections past --max-connections are closed; a request body over 64 KiB
gets 413, JSON nested deeper than 1000 levels 400.

The console: approvals inbox with each call's dry-run preview and digest, the human queue with
everything known about each item, ledger search, saga timelines, kill switch and breakers, the
blast-radius chart; it updates live. The API is documented in docs/console.md and described
at /api/openapi.json. Changes are recorded as made by "<your user name> (console)" unless a
request names someone ("by").

Examples:
  effectgate serve                                   console for .effectgate/ledger.db on http://127.0.0.1:4820/
  effectgate serve --db /var/lib/agent/ledger.db --port 9000
  effectgate serve --pg postgres://ops@db/agents --token-file ~/.config/effectgate/token
  curl -H "Authorization: Bearer $(cat .effectgate/console-token)" http://127.0.0.1:4820/api/approvals
${EXIT_CODES}`)
    .action(async (opts: Omit<ServeOptions, "allowRemote"> & { allowRemote?: boolean }) => {
      const { serve } = await import("./serve.js");
      await serve({ ...opts, allowRemote: opts.allowRemote === true });
    });

  addPostgresOptions(program);

  // ---- demo ---------------------------------------------------------------------------------
  // The demo is a program of its own (demo/ in the repository, dist/demo in the package), loaded
  // only when it runs; it parses its own options and prints its own help.
  program
    .command("demo")
    .description("run demonstrations against simulated services on 127.0.0.1 (nothing outside this machine is touched); without a subcommand, the blast-radius demo (see `effectgate demo --help`)")
    .helpOption(false)
    .allowUnknownOption()
    .allowExcessArguments()
    .passThroughOptions()
    .action(async (_opts: unknown, command: Command) => {
      const { runDemo } = await loadDemo();
      await runDemo(command.args, {
        cliPath: CLI_PATH, exitCodes: EXIT_CODES, table, wrap, hanging,
        usageError: (message) => new CliError(message, EXIT_USAGE),
      });
    });

  return program;
}

/** What `demo/main.ts` exports; declared here because the demo is built after, and apart from, the CLI. */
interface DemoModule {
  readonly runDemo: (argv: readonly string[], host: {
    cliPath: string; exitCodes: string; table: typeof table; wrap: typeof wrap; hanging: typeof hanging; usageError: (message: string) => Error;
  }) => Promise<void>;
}

async function loadDemo(): Promise<DemoModule> {
  const where = new URL("../demo/main.js", import.meta.url);
  try {
    return (await import(where.href)) as DemoModule;
  } catch (err) {
    throw new CliError(`the demo is not part of this build (${fileURLToPath(where)} could not be loaded: ${err instanceof Error ? err.message : String(err)}); run \`npm run build\` in a clone of effectgate`, EXIT_FAILURE);
  }
}

function allCommands(command: Command): Command[] {
  return [command, ...command.commands.flatMap(allCommands)];
}

/**
 * Every command that reads or changes a ledger file (it has --db) can use a PostgreSQL ledger
 * instead. Call it after the commands are added, so a command added later gets the same options
 * and the same choice of ledger (made before its action runs, see ledger-target.ts).
 */
function addPostgresOptions(program: Command): void {
  for (const command of allCommands(program)) {
    if (!command.options.some((o) => o.long === "--db")) continue;
    command
      .addOption(new Option("--pg <url>", "use the PostgreSQL ledger at this postgres:// URL instead of a file (needs `npm install pg`; the password is never printed). " +
        "A flag beats the environment: --db beats EFFECTGATE_PG_URL, --pg beats EFFECTGATE_DB; --db with --pg is a usage error").env("EFFECTGATE_PG_URL"))
      .addOption(new Option("--pg-schema <name>", "the PostgreSQL schema holding the ledger (with --pg)").default("effectgate"));
  }
  program.hook("preAction", async (_program, action) => {
    if (!action.options.some((o) => o.long === "--db")) return;
    const { chooseLedger } = await import("./open-ledger.js");
    await chooseLedger(action);
  });
}

/** Commander's "error: …" messages, in the form of every other message of the command. */
function parserError(text: string): string {
  return text.replace(/^error: /, "effectgate: ");
}

async function main(argv: readonly string[]): Promise<number> {
  const program = buildProgram();
  try {
    const args = argv.slice(2);
    await program.parseAsync(unknownCommandAskedForHelp(program, args) ?? args, { from: "user" });
    return EXIT_OK;
  } catch (err) {
    if (err instanceof CommanderError) {
      // Commander already printed the message (and the usage hint) on stderr.
      if (err.code === "commander.helpDisplayed" || err.code === "commander.version") return EXIT_OK;
      if (err.code === "commander.help") return err.exitCode === 0 ? EXIT_OK : EXIT_USAGE;
      return EXIT_USAGE;
    }
    if (err instanceof CliError) {
      process.stderr.write(`effectgate: ${err.message}\n`);
      return err.exitCode;
    }
    if (isEffectgateError(err)) {
      process.stderr.write(`effectgate: ${err.message}\n`);
      return EXIT_FAILURE;
    }
    process.stderr.write(`effectgate: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    return EXIT_FAILURE;
  }
}

// `effectgate ledger ls | head`: a reader that stops early is not an error.
process.stdout.on("error", (err: NodeJS.ErrnoException) => {
  if (err.code === "EPIPE") process.exit(process.exitCode ?? EXIT_OK);
  throw err;
});
process.exitCode = await main(process.argv);
