/**
 * effectgate benchmark harness (`npm run bench`; never part of the test suite).
 *
 * One run, one disk (a temp dir under os.tmpdir()), measures:
 *   1. the bare cost of a small append + fdatasync / fsync on that disk, of an in-place 4 KiB
 *      overwrite + fdatasync (what a WAL that wraps around does) and of appending 4 WAL frames + fsync
 *      (what one ledger commit writes to a WAL that keeps growing);
 *   2. the gate's per-call overhead for a `read` tool (gated call minus the bare tool call);
 *   3. a `write` call through the gate on SQLite (durability "fsync" and "process") and on the
 *      memory ledger, layer by layer (two bare fdatasyncs, two raw SQLite commits, the ledger's
 *      claim + update, the gated call), interleaved so all layers see the same machine load, with
 *      the ratio of the fsync rows to two fdatasyncs;
 *   4. the per-call write cost at 1,000 / 10,000 / 100,000 existing records (SQLite both
 *      durabilities, memory);
 *   4b. the per-call write cost over a long run on ONE open SQLite ledger, with the WAL file's size
 *      (a ledger reopened per measurement, as in 4, cannot show growth that happens while it stays open);
 *   5. the plain JSON-file ledger of tutorials at the same sizes.
 *
 * Flags:
 *   --quick          small counts, for a smoke run (a few seconds)
 *   --only=a,b       run only some phases: fsync, read, write, scale, sustain, json
 *   --keep           keep the temp dir (its path is printed)
 *   --out=FILE       write the JSON somewhere else than bench/results/latest.json
 *   --sizes=a,b      ledger sizes for phase 4 (default 1000,10000,100000; 1000000 fills for a few minutes)
 *
 * Stdout gets the tables; progress goes to stderr.
 */
import { closeSync, existsSync, fdatasyncSync, fsyncSync, mkdirSync, mkdtempSync, openSync, rmSync, statSync, writeFileSync, writeSync } from "node:fs";
import os from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import Database from "better-sqlite3";
import { z } from "zod";
import { createGate, defineTool, memoryLedger, type Gate, type Json, type Stores, type Scope, type ToolContext, type ToolUseBlock } from "../src/index.js";
import { sqliteLedger } from "../src/sqlite.js";
import { describeEnv, envInfo, type EnvInfo } from "./lib/env.js";
import { jsonLedgerCall, writeWhole, type JsonLedgerData } from "./lib/json-ledger.js";
import { collectGarbage, fmtUs, summarize, table, timeAsync, timeSync, usSince, type Summary } from "./lib/stats.js";

// ---------------------------------------------------------------------------------------------
// Configuration

const PHASES = ["fsync", "read", "write", "scale", "sustain", "json"] as const;
type Phase = (typeof PHASES)[number];

const argv = process.argv.slice(2);
const quick = argv.includes("--quick");
const keep = argv.includes("--keep");
const onlyArg = argv.find((a) => a.startsWith("--only="));
const outArg = argv.find((a) => a.startsWith("--out="));
const only = onlyArg === undefined ? undefined : new Set(onlyArg.slice("--only=".length).split(",").filter((p) => p !== ""));
if (only) {
  for (const p of only) {
    if (!(PHASES as readonly string[]).includes(p)) {
      process.stderr.write(`unknown phase ${JSON.stringify(p)}; phases are ${PHASES.join(", ")}\n`);
      process.exit(2);
    }
  }
}
const runs = (phase: Phase) => only === undefined || only.has(phase);

interface Config {
  /** Iterations per fsync variant. */
  readonly syncIterations: number;
  /** Read calls: warm-up, then `rounds` alternating blocks of `readBlock` bare calls and gated calls. */
  readonly readWarmup: number;
  readonly readRounds: number;
  readonly readBlock: number;
  /** Write calls on an empty ledger, per store. */
  readonly writeWarmup: number;
  readonly writeFsync: number;
  readonly writeProcess: number;
  readonly writeMemory: number;
  /** Block size when write series are interleaved. */
  readonly writeBlock: number;
  /** Ledger sizes for the scaling phase, and calls measured at each size per store. */
  readonly sizes: readonly number[];
  readonly scaleWarmup: number;
  readonly scaleFsync: number;
  readonly scaleProcess: number;
  readonly scaleMemory: number;
  /** Sustained run on one open SQLite ledger: total calls and window size, per durability. */
  readonly sustainFsync: number;
  readonly sustainProcess: number;
  readonly sustainWindows: number;
  /** JSON-file ledger calls measured at each size (index matches `sizes`). */
  readonly jsonCalls: readonly number[];
  /** tool_use blocks per runToolUses message while pre-filling a ledger. */
  readonly fillBatch: number;
}

const FULL: Config = {
  syncIterations: 2000,
  readWarmup: 20_000,
  readRounds: 10,
  readBlock: 10_000,
  writeWarmup: 200,
  writeFsync: 2000,
  writeProcess: 5000,
  writeMemory: 20_000,
  writeBlock: 100,
  sizes: [1_000, 10_000, 100_000],
  scaleWarmup: 50,
  scaleFsync: 1000,
  scaleProcess: 1000,
  scaleMemory: 5000,
  sustainFsync: 10_000,
  sustainProcess: 30_000,
  sustainWindows: 5,
  jsonCalls: [500, 200, 30],
  fillBatch: 500,
};

