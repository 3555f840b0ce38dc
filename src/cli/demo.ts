/** `effectgate demo crash`: runs the crash demo and prints its table (or JSON). */
import { CRASH_WAYS, CRASH_INTRO, runCrashDemo, type CrashScenario } from "../demo/crash.js";
import { table, wrap } from "./format.js";

export async function demoCrash(options: { json: boolean; workerCommand: readonly [string, ...string[]] }): Promise<void> {
  const started = Date.now();
  const scenarios = await runCrashDemo({
    workerCommand: options.workerCommand,
    ...(options.json ? {} : { onProgress: (message: string) => process.stderr.write(`  ${message}\n`) }),
  });
  if (options.json) {
    process.stdout.write(`${JSON.stringify({ scenarios }, null, 2)}\n`);
    return;
  }
  process.stdout.write(
    `${wrap(CRASH_INTRO)}\n\n${crashTable(scenarios)}\n\n${explain(scenarios)}\n\n` +
      `(${Date.now() - started} ms; ticket counts come from each ticket service; temp files removed)\n`,
  );
}


export function crashTable(scenarios: readonly CrashScenario[]): string {
  const rows = scenarios.map((s) => [
    CRASH_WAYS.find((w) => w.name === s.name)?.label ?? s.name,
    String(s.ticketsCreated),
    String(s.duplicates),
    s.resultTicketId ?? "(an error)",
  ]);
  return table(["way", "tickets created", "duplicates", "agent got"], rows);
}

function explain(scenarios: readonly CrashScenario[]): string {
  return scenarios
    .map((s) => {
      const way = CRASH_WAYS.find((w) => w.name === s.name);
      return `- ${wrap(`${way?.label ?? s.name}: ${way?.how ?? ""}.`, 98).replace(/\n/g, "\n  ")}`;
    })
    .join("\n");
}
