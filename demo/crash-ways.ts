/** The three ways the crash demo runs (data only, so the CLI can describe them without loading the demo). */
export const CRASH_WAYS = [
  {
    name: "no-ledger",
    label: "no ledger (checkpoint only)",
    how: "the loop keeps only its conversation checkpoint; the tool_use is still pending on resume, so the tool runs again",
  },
  {
    name: "ledger-after-execution",
    label: "ledger written after execution",
    how: "a JSON file {tool_use_id: result} is written after the tool returns; the kill lands before the write, so the id is missing on resume and the tool runs again",
  },
  {
    name: "effectgate",
    label: "effectgate",
    how: "the call is claimed in the ledger before the tool runs; on resume the holder is dead, the probe finds the ticket by its idempotency key, and that ticket is the result",
  },
] as const;

export type CrashWayName = (typeof CRASH_WAYS)[number]["name"];
export function isCrashWayName(value: string): value is CrashWayName {
  return CRASH_WAYS.some((w) => w.name === value);
}

export const CRASH_INTRO =
  "An agent handles \"customer reports a fault\" by calling create_ticket. Its process is killed with a real SIGKILL " +
  "right after the ticket service created the ticket and before the result was recorded, then a fresh process resumes " +
  "the task. Each way runs against its own freshly started ticket service; the counts are the tickets that service really created.";