const QUICK: Config = {
  syncIterations: 200,
  readWarmup: 2000,
  readRounds: 4,
  readBlock: 1000,
  writeWarmup: 20,
  writeFsync: 200,
  writeProcess: 300,
  writeMemory: 1000,
  writeBlock: 50,
  sizes: [1_000, 10_000],
  scaleWarmup: 10,
  scaleFsync: 100,
  scaleProcess: 100,
  scaleMemory: 500,
  sustainFsync: 1000,
  sustainProcess: 3000,
  sustainWindows: 3,
  jsonCalls: [100, 20],
  fillBatch: 500,
};

const sizesArg = argv.find((a) => a.startsWith("--sizes="))?.slice("--sizes=".length);
const sizes = sizesArg?.split(",").map(Number);
if (sizes && sizes.some((n) => !Number.isSafeInteger(n) || n < 1)) {
  process.stderr.write(`--sizes takes record counts separated by commas, e.g. --sizes=1000,1000000; got ${JSON.stringify(sizesArg)}\n`);
  process.exit(2);
}
const config: Config = { ...(quick ? QUICK : FULL), ...(sizes ? { sizes } : {}) };
const projectDir = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const outFile = outArg ? resolve(outArg.slice("--out=".length)) : join(projectDir, "bench", "results", "latest.json");
const workDir = mkdtempSync(join(os.tmpdir(), "effectgate-bench-"));

const progress = (message: string) => process.stderr.write(`[bench ${((performance.now()) / 1000).toFixed(1)}s] ${message}\n`);

// ---------------------------------------------------------------------------------------------
// The workload: one read tool and one write tool, both returning a constant, so the figures are
// the gate's and the store's cost, not the tool's.

const SCOPE: Scope = { tenant: "bench-tenant", task: "bench-task" };
const ORDER = { orderId: "ord_123", status: "shipped", items: 3 } as const;
const TICKET = { ticketId: "T-1001", status: "open" } as const;

const lookupOrder = defineTool({
  name: "lookup_order",
  effect: "read",
  input: z.object({ orderId: z.string() }),
  execute: () => ORDER,
});

const createTicket = defineTool({
  name: "create_ticket",
  effect: "write",
  input: z.object({ title: z.string(), priority: z.number().int() }),
  execute: () => TICKET,
});

const READ_INPUT = { orderId: "ord_123" };
const WRITE_INPUT = { title: "Printer on fire", priority: 2 };

/** A tool_use id shaped like Anthropic's (toolu_ + 24 characters), unique per tag and index. */
const toolUseId = (tag: string, i: number) => `toolu_${tag}_${String(i).padStart(20 - tag.length, "0")}`;
const writeBlock = (tag: string, i: number): ToolUseBlock => ({ type: "tool_use", id: toolUseId(tag, i), name: "create_ticket", input: WRITE_INPUT });

const TOOLS = [lookupOrder, createTicket];

let alerts = 0;
function gateOn(ledger: Stores): Gate {
  return createGate({ tools: TOOLS, ledger, onAlert: () => void alerts++ });
}

/** Runs one gated call and fails the benchmark loudly if it did not succeed. */
async function gatedCall(gate: Gate, block: ToolUseBlock): Promise<void> {
  const [result] = await gate.runToolUses([block], SCOPE);
  if (!result || result.is_error) throw new Error(`gated call ${block.id} failed: ${result?.content ?? "no result"}`);
}

/** Fills a ledger through the gate (the store's own writes, real schema and indexes), `batch` calls per message. */
async function fill(gate: Gate, from: number, to: number, batch: number): Promise<void> {
  for (let i = from; i < to; i += batch) {
    const blocks: ToolUseBlock[] = [];
    for (let j = i; j < Math.min(to, i + batch); j++) blocks.push(writeBlock("fill", j));
    const results = await gate.runToolUses(blocks, SCOPE);
    const bad = results.find((r) => r.is_error);
    if (bad) throw new Error(`fill call ${bad.tool_use_id} failed: ${bad.content}`);
  }
}

function countRows(file: string): number {
  const db = new Database(file, { readonly: true });
  try {
    return (db.prepare("SELECT count(*) AS n FROM calls").get() as { n: number }).n;
  } finally {
    db.close();
  }
}

// ---------------------------------------------------------------------------------------------
// Phases

interface SyncResults {
  readonly iterations: number;
  readonly appendBytes: number;
  /** Time of fdatasync() right after a small append (the write itself is not timed). */
  readonly appendFdatasync: Summary;
  /** Time of fsync() right after a small append. */
  readonly appendFsync: Summary;
  /** Time of fdatasync() after overwriting 4 KiB in place in a preallocated file (size unchanged). */
  readonly overwriteFdatasync: Summary;
  /** Time of fsync() after appending 4 × (24 + 4096) B: what one ledger commit appends to its WAL (strace: ~4 frames). */
  readonly walCommitFsync: Summary;
}

