/**
 * The explorer's second mode: real SIGKILLs. Each run starts a child process (kill-child.ts) that
 * sends one message of charge calls through a gate on a shared SQLite or PostgreSQL ledger, to an
 * HTTP downstream in this process, and kills itself at the durable step the seed chose. This
 * process then recovers as a restarted worker would (gate.recover() until nothing is held),
 * replays the message, and checks the same invariants as the simulated schedules against the
 * downstream's own counters.
 */
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { fileURLToPath } from "node:url";
import { renderResult, type ToolResultBlock } from "../../core/blocks.js";
import type { Json } from "../../core/json.js";
import type { Stores } from "../../contracts/stores.js";
import { createGate } from "../../root/create-gate.js";
import { sqliteLedger } from "../../stores/sqlite/index.js";
import { startHttpDownstream, type HttpDownstream } from "./http-downstream.js";
import { chargeTool, type ChargeToolOptions } from "./http-tools.js";
import { INVARIANTS, type Invariant, type Violation } from "./invariants.js";
import type { KillChildConfig } from "./kill-child.js";
import { dropSchema } from "./pg-schema.js";
import { seededRng } from "./rng.js";

export interface KillOptions {
  /** How many child processes to start (default 100); most are killed, the rest finish. */
  readonly runs?: number;
  /** The first seed (default 1). */
  readonly seed?: number;
  readonly ledger?: "sqlite" | { readonly postgres: string };
  /** Children at once (default 2). */
  readonly parallel?: number;
  readonly onRun?: (run: KillRun) => void;
}

export interface KillRun {
  readonly seed: number;
  readonly killed: boolean;
  readonly steps: number | undefined;
  readonly violations: readonly Violation[];
}

export interface KillReport {
  readonly ledger: string;
  readonly runs: number;
  /** Runs whose child died by SIGKILL at its chosen step. */
  readonly kills: number;
  readonly calls: number;
  readonly violations: readonly Violation[];
  readonly byInvariant: Readonly<Record<Invariant, number>>;
  /**
   * Runs where a call went wrong only after the machine broke the horizon its tool declared: its
   * request was applied more than settleMs after it was sent (the downstream lives in this process,
   * and a loaded machine can hold a request that long). The gate's promise assumes that horizon
   * (docs/guarantees.md), so these are not violations; they are listed, to be read, and a run on a
   * quieter machine (or fewer --lanes) should have none.
   */
  readonly horizonBroken: readonly Violation[];
  readonly ms: number;
}

const CHILD = fileURLToPath(new URL("./kill-child.js", import.meta.url));
const NOTHING_RAN = /nothing was executed/i;

export async function exploreKills(options: KillOptions = {}): Promise<KillReport> {
  const runs = options.runs ?? 100;
  const first = options.seed ?? 1;
  const lanes = Math.max(1, options.parallel ?? 2);
  const started = performance.now();
  const place = await openPlace(options.ledger ?? "sqlite");
  const byInvariant = Object.fromEntries(INVARIANTS.map((i) => [i, 0])) as Record<Invariant, number>;
  const violations: Violation[] = [];
  const horizonBroken: Violation[] = [];
  let kills = 0;
  let calls = 0;
  try {
    await Promise.all(Array.from({ length: lanes }, async (_, lane) => {
      const downstream = await startHttpDownstream();
      try {
        for (let i = lane; i < runs; i += lanes) {
          const run = await killRun(first + i, place, downstream);
          if (run.killed) kills++;
          calls += run.calls;
          for (const v of run.violations) {
            byInvariant[v.invariant]++;
            if (violations.length < 200) violations.push(v);
          }
          if (horizonBroken.length < 200) horizonBroken.push(...run.horizonBroken);
          options.onRun?.(run);
        }
      } finally {
        await downstream.close();
      }
    }));
  } finally {
    await place.close();
  }
  return { ledger: place.name, runs, kills, calls, violations, byInvariant, horizonBroken, ms: performance.now() - started };
}

interface Place {
  readonly name: string;
  readonly child: KillChildConfig["ledger"];
  readonly stores: Stores;
  close(): Promise<void>;
}

