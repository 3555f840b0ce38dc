/** A demo's scratch directory: made fresh, removed afterwards, also when the run is interrupted (Ctrl-C). */
import { mkdtempSync, rmSync } from "node:fs";
import { join } from "node:path";

export async function withScratchDir<T>(base: string, prefix: string, options: { keep?: boolean }, work: (dir: string) => Promise<T>): Promise<T> {
  const dir = mkdtempSync(join(base, prefix));
  const cleanUp = () => (options.keep ? process.stderr.write(`effectgate demo: kept ${dir}\n`) : rmSync(dir, { recursive: true, force: true }));
  const onSignal = (signal: NodeJS.Signals) => {
    cleanUp();
    process.kill(process.pid, signal);
  };
  process.once("SIGINT", onSignal);
  process.once("SIGTERM", onSignal);
  try {
    return await work(dir);
  } finally {
    process.removeListener("SIGINT", onSignal);
    process.removeListener("SIGTERM", onSignal);
    cleanUp();
  }
}