function phaseSync(): SyncResults {
  const n = config.syncIterations;
  const payload = Buffer.alloc(128, 0x61);
  const page = Buffer.alloc(4096, 0x62);
  const appendOnce = (file: string, sync: (fd: number) => void): Summary => {
    const fd = openSync(file, "a");
    try {
      for (let i = 0; i < 50; i++) { writeSync(fd, payload); sync(fd); }
      return summarize(timeSyncAfter(n, () => writeSync(fd, payload), () => sync(fd)));
    } finally {
      closeSync(fd);
    }
  };
  progress(`fsync: ${n} × append + fdatasync`);
  const appendFdatasync = appendOnce(join(workDir, "append-fdatasync.bin"), fdatasyncSync);
  progress(`fsync: ${n} × append + fsync`);
  const appendFsync = appendOnce(join(workDir, "append-fsync.bin"), fsyncSync);
  progress(`fsync: ${n} × 4-frame append + fsync`);
  const frames = Buffer.alloc(4 * (24 + 4096), 0x63);
  const walFd = openSync(join(workDir, "append-frames.bin"), "a");
  let walCommitFsync: Summary;
  try {
    for (let i = 0; i < 50; i++) { writeSync(walFd, frames); fsyncSync(walFd); }
    walCommitFsync = summarize(timeSyncAfter(n, () => writeSync(walFd, frames), () => fsyncSync(walFd)));
  } finally {
    closeSync(walFd);
  }
  progress(`fsync: ${n} × 4 KiB overwrite + fdatasync`);
  const slots = 256;
  const file = join(workDir, "overwrite.bin");
  writeFileSync(file, Buffer.alloc(4096 * slots));
  const fd = openSync(file, "r+");
  let overwriteFdatasync: Summary;
  try {
    fdatasyncSync(fd);
    overwriteFdatasync = summarize(timeSyncAfter(n, (i) => writeSync(fd, page, 0, page.length, (i % slots) * 4096), () => fdatasyncSync(fd)));
  } finally {
    closeSync(fd);
  }
  return { iterations: n, appendBytes: payload.length, appendFdatasync, appendFsync, overwriteFdatasync, walCommitFsync };
}

/** Runs `prepare` untimed, then times `timed`, `n` times. */
function timeSyncAfter(n: number, prepare: (i: number) => unknown, timed: () => unknown): Float64Array {
  const out = new Float64Array(n);
  for (let i = 0; i < n; i++) {
    prepare(i);
    const start = process.hrtime.bigint();
    timed();
    out[i] = usSince(start);
  }
  return out;
}

interface ReadResults {
  readonly iterations: number;
  readonly bare: Summary;
  readonly gated: Summary;
  /** gated.median − bare.median */
  readonly overheadMedian: number;
  /** gated.p99 − bare.median: the slow end of a gated call, less what the tool itself costs. */
  readonly overheadP99: number;
  /** Whether the gate's SQLite ledger file was never created while it served only read calls. */
  readonly ledgerUntouched: boolean;
}

async function phaseRead(): Promise<ReadResults> {
  const ledgerFile = join(workDir, "read-only.db");
  const gate = gateOn(sqliteLedger(ledgerFile));
  const ac = new AbortController();
  const ctx: ToolContext = { idempotencyKey: "k", toolUseId: "toolu_bare", scope: SCOPE, fence: 1, signal: ac.signal, attempt: 1 };
  const readBlock = (i: number): ToolUseBlock => ({ type: "tool_use", id: toolUseId("read", i), name: "lookup_order", input: READ_INPUT });
  // The bare call: the same tool function, awaited the same way, without the gate.
  const bare = async () => lookupOrder.execute(READ_INPUT, ctx);
  const gated = async (i: number) => {
    const [result] = await gate.runToolUses([readBlock(i)], SCOPE);
    if (!result || result.is_error) throw new Error(`read call failed: ${result?.content ?? "no result"}`);
  };
  progress(`read: warm-up ${config.readWarmup} bare + ${config.readWarmup} gated calls`);
  await timeAsync(config.readWarmup, bare);
  await timeAsync(config.readWarmup, gated);
  // Alternate blocks of bare and gated calls so drift from other load on the machine hits both alike.
  const bareSamples: Float64Array[] = [];
  const gatedSamples: Float64Array[] = [];
  progress(`read: ${config.readRounds} rounds × (${config.readBlock} bare + ${config.readBlock} gated calls)`);
  for (let r = 0; r < config.readRounds; r++) {
    collectGarbage();
    bareSamples.push(await timeAsync(config.readBlock, bare));
    collectGarbage();
    gatedSamples.push(await timeAsync(config.readBlock, (i) => gated(r * config.readBlock + i)));
  }
  await gate.ledger.close();
  const concat = (parts: Float64Array[]) => {
    const out = new Float64Array(parts.reduce((n, p) => n + p.length, 0));
    let at = 0;
    for (const p of parts) { out.set(p, at); at += p.length; }
    return out;
  };
  const bareSummary = summarize(concat(bareSamples));
  const gatedSummary = summarize(concat(gatedSamples));
  return {
    iterations: config.readRounds * config.readBlock,
    bare: bareSummary,
    gated: gatedSummary,
    overheadMedian: gatedSummary.median - bareSummary.median,
    overheadP99: gatedSummary.p99 - bareSummary.median,
    ledgerUntouched: !existsSync(ledgerFile),
  };
}

type Layer = "disk" | "raw-sqlite" | "raw-schema" | "ledger" | "gate";

interface WriteRow {
  /**
   * What is timed: two bare fdatasyncs (disk), raw better-sqlite3 statements, the ledger's
   * claim + update without the gate, or the full gated call.
   */
  readonly layer: Layer;
  readonly store: "sqlite-fsync" | "sqlite-process" | "memory";
  readonly label: string;
  readonly calls: Summary;
  /** calls.median / median of the interleaved "2 × append + fdatasync" row (SQLite fsync rows only). */
  readonly ratioToTwoFdatasyncs: number | null;
  /** calls.p99 / p99 of the interleaved "2 × append + fdatasync" row. */
  readonly ratioToTwoFdatasyncsP99: number | null;
  /** calls.median / (2 × the append+fdatasync median of phase 1). */
  readonly ratioToPhase1: number | null;
}

interface WriteResults {
  readonly rows: readonly WriteRow[];
  /** The gated write on SQLite with durability "fsync" (the row the 1.2× target is about). */
  readonly gateFsync: WriteRow;
  /** Two bare append+fdatasyncs, measured interleaved with the fsync rows (same moments, same load). */
  readonly twoFdatasyncs: Summary;
  readonly block: number;
}

