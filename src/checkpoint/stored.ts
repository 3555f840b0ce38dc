/** A checkpoint kept in the ledger's own store, next to the calls it refers to. */
import type { Ledger } from "../contracts/calls.js";
import { decodeCheckpoint, encodeCheckpoint, type AgentCheckpoint, type CheckpointStore } from "./codec.js";

export function ledgerCheckpoint(ledger: Ledger, where: { tenant: string; id: string }): CheckpointStore {
  const location = `${ledger.location} checkpoint ${where.tenant}/${where.id}`;
  return {
    location,
    async load() {
      const text = await ledger.getCheckpoint(where.tenant, where.id);
      return text === undefined ? undefined : decodeCheckpoint(text, location);
    },
    async save(checkpoint: AgentCheckpoint) {
      await ledger.putCheckpoint(where.tenant, where.id, encodeCheckpoint(checkpoint));
    },
  };
}
