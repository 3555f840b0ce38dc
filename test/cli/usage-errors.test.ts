/**
 * Usage errors of the BUILT command: an unknown command asked for help fails like the unknown
 * command itself (exit 2, "unknown command", the parser's suggestion) instead of printing some
 * other command's help and exiting 0; the parser's messages carry the same `effectgate:` prefix
 * as every other message.
 */
import { beforeAll, describe, expect, it } from "vitest";
import { requireBuild } from "../support/processes.js";
import { runCli } from "./run-cli.js";

beforeAll(() => requireBuild());

describe("an unknown command", () => {
  it.each([
    [["lsdger", "--help"], "lsdger", "ledger"],
    [["lsdger", "-h"], "lsdger", "ledger"],
    [["help", "lsdger"], "lsdger", "ledger"],
    [["ledger", "lss", "--help"], "lss", "ls"],
    [["queue", "shwo", "--help"], "shwo", "show"],
    [["saga", "help", "compensat"], "compensat", "compensate"],
    [["lsdger"], "lsdger", "ledger"],
    [["demo", "crsh", "--help"], "crsh", "crash"],
    [["demo", "crsh"], "crsh", "crash"],
  ])("effectgate %j exits 2: unknown command '%s', did you mean %s", async (args, unknown, suggestion) => {
    const run = await runCli(args);
    expect(run.code).toBe(2);
    expect(run.stdout).toBe("");
    expect(run.stderr).toBe(`effectgate: unknown command '${unknown}'\n(Did you mean ${suggestion}?)\n(add --help for usage)\n`);
  });

  it("a word that resembles no command gets no suggestion, still exit 2", async () => {
    const run = await runCli(["demo", "zzzzzz", "--help"]);
    expect(run.code).toBe(2);
    expect(run.stderr).toBe("effectgate: unknown command 'zzzzzz'\n(add --help for usage)\n");
  });

  it.each([[["--help"]], [["ledger", "--help"]], [["ledger", "ls", "--help"]], [["help", "queue"]], [["queue", "help", "ls"]], [["demo", "--help"]], [["demo", "crash", "--help"]]])(
    "effectgate %j still prints its help and exits 0",
    async (args) => {
      const run = await runCli(args);
      expect(run.stderr).toBe("");
      expect(run.code).toBe(0);
      expect(run.stdout).toMatch(/^Usage: effectgate/);
    },
  );
});

describe("parser errors look like the command's other errors", () => {
  it.each([
    [["ledger", "ls", "--bogus"], "effectgate: unknown option '--bogus'"],
    [["ledger", "ls", "--state", "done"], "effectgate: option '--state <state>' argument 'done' is invalid. Allowed choices are "],
    [["ledger", "ls", "--limit", "0"], "effectgate: option '--limit <n>' argument '0' is invalid. it must be a whole number of at least 1."],
    [["ledger", "show"], "effectgate: missing required argument 'key'"],
    [["demo", "--tasks", "x"], "effectgate: option '--tasks <n>' argument 'x' is invalid."],
  ])("effectgate %j: %s", async (args, message) => {
    const run = await runCli(args);
    expect(run.code).toBe(2);
    expect(run.stderr.startsWith(message), run.stderr).toBe(true);
    expect(run.stderr).not.toMatch(/^error:/m);
  });
});