async function openPlace(ledger: "sqlite" | { readonly postgres: string }): Promise<Place> {
  if (ledger === "sqlite") {
    const dir = mkdtempSync(join(tmpdir(), "effectgate-kills-"));
    const file = join(dir, "ledger.db");
    const stores = sqliteLedger(file, { durability: "process" });
    return { name: "sqlite", child: { sqlite: file }, stores, close: async () => { await stores.close(); rmSync(dir, { recursive: true, force: true }); } };
  }
  const schema = `effectgate_kills_${process.pid}_${Date.now().toString(36)}`;
  const { postgresLedger } = await import("../../stores/postgres/index.js");
  const stores = postgresLedger({ connectionString: ledger.postgres, poolSize: 4 }, { schema, durability: "process" });
  return {
    name: "postgres", child: { postgres: ledger.postgres, schema }, stores,
    close: async () => {
      await stores.close();
      await dropSchema(ledger.postgres, schema);
    },
  };
}

interface ChildLine {
  readonly started?: string;
  readonly answer?: ToolResultBlock;
  readonly done?: boolean;
  readonly steps?: number;
  readonly error?: string;
}

async function killRun(seed: number, place: Place, downstream: HttpDownstream): Promise<KillRun & { calls: number; horizonBroken: Violation[] }> {
  const rng = seededRng(seed);
  const tenant = `k${seed}`;
  const maxDelay = rng.pick([0, 5, 30]);
  // settleMs: the longest delay, plus room for this machine's scheduling.
  const tool: ChargeToolOptions = { probe: rng.chance(0.8), honoursKeys: rng.chance(0.4), settleMs: maxDelay + 100 };
  downstream.configure({ honoursKeys: tool.honoursKeys, delayMs: () => rng.between(0, maxDelay) });
  const count = rng.between(1, 4);
  // Ids unique across runs, as a model's tool_use ids are: the downstream sees keys, not tenants.
  const calls = Array.from({ length: count }, (_, i) => ({ id: `toolu_${tenant}_${i}`, ref: `${tenant}_c${i}`, amount: rng.between(1, 900) }));
  const killAt = rng.between(1, 10 * count + 6);
  const config: KillChildConfig = { ledger: place.child, url: downstream.url, tool, tenant, calls, killAt, leaseMs: 2_000 };
  const child = await runChild(config);
  const violations: Violation[] = [];
  const fail = (invariant: Invariant, message: string) => violations.push({ seed, invariant, message });
  if (child.error) fail("I3", `the child failed: ${child.error}`);

  // Recover as a restarted worker would, then replay the message.
  const stores = place.stores;
  const gate = createGate({ tools: [chargeTool(downstream.url, tool)], ledger: stores, leaseMs: 2_000, waitMs: 3_000, onAlert: () => undefined });
  const scope = { tenant, task: "kill" };
  const blocks = calls.map((c) => ({ type: "tool_use" as const, id: c.id, name: "charge", input: { ref: c.ref, amount: c.amount } }));
  let replay: ToolResultBlock[] = [];
  for (let round = 0; round < 20; round++) {
    // The replay itself settles what the dead child held (probe, waiting out the horizon); recovery covers the rest.
    replay = await gate.runToolUses(blocks, scope);
    if (round > 0) await gate.recover();
    const held = (await stores.calls.list({ tenant })).filter((r) => r.state === "in_progress" || r.state === "uncertain");
    if (held.length === 0 && replay.every((b) => !/^EG_(IN_PROGRESS|LEDGER_UNAVAILABLE)\b/.test(b.content))) break;
    if (round === 19) fail("I3", `still held after 20 rounds: ${held.map((r) => `${r.key} ${r.state}`).join(", ")}`);
    await new Promise((resolve) => setTimeout(resolve, tool.settleMs));
  }
  await gate.drain();
  await gate.close();

  const horizonBroken: Violation[] = [];
  for (const [i, c] of calls.entries()) {
    // What goes wrong with a call the machine held past its tool's declared horizon is counted apart (KillReport.horizonBroken).
    const landedAfterMs = downstream.landedAfterMs(c.ref);
    const before = violations.length;
    const effects = downstream.effects(c.ref);
    const sends = downstream.sends(c.ref);
    const protectedByProbe = tool.probe || tool.honoursKeys;
    if (effects > 1) fail(protectedByProbe ? "I1" : "I2", `${c.ref} was applied ${effects} times (probe ${tool.probe}, keys honoured ${tool.honoursKeys})`);
    if (!protectedByProbe && sends > 1) fail("I2", `${c.ref} (no probe) was sent ${sends} times`);
    const record = await stores.calls.get(tenant, c.id);
    const real = downstream.resultOf(c.ref);
    if (!record) {
      fail("I3", `${c.ref} has no record after recovery`);
      continue;
    }
    if (record.state !== "completed" && record.state !== "failed" && record.state !== "needs_human") fail("I3", `${c.ref} ended ${record.state}`);
    if (record.state === "completed" && effects === 0) fail("I3", `${c.ref} is recorded completed but never happened`);
    // The record's own error says how the gate came to "failed" (a probe, a refusal, an error it took for definite).
    if (record.state === "failed" && effects > 0) fail("I4", `${c.ref} is recorded failed but happened (${(record.error ?? "no error recorded").slice(0, 240)})`);
    const expected = record.state === "completed" ? renderResult(record.result) : real === undefined ? undefined : renderResult(real as Json);
    if (record.state === "completed" && real !== undefined && expected !== renderResult(real as Json)) fail("I5", `${c.ref}: the record's result is not the downstream's`);
    const answers = [...child.answers.filter((a) => a.tool_use_id === c.id), replay[i]!];
    for (const a of answers) {
      if (a.is_error !== true && a.content !== expected) fail("I5", `${c.ref} was answered ${a.content.slice(0, 100)}, not ${expected?.slice(0, 100) ?? "a recorded result"}`);
    }
    for (const a of child.answersAfterStart.get(c.id) ?? []) {
      if (NOTHING_RAN.test(a.content)) fail("I4", `the child told the agent "${a.content.slice(0, 160)}" after starting ${c.id}`);
    }
    if (violations.length > before && landedAfterMs > tool.settleMs) {
      horizonBroken.push(...violations.splice(before).map((v) => ({ ...v, message: `${v.message} (applied ${landedAfterMs} ms after it was sent; settleMs ${tool.settleMs})` })));
    }
  }
  return { seed, killed: child.killed, steps: child.steps, violations, horizonBroken, calls: calls.length };
}

