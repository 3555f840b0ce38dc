/**
 * `effectgate lsdger --help` must fail as `effectgate lsdger` does ("unknown command", with the
 * parser's suggestion, exit 2) instead of printing the top-level help and exiting 0: commander
 * shows the help it was asked for before it looks at the command's name.
 */
import type { Command } from "commander";

const HELP_FLAGS = new Set(["-h", "--help"]);

/**
 * When `args` ask for help (a help flag, or the `help` command) about a command that does not
 * exist, returns them without the help request, so that parsing them reports the unknown
 * command; otherwise undefined. Walks the command groups (ledger, queue, …) word by word and
 * stops at the first command that takes arguments of its own.
 */
export function unknownCommandAskedForHelp(program: Command, args: readonly string[]): string[] | undefined {
  let command = program;
  let asksHelp = args.some((a) => HELP_FLAGS.has(a));
  for (const arg of args) {
    if (arg.startsWith("-")) continue;
    if (command.commands.length === 0) return undefined;
    if (arg === "help") {
      asksHelp = true;
      continue;
    }
    const sub = command.commands.find((c) => c.name() === arg || c.aliases().includes(arg));
    if (!sub) return asksHelp ? args.filter((a) => !HELP_FLAGS.has(a) && a !== "help") : undefined;
    command = sub;
  }
  return undefined;
}
