/** `effectgate serve` as a user runs it: the built command in a child process, stopped with SIGTERM. */
import { CLI } from "../cli/run-cli.js";
import { startWorker, type Worker } from "../support/processes.js";

export interface Served {
  readonly url: string;
  /** The token, when this start printed it (first start only). */
  readonly token: string | undefined;
  readonly worker: Worker;
  /** SIGTERM, then the exit: code 0 when it shut down cleanly. */
  stop(): Promise<{ code: number | null; stdout: string; stderr: string }>;
}

export async function serve(args: readonly string[]): Promise<Served> {
  const worker = startWorker(CLI, ["serve", "--port", "0", ...args]);
  // Every waiter first: the lines arrive together, and a waiter sees only lines after it.
  const listening = worker.line((l) => l.startsWith("listening on "));
  let printed: string | undefined;
  // The link line comes before the API line, so it has been seen once that one has.
  worker.line((l) => l.startsWith("  http") && l.includes("#token=")).then((l) => (printed = l), () => undefined);
  const api = worker.line((l) => l.startsWith("API: "));
  const url = (await listening).slice("listening on ".length).trim();
  await api;
  const token = printed === undefined ? undefined : decodeURIComponent(printed.slice(printed.indexOf("#token=") + 7).trim());
  return {
    url, token, worker,
    async stop() {
      worker.child.kill("SIGTERM");
      return worker.exited;
    },
  };
}
