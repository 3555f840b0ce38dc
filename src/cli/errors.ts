/**
 * Exit codes of the `effectgate` command (also listed in `effectgate --help`):
 *   0  success
 *   1  the command ran but could not do its job: unknown key, damaged or unavailable ledger, demo failure
 *   2  usage error: unknown command or option, bad option value, missing ledger file, ambiguous key
 */
export const EXIT_OK = 0;
export const EXIT_FAILURE = 1;
export const EXIT_USAGE = 2;

/** An error the CLI reports as a plain message (no stack) with a chosen exit code. */
export class CliError extends Error {
  readonly exitCode: number;

  constructor(message: string, exitCode: number = EXIT_FAILURE) {
    super(message);
    this.name = "CliError";
    this.exitCode = exitCode;
  }
}
