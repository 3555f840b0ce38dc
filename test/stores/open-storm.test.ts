/**
 * Several processes opening one SQLite ledger at the same moment, round after round. Each round
 * starts on a new file, so the first openings race to create it, switch it to WAL and migrate it;
 * each process then opens it a second time at once, racing the others' calls and closes. Every
 * step of opening must wait for the other processes' locks: not one "database is locked", no call
 * lost, no effect twice. (Before the fix about one round in seven failed somewhere.)
 */
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { beforeAll, describe, expect, it } from "vitest";
import { requireBuild, startWorker } from "../support/processes.js";
import { tempDir } from "../support/tmp.js";

const WORKER = fileURLToPath(new URL("./fixtures/open-storm-worker.mjs", import.meta.url));
const WORKERS = 6;
const ROUNDS = 30;
/** Gated calls per opening; each worker opens each round's file twice. */
const CALLS = 3;

interface RoundReport { round: number; ok: number; errors: string[] }

describe("one SQLite ledger opened by several processes at once", () => {
  beforeAll(() => requireBuild());

  it(`${WORKERS} processes × ${ROUNDS} rounds, each on a new file: open, ${CALLS} gated calls, close, twice; no error, each effect exactly once`, async () => {
    const dir = tempDir();
    const effectsFile = join(dir, "effects.log");
    const workers = Array.from({ length: WORKERS }, (_, w) => startWorker(WORKER, [effectsFile, String(w), String(CALLS)]));
    await Promise.all(workers.map((w) => w.line((l) => l === "ready")));
    const reports: RoundReport[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      const ledger = join(dir, `storm-${round}.db`);
      expect(existsSync(ledger)).toBe(false);
      // Every process starts the round at the same moment, once the last round has ended everywhere.
      const done = workers.map((w) => w.line((l) => l.startsWith(`{"round":${round},`)));
      const at = Date.now() + 25;
      for (const w of workers) w.child.stdin.write(`go ${round} ${at} ${ledger}\n`);
      reports.push(...(await Promise.all(done)).map((l) => JSON.parse(l) as RoundReport));
    }
    for (const w of workers) w.child.stdin.write("exit\n");
    const exits = await Promise.all(workers.map((w) => w.exited));
    expect(exits.map((e) => e.code), exits.map((e) => e.stderr).join("\n")).toEqual(workers.map(() => 0));

    const calls = WORKERS * ROUNDS * 2 * CALLS;
    expect(reports.flatMap((r) => r.errors)).toEqual([]);
    expect(reports.reduce((sum, r) => sum + r.ok, 0)).toBe(calls);
    const perKey = new Map<string, number>();
    for (const key of readFileSync(effectsFile, "utf8").split("\n").filter((l) => l !== "")) perKey.set(key, (perKey.get(key) ?? 0) + 1);
    expect(perKey.size).toBe(calls);
    expect([...perKey].filter(([, n]) => n !== 1)).toEqual([]);
  });
});
