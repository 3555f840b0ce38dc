/** Level 0: every failed or timed-out call is tried again, up to 3 times, whatever the tool does. */
import { handRolled } from "./hand-rolled.js";
import type { Level } from "./types.js";

export const naiveRetry: Level = {
  key: "0",
  name: "naive uniform retry",
  adds: "every call that fails or times out is sent again (3 tries), writes included; nothing is recorded, a resumed worker re-runs its pending calls",
  available: async () => ({ available: true }),
  open: async (ctx) => handRolled(ctx, { attempts: 3, retry: () => true, sendKey: false, jsonLedger: false }),
};
