/**
 * SQLite driver faults inside a group-commit batch (issue 23): each one real, at the driver seam.
 *
 * - SQLITE_BUSY: another connection holds the file's write lock, so the batch's BEGIN IMMEDIATE
 *   gives up after busyTimeoutMs;
 * - SQLITE_IOERR: the process's file-size limit (RLIMIT_FSIZE, set with util-linux `prlimit` on
 *   this very process: Node ignores SIGXFSZ, so the write fails with EFBIG) stops the WAL growing,
 *   and SQLite answers the commit with SQLITE_IOERR_WRITE;
 * - SQLITE_FULL: the ledger lives on a small tmpfs, filled up to the last byte (mounting one needs
 *   root: skipped, and said so, where that is not allowed).
 *
 * Each fault is injected twice: under the batch of claims (no tool may start, and every call is
 * told its tool was not started, which is true) and under the batch of outcomes, after the tools
 * ran (each call gets its true result, never "nothing was executed", an alert says its outcome is
 * not recorded yet, and nothing is lost: once the fault is gone the kept outcomes are written and
 * a replay answers from the ledger). The process never sees an uncaught error, and each effect
 * happens once.
 */
import { execFileSync } from "node:child_process";
import { closeSync, existsSync, mkdirSync, openSync, rmSync, statfsSync, statSync, writeSync } from "node:fs";
import { join } from "node:path";
import Database from "better-sqlite3";
import { z } from "zod";
import { afterAll, describe, expect, it } from "vitest";
import { defineTool } from "../../src/core/tool.js";
import type { Alert } from "../../src/gate/alerts.js";
import { createGate } from "../../src/root/create-gate.js";
import { sqliteLedger } from "../../src/stores/sqlite/index.js";
import { prlimitMissing } from "../../src/testing/explorer/sqlite-faults.js";
import { tempDir } from "../support/tmp.js";

const scope = { tenant: "acme", task: "disk" };

/** A fault the test can switch on and off around one batch. */
interface DriverFault {
  readonly name: string;
  /** Why it cannot run here, if it cannot. */
  readonly unavailable?: string;
  /** Where the ledger file goes. */
  dir(): string;
  readonly busyTimeoutMs?: number;
  on(file: string): void;
  off(): void;
  /** The driver's code, as the store's message names it. */
  readonly says: RegExp;
}


/** A 4 MiB tmpfs for the full-disk case, or why there cannot be one. */
const tmpfs = (() => {
  const at = join(tempDir("effectgate-full-"), "disk");
  mkdirSync(at);
  try {
    execFileSync("mount", ["-t", "tmpfs", "-o", "size=4m", "tmpfs", at], { stdio: "ignore" });
    return { at, mounted: true as const };
  } catch {
    return { at, mounted: false as const };
  }
})();
afterAll(() => {
  if (tmpfs.mounted) execFileSync("umount", [tmpfs.at]);
});

const busy = (): DriverFault => {
  let locker: Database.Database | undefined;
  return {
    name: "SQLITE_BUSY (another connection holds the write lock)",
    dir: () => tempDir(),
    busyTimeoutMs: 30,
    on(file) {
      locker = new Database(file);
      locker.exec("BEGIN IMMEDIATE");
    },
    off() {
      locker?.exec("ROLLBACK");
      locker?.close();
    },
    says: /database is locked/,
  };
};

const ioError = (): DriverFault => {
  const unavailable = prlimitMissing();
  const limit = (value: string) => execFileSync("prlimit", ["--pid", String(process.pid), `--fsize=${value}:`]);
  return {
    name: "SQLITE_IOERR (the WAL cannot grow: EFBIG)",
    ...(unavailable ? { unavailable } : {}),
    dir: () => tempDir(),
    // No file of this process may grow past the WAL's size now (the soft limit only: raising it back needs no privilege).
    on: (file) => void limit(String(existsSync(`${file}-wal`) ? statSync(`${file}-wal`).size : 0)),
    off: () => void limit("unlimited"),
    says: /disk I\/O error/,
  };
};

const fullDisk = (): DriverFault => {
  const filler = join(tmpfs.at, "filler");
  return {
    name: "SQLITE_FULL (the disk is full)",
    ...(tmpfs.mounted ? {} : { unavailable: "mounting a tmpfs needs root (CAP_SYS_ADMIN)" }),
    dir: () => {
      const dir = join(tmpfs.at, `l${Math.random().toString(36).slice(2)}`);
      mkdirSync(dir);
      return dir;
    },
    on() {
      const fd = openSync(filler, "w");
      try {
        for (const size of [65_536, 4_096, 512, 1]) {
          for (;;) {
            try {
              writeSync(fd, Buffer.alloc(size));
            } catch (err) {
              if ((err as NodeJS.ErrnoException).code !== "ENOSPC") throw err;
              break;
            }
          }
        }
      } finally {
        closeSync(fd);
      }
      expect(statfsSync(tmpfs.at).bavail).toBe(0);
    },
    off: () => rmSync(filler, { force: true }),
    says: /database or disk is full/,
  };
};

function deferred() {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}

