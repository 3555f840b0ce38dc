/** The memory store's checkpoints: one string per (tenant, id). */
import type { CheckpointRecords } from "../../contracts/checkpoints.js";
import { recordId } from "./ids.js";

export function memoryCheckpoints(): CheckpointRecords {
  const saved = new Map<string, string>();
  const id = (tenant: string, checkpointId: string) => recordId(tenant, checkpointId);
  return {
    async put(tenant, checkpointId, data) {
      saved.set(id(tenant, checkpointId), data);
    },
    async get(tenant, checkpointId) {
      return saved.get(id(tenant, checkpointId));
    },
  };
}