/** One measured series; `run` may be sync or async. */
interface Series {
  readonly layer: Layer;
  readonly store: WriteRow["store"];
  readonly label: string;
  readonly warmupTag: string;
  readonly run: (tag: string, i: number) => unknown;
  readonly close?: () => unknown;
}

async function timeMaybeAsync(n: number, fn: (i: number) => unknown): Promise<Float64Array> {
  const out = new Float64Array(n);
  for (let i = 0; i < n; i++) {
    const start = process.hrtime.bigint();
    const r = fn(i);
    if (r instanceof Promise) await r;
    out[i] = usSince(start);
  }
  return out;
}

/**
 * Runs the series in alternating blocks (A×block, B×block, C×block, then B, C, A…), so load from other
 * processes on a shared machine lands on all of them alike and their ratios stay meaningful.
 */
async function interleave(series: readonly Series[], warmup: number, n: number, block: number): Promise<Summary[]> {
  for (const s of series) await timeMaybeAsync(warmup, (i) => s.run(`${s.warmupTag}w`, i));
  const samples = series.map(() => new Float64Array(n));
  for (let done = 0, round = 0; done < n; done += block, round++) {
    const size = Math.min(block, n - done);
    collectGarbage(); // once per round: a full GC per block would dominate the run with a 100,000-record memory ledger
    // Rotate who goes first each round, so "first block after the GC" is no series' handicap.
    for (let j = 0; j < series.length; j++) {
      const k = (j + round) % series.length;
      const s = series[k];
      if (!s) continue;
      const got = await timeMaybeAsync(size, (i) => s.run(s.warmupTag, done + i));
      samples[k]?.set(got, done);
    }
  }
  for (const s of series) await s.close?.();
  return samples.map(summarize);
}

/**
 * The SQLite floor: two one-row commits (INSERT, then UPDATE) with better-sqlite3 on a table with
 * just a primary key, same pragmas as the ledger. What any SQLite-backed claim + outcome must pay.
 */
function rawSqliteSeries(file: string, durability: "fsync" | "process"): Series {
  const db = new Database(file);
  db.pragma("journal_mode = WAL");
  db.pragma(`synchronous = ${durability === "process" ? "NORMAL" : "FULL"}`);
  db.exec("CREATE TABLE calls (key TEXT PRIMARY KEY, state TEXT NOT NULL, result TEXT) WITHOUT ROWID");
  const insert = db.prepare("INSERT INTO calls (key, state) VALUES (?, 'in_progress')");
  const update = db.prepare("UPDATE calls SET state = 'completed', result = ? WHERE key = ?");
  const result = JSON.stringify(TICKET);
  return {
    layer: "raw-sqlite", store: `sqlite-${durability}`, label: `raw SQLite: INSERT + UPDATE, 2 one-row commits (${durability})`, warmupTag: "r",
    run: (tag, i) => {
      const id = toolUseId(tag, i);
      insert.run(id);
      update.run(result, id);
    },
    close: () => db.close(),
  };
}

/**
 * The same two commits on the ledger's own schema (made by sqliteLedger, so every index a claim
 * writes is there), with statements shaped like the store's (the claim's kill-switch check, all
 * columns, RETURNING): what the schema costs over the bare table above, without the store's JS.
 */
async function rawSchemaSeries(file: string, durability: "fsync" | "process"): Promise<Series> {
  const made = sqliteLedger(file, { durability });
  await made.calls.get(SCOPE.tenant, "none");
  await made.close();
  const db = new Database(file);
  db.pragma("journal_mode = WAL");
  db.pragma(`synchronous = ${durability === "process" ? "NORMAL" : "FULL"}`);
  db.pragma("journal_size_limit = 8388608");
  const claim = db.prepare(`INSERT INTO calls (tenant, key, tool, effect, task, tool_use_id, fingerprint, input, input_redacted, state, result, error,
      owner, lease_expires_at, attempts, fence, started_at, claim_token, version, created_at, updated_at)
    SELECT @tenant, @key, 'create_ticket', 'write', @task, @key, @fingerprint, @input, 0, 'in_progress', NULL, NULL,
      @owner, @now + 30000, 1, 1, @now, @token, 1, @now, @now
    WHERE NOT EXISTS (SELECT 1 FROM kill_switches WHERE tenant IN ('', @tenant) AND agent IN ('', ''))
    ON CONFLICT (tenant, key) DO NOTHING RETURNING tenant, key, version`);
  const done = db.prepare(`UPDATE calls SET state = 'completed', result = @result, owner = NULL, lease_expires_at = NULL,
      version = version + 1, updated_at = @now WHERE tenant = @tenant AND key = @key AND version = 1 AND claim_token = @token RETURNING updated_at`);
  const values = { tenant: SCOPE.tenant, task: SCOPE.task, fingerprint: "f".repeat(64), input: JSON.stringify(WRITE_INPUT), owner: `${os.hostname()}/${process.pid}/bench`, token: "t".repeat(32) };
  const result = JSON.stringify(TICKET);
  return {
    layer: "raw-schema", store: `sqlite-${durability}`, label: `raw SQLite on the ledger's schema: the claim + outcome statements (${durability})`, warmupTag: "s",
    run: (tag, i) => {
      const key = toolUseId(tag, i);
      if (claim.all({ ...values, key, now: Date.now() }).length !== 1) throw new Error(`raw claim of ${key} wrote nothing`);
      if (done.all({ ...values, key, result, now: Date.now() }).length !== 1) throw new Error(`raw outcome of ${key} wrote nothing`);
    },
    close: () => db.close(),
  };
}