/** Uncaught exceptions and unhandled rejections while a scenario runs. */
function watchProcess() {
  const seen: unknown[] = [];
  const onError = (err: unknown) => void seen.push(err);
  process.on("uncaughtException", onError);
  process.on("unhandledRejection", onError);
  return { seen, stop: () => (process.off("uncaughtException", onError), process.off("unhandledRejection", onError)) };
}

const N = 3;

function scenario(fault: DriverFault) {
  const effects = new Map<string, number>();
  let starts = 0;
  const started = deferred();
  const release = deferred();
  let hold = false;
  const tool = defineTool({
    name: "write_note", effect: "write", input: z.object({ n: z.number() }),
    async execute(input, ctx) {
      effects.set(ctx.idempotencyKey, (effects.get(ctx.idempotencyKey) ?? 0) + 1);
      if (++starts === N) started.resolve();
      if (hold) await release.promise;
      return { note: input.n };
    },
    probe: async (_input, ctx) => (effects.has(ctx.idempotencyKey) ? { status: "done", result: { note: -1 } } : { status: "absent" }),
  });
  const file = join(fault.dir(), "ledger.db");
  const ledger = sqliteLedger(file, fault.busyTimeoutMs === undefined ? {} : { busyTimeoutMs: fault.busyTimeoutMs });
  const alerts: Alert[] = [];
  const gate = createGate({ tools: [tool], ledger, onAlert: (a) => alerts.push(a) });
  const calls = (prefix: string) => Array.from({ length: N }, (_, i) => ({ type: "tool_use" as const, id: `toolu_${prefix}_${i}`, name: "write_note", input: { n: i } }));
  return {
    file, ledger, gate, alerts, effects, calls, started, release,
    holdTools: () => void (hold = true),
    async close() {
      await gate.close();
      await ledger.close();
    },
  };
}

describe.each([busy(), ioError(), fullDisk()])("$name inside a batch", (fault) => {
  it.skipIf(fault.unavailable !== undefined)(`under the claims: no tool starts, each call is told so, the replay runs each once${fault.unavailable ? ` (skipped: ${fault.unavailable})` : ""}`, async () => {
    const s = scenario(fault);
    const watch = watchProcess();
    try {
      await s.ledger.calls.get("acme", "opening"); // opened and migrated before the fault
      const calls = s.calls("claims");
      fault.on(s.file);
      let answers;
      try {
        answers = await s.gate.runToolUses(calls, scope);
      } finally {
        fault.off();
      }
      for (const a of answers) {
        expect(a.is_error).toBe(true);
        expect(a.content).toMatch(/^EG_LEDGER_UNAVAILABLE: the ledger .* is unavailable \(could not claim a call: /);
        expect(a.content).toMatch(fault.says);
        expect(a.content).toMatch(/The tool was not started by this request; replay this same call/);
      }
      expect(s.effects.size).toBe(0);
      expect(await s.ledger.calls.list({ tenant: "acme" })).toEqual([]);
      const replayed = await s.gate.runToolUses(calls, scope);
      expect(replayed.map((a) => [a.is_error, a.content])).toEqual(calls.map((c) => [false, JSON.stringify({ note: c.input.n })]));
      expect([...s.effects.values()]).toEqual(Array(N).fill(1));
      expect(watch.seen).toEqual([]);
    } finally {
      watch.stop();
      await s.close();
    }
  });

  it.skipIf(fault.unavailable !== undefined)(`under the outcomes: true answers, an alert each, nothing lost once the fault is gone${fault.unavailable ? ` (skipped: ${fault.unavailable})` : ""}`, async () => {
    const s = scenario(fault);
    const watch = watchProcess();
    try {
      s.holdTools();
      const calls = s.calls("outcomes");
      const running = s.gate.runToolUses(calls, scope);
      await s.started.promise;
      // Every claim is committed and every tool has run; their outcomes will go out as one batch.
      expect((await s.ledger.calls.list({ tenant: "acme" })).map((r) => r.state)).toEqual(Array(N).fill("in_progress"));
      fault.on(s.file);
      let answers;
      try {
        s.release.resolve();
        answers = await running;
        // While the fault lasts, a replay in this process is answered from the outcomes kept in memory.
        expect(await s.gate.runToolUses(calls, scope)).toEqual(answers);
      } finally {
        fault.off();
      }
      expect(answers.map((a) => [a.is_error, a.content])).toEqual(calls.map((c) => [false, JSON.stringify({ note: c.input.n })]));
      expect(s.alerts.map((a) => [a.code, a.key]).sort()).toEqual(calls.map((c) => ["record_failed", c.id]).sort());
      for (const a of s.alerts) {
        expect(a.message).toMatch(fault.says);
        expect(a.message).not.toMatch(/not started|nothing was executed/i);
      }
      await s.gate.drain();
      for (const c of calls) expect(await s.ledger.calls.get("acme", c.id)).toMatchObject({ state: "completed", owner: null, result: { note: c.input.n } });
      expect(await s.gate.runToolUses(calls, scope)).toEqual(answers);
      expect([...s.effects.values()]).toEqual(Array(N).fill(1));
      expect(watch.seen).toEqual([]);
    } finally {
      watch.stop();
      await s.close();
    }
  });
});
