/**
 * A checkpoint in one file, replaced atomically: temp file + fsync + rename + directory fsync.
 * With `durability: "process"` the two fsyncs are skipped: the file still never holds a torn
 * checkpoint and survives the process being killed, but not the machine losing power.
 */
import { randomBytes } from "node:crypto";
import { closeSync, fsyncSync, mkdirSync, openSync, readFileSync, renameSync, writeSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { EffectgateError, messageOf } from "../core/errors.js";
import { decodeCheckpoint, encodeCheckpoint } from "./codec.js";
import { type AgentCheckpoint, type CheckpointStore } from "../contracts/checkpoints.js";

export interface FileCheckpointOptions {
  /** "fsync" (default): survives power loss. "process": survives a killed process only, faster. */
  readonly durability?: "fsync" | "process";
}

export function fileCheckpoint(path: string, options: FileCheckpointOptions = {}): CheckpointStore {
  const file = resolve(path);
  const sync = options.durability !== "process";
  return {
    location: file,
    async load() {
      let text: string;
      try {
        text = readFileSync(file, "utf8");
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === "ENOENT") return undefined;
        throw new EffectgateError("EG_CHECKPOINT_CORRUPT", `cannot read the checkpoint ${file}: ${messageOf(err)}`, { cause: err });
      }
      return decodeCheckpoint(text, file);
    },
    async save(checkpoint: AgentCheckpoint) {
      const dir = dirname(file);
      mkdirSync(dir, { recursive: true });
      const temp = `${file}.${process.pid}.${randomBytes(4).toString("hex")}.tmp`;
      const fd = openSync(temp, "w", 0o600);
      try {
        writeSync(fd, encodeCheckpoint(checkpoint));
        if (sync) fsyncSync(fd);
      } finally {
        closeSync(fd);
      }
      renameSync(temp, file);
      if (!sync) return;
      // The rename itself must reach the disk, or a power cut can bring back the old file.
      const dirFd = openSync(dir, "r");
      try {
        fsyncSync(dirFd);
      } finally {
        closeSync(dirFd);
      }
    },
  };
}