/** The store alone: ledger.claim + ledger.calls.update(completed) with the record the gate would write, no gate around it. */
function ledgerSeries(ledger: Stores, store: WriteRow["store"], label: string): Series {
  const owner = `${os.hostname()}/${process.pid}/bench`;
  const fingerprint = "f".repeat(64);
  return {
    layer: "ledger", store, label, warmupTag: "l",
    run: async (tag, i) => {
      const id = toolUseId(tag, i);
      const claim = await ledger.calls.claim({
        tenant: SCOPE.tenant, key: id, tool: "create_ticket", effect: "write", task: SCOPE.task, toolUseId: id,
        fingerprint, input: WRITE_INPUT, inputRedacted: false, owner, leaseMs: 30_000,
      });
      if (!claim.claimed) throw new Error(`ledger claim of ${id} found an existing record`);
      const done = await ledger.calls.update(SCOPE.tenant, id, claim.record.version, { state: "completed", result: { ...TICKET }, owner: null });
      if (!done) throw new Error(`ledger update of ${id} lost its race`);
    },
    close: () => ledger.close(),
  };
}

function gateSeries(ledger: Stores, store: WriteRow["store"], label: string, tag = "g"): Series {
  const gate = gateOn(ledger);
  return {
    layer: "gate", store, label, warmupTag: tag,
    run: (tag, i) => gatedCall(gate, writeBlock(tag, i)),
    close: async () => {
      await gate.close();
      await ledger.close();
    },
  };
}

async function phaseWrite(sync: SyncResults | undefined): Promise<WriteResults> {
  const rows: WriteRow[] = [];
  const w = config.writeWarmup;
  const block = config.writeBlock;

  // Durability "fsync", interleaved with two bare fdatasyncs of a small append.
  const payload = Buffer.alloc(128, 0x61);
  const fd = openSync(join(workDir, "write-phase-fdatasync.bin"), "a");
  const disk: Series = {
    layer: "disk", store: "sqlite-fsync", label: "2 × (append 128 B + fdatasync), bare", warmupTag: "d",
    run: () => {
      writeSync(fd, payload);
      fdatasyncSync(fd);
      writeSync(fd, payload);
      fdatasyncSync(fd);
    },
    close: () => closeSync(fd),
  };
  const fsyncSeries = [
    disk,
    rawSqliteSeries(join(workDir, "raw-fsync.db"), "fsync"),
    await rawSchemaSeries(join(workDir, "raw-schema-fsync.db"), "fsync"),
    ledgerSeries(sqliteLedger(join(workDir, "direct-fsync.db"), { durability: "fsync" }), "sqlite-fsync", "ledger.claim + ledger.update, no gate (fsync)"),
    gateSeries(sqliteLedger(join(workDir, "write-fsync.db"), { durability: "fsync" }), "sqlite-fsync", "gate.runToolUses, SQLite fsync"),
  ];
  progress(`write: durability fsync: ${w} warm-up + ${config.writeFsync} calls per series, interleaved in blocks of ${block}: ${fsyncSeries.map((s) => s.layer).join(", ")}`);
  const fsyncSummaries = await interleave(fsyncSeries, w, config.writeFsync, block);
  const two = fsyncSummaries[0];
  if (!two) throw new Error("unreachable: no disk series");
  fsyncSeries.forEach((s, k) => {
    const calls = fsyncSummaries[k];
    if (!calls) return;
    rows.push({
      layer: s.layer, store: s.store, label: s.label, calls,
      ratioToTwoFdatasyncs: calls.median / two.median,
      ratioToTwoFdatasyncsP99: calls.p99 / two.p99,
      ratioToPhase1: sync ? calls.median / (2 * sync.appendFdatasync.median) : null,
    });
  });

  const processSeries = [
    rawSqliteSeries(join(workDir, "raw-process.db"), "process"),
    await rawSchemaSeries(join(workDir, "raw-schema-process.db"), "process"),
    ledgerSeries(sqliteLedger(join(workDir, "direct-process.db"), { durability: "process" }), "sqlite-process", "ledger.claim + ledger.update, no gate (process)"),
    gateSeries(sqliteLedger(join(workDir, "write-process.db"), { durability: "process" }), "sqlite-process", "gate.runToolUses, SQLite process"),
  ];
  progress(`write: durability process: ${w} warm-up + ${config.writeProcess} calls per series, interleaved in blocks of ${block}`);
  const processSummaries = await interleave(processSeries, w, config.writeProcess, block);

  const memorySeries = [
    ledgerSeries(memoryLedger(), "memory", "ledger.claim + ledger.update, no gate (memory)"),
    gateSeries(memoryLedger(), "memory", "gate.runToolUses, memory ledger"),
  ];
  progress(`write: memory ledger: ${w} warm-up + ${config.writeMemory} calls per series, interleaved in blocks of ${block * 10}`);
  const memorySummaries = await interleave(memorySeries, w, config.writeMemory, block * 10);

  [...processSeries.map((s, k) => [s, processSummaries[k]] as const), ...memorySeries.map((s, k) => [s, memorySummaries[k]] as const)]
    .forEach(([s, calls]) => {
      if (calls) rows.push({ layer: s.layer, store: s.store, label: s.label, calls, ratioToTwoFdatasyncs: null, ratioToTwoFdatasyncsP99: null, ratioToPhase1: null });
    });
  const gateFsync = rows.find((r) => r.layer === "gate" && r.store === "sqlite-fsync");
  if (!gateFsync) throw new Error("unreachable: no gated fsync row");
  return { rows, gateFsync, twoFdatasyncs: two, block };
}

