/**
 * Crash tests with real processes, a real SQLite file and a real SIGKILL.
 *
 * A child agent process (fixtures/agent.mjs, built package only) saves a checkpoint and calls
 * create_ticket against a real HTTP ticket service running here, in the parent; `killAt(point)`
 * SIGKILLs the child at that point. A fresh child then resumes (or recovers) from the same
 * ledger and checkpoint files. The ticket service's own count is the ground truth.
 *
 * No sleeps: every step waits for the child's exit. A claim's owner id names the child's pid,
 * so the fresh process sees at once that the holder is dead (no lease to wait out).
 */
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { startTicketService, type Ticket, type TicketService } from "../../demo/ticket-service.js";
import { sqliteLedger } from "../../src/stores/sqlite/index.js";
import type { CallRecord } from "../../src/contracts/calls.js";
import type { ToolResultBlock } from "../../src/core/blocks.js";
import type { RecoverySummary } from "../../src/root/create-gate.js";
import type { GateStats } from "../../src/gate/alerts.js";
import type { FaultPoint } from "../../src/gate/faults.js";
import { FAULT_POINTS } from "../../src/testing.js";
import { requireBuild, runFixture, type FixtureExit } from "../support/processes.js";
import { tempDir } from "../support/tmp.js";

const agent = fileURLToPath(new URL("./fixtures/agent.mjs", import.meta.url));
const scope = { tenant: "acme", task: "support-42" };
const dir = tempDir("effectgate-crash-");

beforeAll(() => requireBuild());


/** The current test's ticket service (each test starts its own, so counts start at 0). */
let service: TicketService;
const running: TicketService[] = [];
afterEach(async () => {
  await Promise.all(running.splice(0).map((s) => s.close()));
});

interface Job {
  readonly mode: "crash" | "resume" | "recover";
  readonly ledger: string;
  readonly checkpoint: string;
  readonly url: string;
  readonly probe: boolean;
  readonly point?: FaultPoint;
  readonly content?: readonly unknown[];
  readonly scope?: typeof scope;
}

type Exit = FixtureExit;

/** Runs the agent fixture to its end (exit or death) and collects its JSON lines. */
function runAgent(job: Job): Promise<Exit> {
  return runFixture(agent, job, { cwd: dir, label: `agent (${job.mode})` });
}

interface Outcome {
  readonly toolResults: ToolResultBlock[];
  readonly stats: GateStats;
  readonly summary?: RecoverySummary;
  readonly resumedScope?: typeof scope;
}

/** A fresh process's run must exit 0 and print its outcome last. */
function outcomeOf(exit: Exit): Outcome {
  expect(exit, `the fresh agent failed; stderr:\n${exit.stderr}`).toMatchObject({ code: 0, signal: null });
  return exit.lines.at(-1) as Outcome;
}

async function readRecord(file: string, key: string): Promise<CallRecord | undefined> {
  const ledger = sqliteLedger(file, { create: false });
  try {
    return await ledger.calls.get(scope.tenant, key);
  } finally {
    await ledger.close();
  }
}

const ticketUse = (id: string, customer: string) => ({
  type: "tool_use", id, name: "create_ticket", input: { customer, title: `${customer}: internet down since 09:00` },
});
const content = (...uses: ReturnType<typeof ticketUse>[]) => [{ type: "text", text: "Opening a ticket." }, ...uses];

let runs = 0;
/** Starts a fresh ticket service and runs a child that is SIGKILLed at `point`; `fresh` then starts the next child. */
async function crashAt(point: FaultPoint, options: { probe?: boolean; uses?: ReturnType<typeof ticketUse>[] } = {}) {
  const { url } = (service = await startTicketService());
  running.push(service);
  const n = runs++;
  const files = { ledger: join(dir, `ledger-${n}.db`), checkpoint: join(dir, `checkpoint-${n}.json`) };
  const probe = options.probe ?? true;
  const pending = content(...(options.uses ?? [ticketUse("toolu_01", "cus_ada")]));
  const exit = await runAgent({ mode: "crash", ...files, url, probe, point, content: pending, scope });
  expect(exit.lines.some((l) => (l as { survived?: boolean }).survived), "killAt did not kill the agent").toBe(false);
  expect(exit.signal, `the agent was not SIGKILLed; stderr:\n${exit.stderr}`).toBe("SIGKILL");
  const started = (exit.lines[0] as { started: { pid: number; owner: string } }).started;
  return { ...files, probe, started, fresh: (mode: "resume" | "recover") => runAgent({ mode, ...files, url, probe }) };
}

