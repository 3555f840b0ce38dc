/**
 * An entry that runs a whole schedule in a world of its own (two gateways, a resumed agent, HTTP
 * clients), as the MCP, LangChain human-in-the-loop and middleware entries do; load.ts loads them.
 */
import type { ScheduleOptions, ScheduleResult } from "../schedule.js";
import type { EntryName } from "./entry.js";

export interface WorldEntry {
  readonly kind: "world";
  readonly name: EntryName;
  run(seed: number, options: ScheduleOptions): Promise<ScheduleResult>;
}
