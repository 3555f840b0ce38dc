/**
 * What the `effectgate` command lends the demo: its formatting and its usage error, so the
 * demo's output and exit codes match the rest of the CLI while the demo imports only the
 * package's public entries.
 */
export interface DemoHost {
  /** The CLI's own path: the demo starts worker processes with it. */
  readonly cliPath: string;
  /** The "Exit codes:" paragraph every help text ends with. */
  readonly exitCodes: string;
  readonly table: (header: readonly string[], rows: readonly (readonly string[])[]) => string;
  readonly wrap: (text: string, width?: number) => string;
  readonly hanging: (label: string, text: string, labelWidth: number, width?: number) => string;
  /** An error the CLI reports as a usage error (exit 2). */
  readonly usageError: (message: string) => Error;
}