async function runChild(config: KillChildConfig): Promise<{
  killed: boolean; steps: number | undefined; error: string | undefined; answers: ToolResultBlock[]; answersAfterStart: Map<string, ToolResultBlock[]>;
}> {
  const child = spawn(process.execPath, [CHILD, JSON.stringify(config)], { stdio: ["ignore", "pipe", "pipe"] });
  let out = "";
  let err = "";
  child.stdout.setEncoding("utf8").on("data", (chunk: string) => (out += chunk));
  child.stderr.setEncoding("utf8").on("data", (chunk: string) => (err += chunk));
  const exit = await new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.on("close", (code, signal) => resolve({ code, signal })));
  const started = new Set<string>();
  const answers: ToolResultBlock[] = [];
  const answersAfterStart = new Map<string, ToolResultBlock[]>();
  let steps: number | undefined;
  let error: string | undefined;
  for (const line of out.split("\n")) {
    if (line.trim() === "") continue;
    let parsed: ChildLine;
    try {
      parsed = JSON.parse(line) as ChildLine;
    } catch {
      continue; // a line cut short by the kill
    }
    if (parsed.started) started.add(parsed.started);
    if (parsed.answer) {
      answers.push(parsed.answer);
      if (started.has(parsed.answer.tool_use_id)) answersAfterStart.set(parsed.answer.tool_use_id, [...(answersAfterStart.get(parsed.answer.tool_use_id) ?? []), parsed.answer]);
    }
    if (parsed.done) steps = parsed.steps;
    if (parsed.error) error = parsed.error;
  }
  const killed = exit.signal === "SIGKILL";
  if (!killed && exit.code !== 0) error ??= `exit ${exit.code ?? exit.signal}: ${err.slice(0, 500)}`;
  return { killed, steps, error, answers, answersAfterStart };
}
