/** Command-line flags of the benchmarks. */

/** The value of `--name=N`, a positive integer, or `fallback` when absent; anything else ends the run with exit code 2. */
export function positiveIntFlag(name: string, fallback: number, argv: readonly string[] = process.argv.slice(2)): number {
  const arg = argv.find((a) => a.startsWith(`--${name}=`));
  const value = arg === undefined ? fallback : Number(arg.slice(name.length + 3));
  if (!Number.isInteger(value) || value < 1) {
    process.stderr.write(`--${name} must be a positive integer\n`);
    process.exit(2);
  }
  return value;
}