interface ScaleRow {
  readonly store: "sqlite-fsync" | "sqlite-process" | "memory" | "json-file";
  /** The nominal size (1,000 / 10,000 / 100,000). */
  readonly size: number;
  /** Records actually in the ledger when the measured calls began. */
  readonly recordsAtStart: number;
  readonly calls: Summary;
  /** Seconds spent pre-filling up to this size (for the row that did the filling). */
  readonly fillSeconds?: number;
}

/**
 * One ledger per size, each pre-filled through the gate; then the sizes are measured interleaved
 * in blocks, so a burst of load from other processes cannot pass for growth with size.
 */
async function phaseScale(): Promise<ScaleRow[]> {
  const rows: ScaleRow[] = [];
  const sizes = config.sizes;
  const files = sizes.map((size) => join(workDir, `scale-${size}.db`));
  const fillSeconds: number[] = [];
  for (const [k, size] of sizes.entries()) {
    const file = files[k] ?? "";
    // Pre-fill through the gate on a "process" ledger: the store's own schema, indexes and row shape.
    progress(`scale: filling SQLite ledger to ${size.toLocaleString("en-US")} records (gate, durability process, ${config.fillBatch} calls per message)`);
    const start = process.hrtime.bigint();
    const filler = sqliteLedger(file, { durability: "process" });
    await fill(gateOn(filler), 0, size, config.fillBatch);
    await filler.close();
    fillSeconds.push(usSince(start) / 1e6);
    const have = countRows(file);
    if (have !== size) throw new Error(`${file} holds ${have} records after filling to ${size}`);
  }
  for (const durability of ["fsync", "process"] as const) {
    const n = durability === "fsync" ? config.scaleFsync : config.scaleProcess;
    const store = `sqlite-${durability}` as const;
    const before = files.map(countRows);
    const series = sizes.map((size, k) =>
      gateSeries(sqliteLedger(files[k] ?? "", { durability }), store, `${size}`, `s${durability[0] ?? ""}`));
    progress(`scale: sqlite ${durability} at ${before.join(" / ")} records: ${config.scaleWarmup} warm-up + ${n} calls each, interleaved in blocks of ${config.writeBlock}`);
    const summaries = await interleave(series, config.scaleWarmup, n, config.writeBlock);
    sizes.forEach((size, k) => {
      const calls = summaries[k];
      const recordsAtStart = (before[k] ?? 0) + config.scaleWarmup;
      if (calls) rows.push({ store, size, recordsAtStart, calls, ...(durability === "fsync" ? { fillSeconds: fillSeconds[k] ?? 0 } : {}) });
    });
    collectGarbage();
  }
  // The memory ledger, same sizes, same way.
  const memories = sizes.map(() => memoryLedger());
  for (const [k, size] of sizes.entries()) {
    progress(`scale: filling memory ledger to ${size.toLocaleString("en-US")} records`);
    const memory = memories[k];
    if (memory) await fill(gateOn(memory), 0, size, config.fillBatch);
  }
  progress(`scale: memory: ${config.scaleWarmup} warm-up + ${config.scaleMemory} calls per size, interleaved in blocks of ${config.writeBlock * 10}`);
  const memSummaries = await interleave(sizes.map((size, k) => gateSeries(memories[k] ?? memoryLedger(), "memory", `${size}`, "sm")), config.scaleWarmup, config.scaleMemory, config.writeBlock * 10);
  sizes.forEach((size, k) => {
    const calls = memSummaries[k];
    if (calls) rows.push({ store: "memory", size, recordsAtStart: size + config.scaleWarmup, calls });
  });
  return rows;
}

interface SustainWindow {
  readonly durability: "fsync" | "process";
  /** Gated write calls made on this open ledger before the window began. */
  readonly callsBefore: number;
  readonly calls: Summary;
  /** Size of the -wal file and of the main database file at the end of the window. */
  readonly walBytes: number;
  readonly dbBytes: number;
}

const fileSize = (file: string) => (existsSync(file) ? statSync(file).size : 0);

/**
 * Many gated writes on ONE open SQLite ledger, timed per window, with the WAL file's size after each
 * window. SQLite's auto-checkpoint should keep the WAL near 1,000 pages (~4 MB) and the cost flat.
 */
async function phaseSustain(): Promise<SustainWindow[]> {
  const out: SustainWindow[] = [];
  for (const durability of ["fsync", "process"] as const) {
    const total = durability === "fsync" ? config.sustainFsync : config.sustainProcess;
    const size = Math.ceil(total / config.sustainWindows);
    const file = join(workDir, `sustain-${durability}.db`);
    const ledger = sqliteLedger(file, { durability });
    const gate = gateOn(ledger);
    progress(`sustain: ${total} gated writes on one open SQLite ${durability} ledger, ${config.sustainWindows} windows`);
    try {
      for (let done = 0; done < total; done += size) {
        collectGarbage();
        const calls = summarize(await timeAsync(Math.min(size, total - done), (i) => gatedCall(gate, writeBlock(`u${durability[0] ?? ""}`, done + i))));
        out.push({ durability, callsBefore: done, calls, walBytes: fileSize(`${file}-wal`), dbBytes: fileSize(file) });
      }
    } finally {
      await ledger.close();
    }
    rmSync(file, { force: true });
  }
  return out;
}

