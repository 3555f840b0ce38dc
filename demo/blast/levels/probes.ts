/** Level 3: the full effectgate gate (ledger claimed before each call, probes for unknown outcomes, recovery after a crash). */
import { gateLevel } from "./gate.js";

export const probes = gateLevel({
  key: "3",
  name: "+ uncertain-completion probes",
  adds: "the effectgate gate: input validated against the schema, every write claimed in a SQLite (or PostgreSQL) ledger before it runs, replays answered from it, unknown outcomes probed with the same key, what no probe can settle sent to a human",
});
