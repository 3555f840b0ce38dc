/** Level 1: reads are retried, writes and destructive calls are not (a timeout is reported as a failure). */
import { handRolled, transient } from "./hand-rolled.js";
import type { Level } from "./types.js";

export const effectClasses: Level = {
  key: "1",
  name: "+ effect classes",
  adds: "tools are classed read / write / destructive: reads are retried, writes and destructive calls are sent once and a timeout counts as a failure",
  available: async () => ({ available: true }),
  open: async (ctx) => handRolled(ctx, {
    attempts: 3,
    retry: (tool, error) => tool.effect === "read" && transient(error),
    sendKey: false,
    jsonLedger: false,
  }),
};