function phaseJson(): ScaleRow[] {
  const rows: ScaleRow[] = [];
  config.sizes.forEach((size, s) => {
    const n = config.jsonCalls[s] ?? 10;
    const file = join(workDir, `json-ledger-${size}.json`);
    const data: JsonLedgerData = {};
    for (let i = 0; i < size; i++) data[toolUseId("fill", i)] = { ...TICKET };
    writeWhole(file, data);
    progress(`json: ${size} records: 3 warm-up + ${n} calls`);
    const run = (): Json => ({ ...TICKET });
    for (let i = 0; i < 3; i++) jsonLedgerCall(file, toolUseId(`jw${size}`, i), run);
    collectGarbage();
    const samples = timeSync(n, (i) => jsonLedgerCall(file, toolUseId(`jm${size}`, i), run));
    rows.push({ store: "json-file", size, recordsAtStart: size + 3, calls: summarize(samples) });
    rmSync(file, { force: true });
    collectGarbage();
  });
  return rows;
}

// ---------------------------------------------------------------------------------------------
// Report

interface Verdict {
  readonly target: string;
  readonly measured: string;
  readonly met: boolean | null;
}

function verdicts(sync: SyncResults | undefined, read: ReadResults | undefined, write: WriteResults | undefined, scale: ScaleRow[], sustain: SustainWindow[]): Verdict[] {
  const out: Verdict[] = [];
  const ratio = write?.gateFsync.ratioToTwoFdatasyncs;
  if (write && ratio != null) {
    out.push({
      target: "gated write on SQLite (fsync) ≤ 1.2 × two fdatasyncs (median)",
      measured: `${fmtUs(write.gateFsync.calls.median)} vs ${fmtUs(write.twoFdatasyncs.median)} = ${ratio.toFixed(2)}×` +
        (write.gateFsync.ratioToPhase1 === null || !sync ? "" : ` (${write.gateFsync.ratioToPhase1.toFixed(2)}× of 2 × phase 1's ${fmtUs(sync.appendFdatasync.median)})`),
      met: ratio <= 1.2,
    });
  }
  if (read) {
    out.push({
      target: "read call overhead in (single-digit) microseconds (median)",
      measured: `+${fmtUs(read.overheadMedian)} median, +${fmtUs(read.overheadP99)} p99`,
      met: read.overheadMedian < 10,
    });
  }
  for (const store of ["sqlite-fsync", "sqlite-process", "memory"] as const) {
    const mine = scale.filter((r) => r.store === store);
    if (mine.length < 2) continue;
    const medians = mine.map((r) => r.calls.median);
    const growth = Math.max(...medians) / Math.min(...medians);
    out.push({
      target: `${store}: write cost flat in ledger size (max/min median over sizes ≤ 1.25)`,
      measured: mine.map((r) => `${r.size.toLocaleString("en-US")}: ${fmtUs(r.calls.median)}`).join(", ") + ` → ${growth.toFixed(2)}×`,
      met: growth <= 1.25,
    });
  }
  for (const durability of ["fsync", "process"] as const) {
    const mine = sustain.filter((w) => w.durability === durability);
    const first = mine[0];
    const last = mine[mine.length - 1];
    if (!first || !last || mine.length < 2) continue;
    const growth = last.calls.median / first.calls.median;
    const walMB = last.walBytes / 1e6;
    out.push({
      target: `sqlite-${durability}: flat over a long run on one open ledger (last/first window median ≤ 1.25, WAL ≤ 16 MB)`,
      measured: `${fmtUs(first.calls.median)} → ${fmtUs(last.calls.median)} (${growth.toFixed(2)}×) after ${(last.callsBefore + last.calls.n).toLocaleString("en-US")} calls; WAL ${walMB.toFixed(1)} MB`,
      met: growth <= 1.25 && walMB <= 16,
    });
  }
  return out;
}

