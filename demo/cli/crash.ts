/** `effectgate demo crash`: runs the crash demo and prints its table (or JSON). */
import { CRASH_WAYS, CRASH_INTRO, runCrashDemo, type CrashScenario } from "../crash.js";
import type { DemoHost } from "./host.js";

export async function demoCrash(options: { json: boolean; workerCommand: readonly [string, ...string[]] }, host: DemoHost): Promise<void> {
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
    `${host.wrap(CRASH_INTRO)}\n\n${crashTable(scenarios, host)}\n\n${explain(scenarios, host)}\n\n` +
      `(${Date.now() - started} ms; ticket counts come from each ticket service; temp files removed)\n`,
  );
}


export function crashTable(scenarios: readonly CrashScenario[], host: DemoHost): string {
  const rows = scenarios.map((s) => [
    CRASH_WAYS.find((w) => w.name === s.name)?.label ?? s.name,
    String(s.ticketsCreated),
    String(s.duplicates),
    s.resultTicketId ?? "(an error)",
  ]);
  return host.table(["way", "tickets created", "duplicates", "agent got"], rows);
}

function explain(scenarios: readonly CrashScenario[], host: DemoHost): string {
  return scenarios
    .map((s) => {
      const way = CRASH_WAYS.find((w) => w.name === s.name);
      return `- ${host.wrap(`${way?.label ?? s.name}: ${way?.how ?? ""}.`, 98).replace(/\n/g, "\n  ")}`;
    })
    .join("\n");
}
