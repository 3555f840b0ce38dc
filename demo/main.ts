/**
 * The demo as a program of its own, loaded by `effectgate demo` only when it runs. It imports
 * nothing of effectgate but its public entries ("effectgate", "effectgate/sqlite", …): the demo
 * doubles as proof that the public API is enough to build on.
 */
import { Command } from "commander";
import { addDemoCommands } from "./cli/commands.js";
import type { DemoHost } from "./cli/host.js";

export type { DemoHost } from "./cli/host.js";

/** Runs `effectgate demo <argv…>`; commander's errors (usage, help) are thrown for the CLI to report. */
export async function runDemo(argv: readonly string[], host: DemoHost): Promise<void> {
  // `demo foo` (or `demo foo --help`) is an unknown command, not blast's stray argument: a first
  // word that is not one of the demo's commands is parsed by a tree without a default command,
  // so commander reports it with its suggestion.
  const first = argv[0];
  const commands = demoTree(host, true).commands.flatMap((demo) => demo.commands.map((c) => c.name()));
  const unknown = first !== undefined && !first.startsWith("-") && first !== "help" && !commands.includes(first);
  const program = demoTree(host, !unknown);
  await program.parseAsync(["demo", ...(unknown ? [first] : argv)], { from: "user" });
}

function demoTree(host: DemoHost, blastIsDefault: boolean): Command {
  const program = new Command()
    .name("effectgate")
    .exitOverride()
    .configureOutput({ outputError: (text, write) => write(text.replace(/^error: /, "effectgate: ")) })
    .showHelpAfterError("(add --help for usage)")
    .showSuggestionAfterError(true);
  const demo = program
    .command("demo")
    .description("run demonstrations against simulated services on 127.0.0.1 (nothing outside this machine is touched); without a command, the blast-radius demo")
    .helpOption("-h, --help", "show help for a command")
    .exitOverride();
  addDemoCommands(demo, host, { blastIsDefault });
  return program;
}