/** The one ticket the service holds, made with `key`; fails when there are none or several. */
function onlyTicket(key: string): Ticket {
  const made = service.tickets.filter((t) => t.idempotencyKey === key);
  expect(made, `tickets made with key ${key}`).toHaveLength(1);
  return made[0]!;
}

/** What each point leaves behind at the moment of death: proves the kill happened where it says. */
const AT_DEATH: Record<FaultPoint, { tickets: number; state: CallRecord["state"] }> = {
  after_claim: { tickets: 0, state: "in_progress" },
  after_execute: { tickets: 1, state: "in_progress" },
  after_record: { tickets: 1, state: "completed" },
};

/** How the fresh process answers after each point (create_ticket with its probe). */
const RESUMED: Record<FaultPoint, { stats: GateStats; attempts: number }> = {
  // The claim was durable but the tool never ran: the probe says absent, so it runs now, same key.
  after_claim: { stats: { executed: 1, replayed: 0, alerts: 0 }, attempts: 2 },
  // The ticket exists but the outcome was not recorded: the probe says done, nothing runs again.
  after_execute: { stats: { executed: 0, replayed: 0, alerts: 0 }, attempts: 1 },
  // The outcome was recorded: replayed from the ledger.
  after_record: { stats: { executed: 0, replayed: 1, alerts: 0 }, attempts: 1 },
};

describe("SIGKILL at each fault point, then resume from the checkpoint in a fresh process", () => {
  it.each(FAULT_POINTS)("%s: exactly one ticket, and the resumed tool_result is that ticket", async (point) => {
    const run = await crashAt(point);

    expect(service.tickets).toHaveLength(AT_DEATH[point].tickets);
    const dead = await readRecord(run.ledger, "toolu_01");
    expect(dead?.state).toBe(AT_DEATH[point].state);
    if (dead?.state === "in_progress") expect(dead.owner).toBe(run.started.owner);

    const { toolResults, stats, resumedScope } = outcomeOf(await run.fresh("resume"));

    expect(resumedScope).toEqual(scope); // the pending call came from the checkpoint file
    expect(service.tickets).toHaveLength(1);
    const ticket = onlyTicket("toolu_01");
    expect(ticket.customer).toBe("cus_ada");
    expect(toolResults).toHaveLength(1);
    expect(toolResults[0]).toMatchObject({ type: "tool_result", tool_use_id: "toolu_01", is_error: false });
    expect(JSON.parse(toolResults[0]!.content)).toEqual(ticket);
    expect(stats).toEqual(RESUMED[point].stats);
    expect(await readRecord(run.ledger, "toolu_01")).toMatchObject({
      state: "completed", result: ticket, owner: null, leaseExpiresAt: null, attempts: RESUMED[point].attempts,
    });
  });

  it("a tool without a probe, killed after its effect: never re-run blindly, the call goes to a human", async () => {
    const run = await crashAt("after_execute", { probe: false });
    expect(service.tickets).toHaveLength(1);

    const { toolResults, stats } = outcomeOf(await run.fresh("resume"));

    expect(service.tickets).toHaveLength(1);
    expect(toolResults).toHaveLength(1);
    expect(toolResults[0]).toMatchObject({ tool_use_id: "toolu_01", is_error: true });
    expect(toolResults[0]!.content).toMatch(/^EG_NEEDS_HUMAN: the outcome of this create_ticket call is unknown .*has no probe/);
    expect(stats.executed).toBe(0);
    expect(await readRecord(run.ledger, "toolu_01")).toMatchObject({ state: "needs_human", result: null, owner: null });

    // Asking again (another resume) gives the same answer and still creates nothing.
    const again = outcomeOf(await run.fresh("resume"));
    expect(again.toolResults).toEqual(toolResults);
    expect(service.tickets).toHaveLength(1);
  });

  /** Tickets at death with two calls: the kill comes at the first call to reach the point; the other may be further or not. */
  const TWO_AT_DEATH: Record<FaultPoint, [min: number, max: number]> = {
    after_claim: [0, 0], after_execute: [1, 2], after_record: [1, 2],
  };

  it.each(FAULT_POINTS)("two create_ticket calls in one message, killed at the first %s reached: each gets its own single ticket", async (point) => {
    const uses = [ticketUse("toolu_a", "cus_ada"), ticketUse("toolu_b", "cus_bob")];
    const run = await crashAt(point, { uses });
    const [min, max] = TWO_AT_DEATH[point];
    expect(service.tickets.length).toBeGreaterThanOrEqual(min);
    expect(service.tickets.length).toBeLessThanOrEqual(max);

    const { toolResults } = outcomeOf(await run.fresh("resume"));

    expect(service.tickets).toHaveLength(2);
    expect(toolResults.map((r) => r.tool_use_id)).toEqual(["toolu_a", "toolu_b"]);
    for (const [i, use] of uses.entries()) {
      const ticket = onlyTicket(use.id);
      expect(ticket.customer).toBe(use.input.customer);
      expect(toolResults[i]!.is_error).toBe(false);
      expect(JSON.parse(toolResults[i]!.content)).toEqual(ticket);
      expect(await readRecord(run.ledger, use.id)).toMatchObject({ state: "completed", result: ticket });
    }
  });
});