function printReport(
  env: EnvInfo, sync: SyncResults | undefined, read: ReadResults | undefined, write: WriteResults | undefined,
  scale: ScaleRow[], sustain: SustainWindow[], json: ScaleRow[], v: Verdict[],
): void {
  const out: string[] = [];
  const say = (s = "") => out.push(s);
  say(`effectgate benchmark${quick ? " (--quick: small counts, smoke run only)" : ""}`);
  say();
  say(describeEnv(env));
  if (sync) {
    say();
    say(`1. Bare sync cost on this disk (${sync.iterations} iterations each; only the sync call is timed)`);
    say(table(["operation", "median", "p99", "mean", "max"], [
      [`append ${sync.appendBytes} B + fdatasync`, sync.appendFdatasync],
      [`append ${sync.appendBytes} B + fsync`, sync.appendFsync],
      ["overwrite 4 KiB in place + fdatasync", sync.overwriteFdatasync],
      ["append 4 × (24 + 4096) B + fsync (one ledger commit)", sync.walCommitFsync],
    ].map(([name, s]) => [name as string, fmtUs((s as Summary).median), fmtUs((s as Summary).p99), fmtUs((s as Summary).mean), fmtUs((s as Summary).max)])));
  }
  if (read) {
    say();
    say(`2. read call (tool returns a constant; ${read.iterations.toLocaleString("en-US")} calls each, bare and gated alternating)`);
    say(table(["", "median", "p99"], [
      ["bare tool call (await execute)", fmtUs(read.bare.median), fmtUs(read.bare.p99)],
      ["gate.runToolUses([tool_use])", fmtUs(read.gated.median), fmtUs(read.gated.p99)],
      ["gate overhead", `+${fmtUs(read.overheadMedian)}`, `+${fmtUs(read.overheadP99)}`],
    ]));
    say(`   ledger untouched by read calls: ${read.ledgerUntouched ? "yes (the SQLite file was never created)" : "NO"}`);
  }
  if (write) {
    say();
    say(`3. write call on an empty ledger (fresh tool_use id per call), from the disk floor up to the full gated call;`);
    say(`   each durability's rows were run interleaved in blocks of ${write.block} (memory: ${write.block * 10}), so they share the same moments of machine load`);
    const r = (x: number | null) => (x === null ? "" : `${x.toFixed(2)}×`);
    say(table(["what is timed (per call)", "calls", "median", "p99", "mean", "÷ 2 fdatasyncs (median / p99)", "÷ 2 × phase 1"], write.rows.map((row) => [
      row.label, row.calls.n.toLocaleString("en-US"), fmtUs(row.calls.median), fmtUs(row.calls.p99), fmtUs(row.calls.mean),
      row.ratioToTwoFdatasyncs === null ? "" : `${r(row.ratioToTwoFdatasyncs)} / ${r(row.ratioToTwoFdatasyncsP99)}`,
      r(row.ratioToPhase1),
    ])));
  }
  const all = [...scale, ...json];
  if (all.length > 0) {
    say();
    say("4–5. write call cost vs ledger size: median / p99 per call (calls measured at each size in brackets)");
    const sizes = [...new Set(all.map((r) => r.size))].sort((a, b) => a - b);
    const stores = [...new Set(all.map((r) => r.store))];
    say(table(["store", ...sizes.map((s) => `${s.toLocaleString("en-US")} records`)], stores.map((store) => [
      store,
      ...sizes.map((size) => {
        const row = all.find((x) => x.store === store && x.size === size);
        return row ? `${fmtUs(row.calls.median)} / ${fmtUs(row.calls.p99)} [${row.calls.n}]` : "—";
      }),
    ])));
    say("   (sizes measured interleaved in blocks; the process rows start after the fsync rows' calls, see recordsAtStart in the JSON)");
  }
  if (sustain.length > 0) {
    say();
    say("4b. gated writes over a long run on ONE open SQLite ledger (per window: median / p99; file sizes at the window's end)");
    say(table(["durability", "calls before window", "window", "median", "p99", "WAL file", "db file"], sustain.map((w) => [
      w.durability, w.callsBefore.toLocaleString("en-US"), w.calls.n.toLocaleString("en-US"), fmtUs(w.calls.median), fmtUs(w.calls.p99),
      `${(w.walBytes / 1e6).toFixed(1)} MB`, `${(w.dbBytes / 1e6).toFixed(1)} MB`,
    ])));
  }
  if (v.length > 0) {
    say();
    say("Targets");
    say(table(["target", "measured", "met"], v.map((x) => [x.target, x.measured, x.met === null ? "?" : x.met ? "yes" : "NO"])));
  }
  process.stdout.write(`${out.join("\n")}\n`);
}

// ---------------------------------------------------------------------------------------------

async function main(): Promise<void> {
  const started = process.hrtime.bigint();
  const probe = new Database(":memory:");
  const sqliteVersion = (probe.prepare("SELECT sqlite_version() AS v").get() as { v: string }).v;
  probe.close();
  const { createRequire } = await import("node:module");
  const require = createRequire(import.meta.url);
  const betterSqlite3 = (require("better-sqlite3/package.json") as { version: string }).version;
  const env = envInfo(workDir, projectDir, { betterSqlite3, sqlite: sqliteVersion });
  progress(`temp dir ${workDir}${env.sameFilesystemAsProject ? " (same filesystem as the project)" : " (NOT the project's filesystem)"}`);

  let sync: SyncResults | undefined;
  let read: ReadResults | undefined;
  let write: WriteResults | undefined;
  let scale: ScaleRow[] = [];
  let sustain: SustainWindow[] = [];
  let json: ScaleRow[] = [];
  try {
    if (runs("fsync")) sync = phaseSync();
    collectGarbage();
    if (runs("read")) read = await phaseRead();
    collectGarbage();
    if (runs("write")) write = await phaseWrite(sync);
    collectGarbage();
    if (runs("scale")) scale = await phaseScale();
    collectGarbage();
    if (runs("sustain")) sustain = await phaseSustain();
    collectGarbage();
    if (runs("json")) json = phaseJson();
  } finally {
    if (keep) progress(`kept ${workDir}`);
    else rmSync(workDir, { recursive: true, force: true });
  }
  const v = verdicts(sync, read, write, scale, sustain);
  printReport(env, sync, read, write, scale, sustain, json, v);
  const seconds = usSince(started) / 1e6;
  const loadAverageAtEnd = os.loadavg().map((l) => Math.round(l * 100) / 100);
  process.stdout.write(`\nfinished in ${seconds.toFixed(1)} s; load avg at end ${loadAverageAtEnd.join(" / ")}; operator alerts raised: ${alerts}\n`);
  mkdirSync(dirname(outFile), { recursive: true });
  writeFileSync(outFile, `${JSON.stringify({
    note: "all times in microseconds (µs) unless the field name says otherwise",
    quick, phases: only ? [...only] : [...PHASES], config, env, loadAverageAtEnd, seconds, alerts,
    results: { sync, read, write, scale, sustain, json }, targets: v,
  }, null, 2)}\n`);
  process.stdout.write(`results written to ${outFile}\n`);
}

main().catch((err: unknown) => {
  process.stderr.write(`benchmark failed: ${err instanceof Error ? err.stack ?? err.message : String(err)}\n`);
  rmSync(workDir, { recursive: true, force: true });
  process.exit(1);
});
