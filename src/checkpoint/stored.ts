/** A checkpoint kept in the ledger's own store, next to the calls it refers to. */
import type { Stores } from "../contracts/stores.js";
import { decodeCheckpoint, encodeCheckpoint } from "./codec.js";
import { type AgentCheckpoint, type CheckpointStore } from "../contracts/checkpoints.js";

export function ledgerCheckpoint(ledger: Stores, where: { tenant: string; id: string }): CheckpointStore {
  const location = `${ledger.location} checkpoint ${where.tenant}/${where.id}`;
  return {
    location,
    async load() {
      const text = await ledger.checkpoints.get(where.tenant, where.id);
      return text === undefined ? undefined : decodeCheckpoint(text, location);
    },
    async save(checkpoint: AgentCheckpoint) {
      await ledger.checkpoints.put(where.tenant, where.id, encodeCheckpoint(checkpoint));
    },
  };
}