describe("SIGKILL, then gate.recover() in a fresh process, then a replay of the same message", () => {
  const cases: { point: FaultPoint; probe: boolean; summary: Omit<RecoverySummary, "notes">; state: CallRecord["state"]; note?: RegExp; replayRuns?: number }[] = [
    // The holder died just now: a request it sent may land for settleMs more, so recovery leaves the
    // call for later; the replay that follows waits out the horizon, hears "absent", and runs it once.
    { point: "after_claim", probe: true, summary: { examined: 1, completed: 0, reexecuted: 0, needsHuman: 0, leftForLater: 1 }, state: "completed",
      note: /^left uncertain: the probe says absent so far, but the request sent at .* may still land until .* \(settleMs\); asked again later$/, replayRuns: 1 },
    { point: "after_execute", probe: true, summary: { examined: 1, completed: 1, reexecuted: 0, needsHuman: 0, leftForLater: 0 }, state: "completed" },
    { point: "after_record", probe: true, summary: { examined: 0, completed: 0, reexecuted: 0, needsHuman: 0, leftForLater: 0 }, state: "completed" },
    { point: "after_execute", probe: false, summary: { examined: 1, completed: 0, reexecuted: 0, needsHuman: 1, leftForLater: 0 }, state: "needs_human" },
  ];

  it.each(cases)("$point, probe $probe: one ticket, record $state, the summary counts it", async ({ point, probe, summary, state, note, replayRuns = 0 }) => {
    const run = await crashAt(point, { probe });

    const out = outcomeOf(await run.fresh("recover"));

    const { notes, ...counts } = out.summary!;
    expect(counts).toEqual(summary);
    if (note) {
      expect(notes).toHaveLength(1);
      expect(notes[0]).toMatchObject({ tenant: "acme", key: "toolu_01", tool: "create_ticket" });
      expect(notes[0]!.note).toMatch(note);
    } else {
      expect(notes).toEqual([]);
    }
    expect(service.tickets).toHaveLength(1);
    const ticket = onlyTicket("toolu_01");
    // Either recovery did the work and the replay only reads the ledger, or recovery left it for
    // the replay, which waited out the settle horizon and ran it once.
    expect(out.stats.executed).toBe(summary.reexecuted + replayRuns);
    const record = await readRecord(run.ledger, "toolu_01");
    expect(record?.state).toBe(state);
    const [result] = out.toolResults;
    if (state === "completed") {
      expect(out.stats.replayed).toBe(1 - replayRuns);
      expect(result).toMatchObject({ tool_use_id: "toolu_01", is_error: false });
      expect(JSON.parse(result!.content)).toEqual(ticket);
      expect(record?.result).toEqual(ticket);
    } else {
      expect(result).toMatchObject({ tool_use_id: "toolu_01", is_error: true });
      expect(result!.content).toMatch(/^EG_NEEDS_HUMAN/);
    }
  });
});
