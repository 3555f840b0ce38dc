/** Real ledger files for the CLI tests: filled by the gate, damaged on purpose, compared byte for byte. */
import { createHash } from "node:crypto";
import { closeSync, copyFileSync, existsSync, openSync, readFileSync, statSync, writeSync } from "node:fs";
import { z } from "zod";
import { createGate } from "../../src/root/create-gate.js";
import { defineTool } from "../../src/core/tool.js";
import { sqliteLedger } from "../../src/stores/sqlite/index.js";

/** A ledger file with `calls` completed ticket calls (tenant acme), recorded by the gate and closed (its WAL folded in). */
export async function filledLedger(path: string, calls: number): Promise<void> {
  const tool = defineTool({
    name: "open_ticket", effect: "write", input: z.object({ title: z.string() }),
    execute: (input, ctx) => ({ ticket: `T-${ctx.idempotencyKey}`, title: input.title }),
  });
  const ledger = sqliteLedger(path, { durability: "process" });
  const gate = createGate({ tools: [tool], ledger });
  for (let i = 0; i < calls; i += 100) {
    const uses = Array.from({ length: Math.min(100, calls - i) }, (_, j) => ({
      type: "tool_use", id: `toolu_${String(i + j).padStart(6, "0")}`, name: "open_ticket", input: { title: `ticket number ${i + j}, with a body long enough to fill pages` },
    }));
    const results = await gate.runToolUses(uses, { tenant: "acme", task: `t${i}` });
    if (results.some((r) => r.is_error)) throw new Error(`filling the ledger failed: ${JSON.stringify(results.find((r) => r.is_error))}`);
  }
  await gate.close();
  await ledger.close();
}

/**
 * A copy of `good` with `pages` consecutive pages in the middle of the file overwritten with junk,
 * as a bad sector or a torn copy leaves it: the header and the first pages are intact, so the file
 * opens and its first rows read, but PRAGMA quick_check finds the damage.
 */
export function damagedCopy(good: string, damaged: string, pages = 6): void {
  if (existsSync(`${good}-wal`)) throw new Error(`${good} still has a WAL: close its ledger first`);
  copyFileSync(good, damaged);
  const pageSize = readFileSync(damaged).readUInt16BE(16);
  const count = statSync(damaged).size / pageSize;
  if (count < pages * 4) throw new Error(`${good} has only ${count} pages: fill it with more calls`);
  const fd = openSync(damaged, "r+");
  try {
    const first = Math.floor(count / 2);
    for (let page = first; page < first + pages; page++) writeSync(fd, Buffer.alloc(pageSize, 0xa5), 0, pageSize, page * pageSize);
  } finally {
    closeSync(fd);
  }
}

export function sha256(file: string): string {
  return createHash("sha256").update(readFileSync(file)).digest("hex");
}

/**
 * The file's digest and its WAL's: what must not change when a command refuses the file. An
 * empty WAL counts as none: a read-only SQLite connection to a WAL-mode file creates an empty
 * -wal (and a -shm) beside it when they are missing, which holds no page of the ledger.
 */
export function fingerprintOf(file: string): string {
  const wal = `${file}-wal`;
  return `${sha256(file)} wal:${existsSync(wal) && statSync(wal).size > 0 ? sha256(wal) : "none"}`;
}
