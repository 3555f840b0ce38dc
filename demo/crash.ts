/**
 * The crash demo (`effectgate demo crash`): the classic incident, reproduced with real processes.
 *
 * A support agent handles "customer reports a fault → create_ticket". Its process is killed
 * with a real SIGKILL right after the ticket service created the ticket and before the
 * agent recorded the result; a fresh process then resumes the task. This runs three ways,
 * each against its own freshly started ticket service, and counts the tickets the service
 * really created (the ground truth):
 *
 * - no-ledger: the loop keeps only its conversation checkpoint. On resume the tool_use is
 *   still pending, so the tool runs again: two tickets.
 * - ledger-after-execution: the usual tutorial design, a JSON file of {tool_use_id: result}
 *   written after the tool returns. The kill lands between the effect and the write, so the
 *   id is not in the file on resume and the tool runs again: two tickets.
 * - effectgate: the gate claims the call in its SQLite ledger before the tool runs. On resume
 *   the claim is found, its holder is dead, the tool's probe asks the service for a ticket
 *   made with the call's idempotency key, finds it, and the agent gets that ticket: one ticket.
 *
 * The orchestrator (`runCrashDemo`) and the workers (`runCrashWorker`) talk only through
 * command-line arguments, the worker's exit status and one JSON line on the worker's stdout.
 */
import { spawn } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type AgentCheckpoint, type AnyTool, type CheckpointStore, createGate, fileCheckpoint, type Scope, type ToolContext, type ToolResultBlock, type ToolUseBlock } from "effectgate";
import { messageOf } from "./text.js";
import { sqliteLedger } from "effectgate/sqlite";
import { killAt } from "effectgate/testing";
import { startTicketService } from "./ticket-service.js";
import { createTicketTool } from "./ticket-tool.js";
import { CRASH_WAYS, type CrashWayName } from "./crash-ways.js";
import { withScratchDir } from "./scratch.js";

export { CRASH_INTRO, CRASH_WAYS, isCrashWayName, type CrashWayName } from "./crash-ways.js";

export type CrashPhase = "crash" | "resume";

export interface CrashScenario {
  readonly name: CrashWayName;
  /** Tickets the ticket service really created over the crash and the resume. */
  readonly ticketsCreated: number;
  /** Tickets beyond the one the customer's report called for. */
  readonly duplicates: number;
  /** The ticket id the resumed agent got as the tool result; null if it got an error. */
  readonly resultTicketId: string | null;
}

export interface CrashDemoOptions {
  /** argv that starts a worker, e.g. [process.execPath, "/…/dist/cli/main.js", "demo", "crash-worker"]. */
  readonly workerCommand: readonly [string, ...string[]];
  /** Longest a worker may take before the demo gives up on it (default 20 s). */
  readonly workerTimeoutMs?: number;
  /** Called as each way starts, for progress output. */
  readonly onProgress?: (message: string) => void;
}

/** Runs the three ways in turn; temp files live under os.tmpdir() and are removed before this returns. */
export async function runCrashDemo(options: CrashDemoOptions): Promise<CrashScenario[]> {
  return withScratchDir(tmpdir(), "effectgate-demo-crash-", {}, async (root) => {
    const scenarios: CrashScenario[] = [];
    for (const way of CRASH_WAYS) {
      options.onProgress?.(`running "${way.label}"…`);
      scenarios.push(await runWay(way.name, join(root, way.name), options));
    }
    return scenarios;
  });
}

async function runWay(name: CrashWayName, dir: string, options: CrashDemoOptions): Promise<CrashScenario> {
  mkdirSync(dir, { recursive: true });
  const service = await startTicketService();
  try {
    const args = (phase: CrashPhase) => ["--way", name, "--phase", phase, "--service", service.url, "--dir", dir];
    const crashed = await runWorker(options, args("crash"));
    if (crashed.signal !== "SIGKILL") {
      throw new Error(`the "${name}" worker should have been killed (SIGKILL) after creating the ticket, but it ended with ${describeExit(crashed)}${stderrTail(crashed)}`);
    }
    if (service.tickets.length !== 1) {
      throw new Error(`the "${name}" worker was killed, but the ticket service counted ${service.tickets.length} tickets instead of 1 at that point${stderrTail(crashed)}`);
    }
    const resumed = await runWorker(options, args("resume"));
    if (resumed.code !== 0) throw new Error(`the "${name}" resume worker failed: ${describeExit(resumed)}${stderrTail(resumed)}`);
    const report = parseReport(resumed.stdout, name);
    const ticketsCreated = service.tickets.length;
    if (report.ticketId !== null && !service.tickets.some((t) => t.id === report.ticketId)) {
      throw new Error(`the "${name}" agent got ticket ${report.ticketId}, which the ticket service never created`);
    }
    return { name, ticketsCreated, duplicates: Math.max(0, ticketsCreated - 1), resultTicketId: report.ticketId };
  } finally {
    await service.close();
  }
}

interface WorkerExit {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly stdout: string;
  readonly stderr: string;
}

function runWorker(options: CrashDemoOptions, args: readonly string[]): Promise<WorkerExit> {
  const [command, ...base] = options.workerCommand;
  const timeoutMs = options.workerTimeoutMs ?? 20_000;
  return new Promise((resolve, reject) => {
    const child = spawn(command, [...base, ...args], { stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.setEncoding("utf8").on("data", (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk));
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`a demo worker took longer than ${timeoutMs} ms and was stopped${stderr ? `; its stderr:\n${stderr}` : ""}`));
    }, timeoutMs);
    child.on("error", (err) => {
      clearTimeout(timer);
      reject(new Error(`could not start a demo worker (${command}): ${messageOf(err)}`));
    });
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr });
    });
  });
}

function describeExit(exit: WorkerExit): string {
  return exit.signal ? `signal ${exit.signal}` : `exit code ${exit.code ?? "?"}`;
}

function stderrTail(exit: WorkerExit): string {
  const text = exit.stderr.trim();
  return text ? `; its stderr:\n${text.split("\n").slice(-20).join("\n")}` : "";
}

interface WorkerReport {
  readonly ticketId: string | null;
  readonly isError: boolean;
  readonly content: string;
}

function parseReport(stdout: string, name: string): WorkerReport {
  const line = stdout.trim().split("\n").pop() ?? "";
  try {
    const report = JSON.parse(line) as WorkerReport;
    if (typeof report === "object" && report !== null && (typeof report.ticketId === "string" || report.ticketId === null)) return report;
  } catch {
    // reported below
  }
  throw new Error(`the "${name}" resume worker printed no report (stdout: ${JSON.stringify(stdout.slice(0, 500))})`);
}

// ---------------------------------------------------------------------------------------------
// The worker: one agent process, either running into the crash or resuming after it.

const SCOPE: Scope = { tenant: "acme-support", task: "fault-report-4711" };
const TOOL_USE: ToolUseBlock = {
  type: "tool_use",
  id: "toolu_01DemoCrashCreateTicket",
  name: "create_ticket",
  input: { customer: "ACME GmbH", title: "Card terminal at till 3 shows error E42 and takes no payments" },
};
const CONVERSATION: readonly unknown[] = [
  { role: "user", content: "Hanna Berg (ACME GmbH): the card terminal at till 3 shows error E42 and takes no payments since this morning." },
  { role: "assistant", content: [{ type: "text", text: "I am opening a ticket for this fault." }, TOOL_USE] },
];

export interface CrashWorkerOptions {
  readonly way: CrashWayName;
  readonly phase: CrashPhase;
  /** The ticket service's base URL. */
  readonly service: string;
  /** This way's own temp directory (checkpoint, JSON results file, ledger). */
  readonly dir: string;
}

/**
 * "crash": saves the checkpoint with the pending tool_use, runs create_ticket and is SIGKILLed
 * after it returns and before its result is recorded; never returns normally.
 * "resume": loads the checkpoint, answers the pending tool_use the way's way, saves the
 * answered checkpoint and prints one JSON line {ticketId, isError, content}.
 */
export async function runCrashWorker(options: CrashWorkerOptions): Promise<void> {
  const checkpoint = fileCheckpoint(join(options.dir, "checkpoint.json"));
  if (options.phase === "crash") {
    await checkpoint.save({ scope: SCOPE, messages: CONVERSATION, counters: { turns: 1 }, pendingToolUse: contentOf(TOOL_USE) });
    await crashRun(options);
    throw new Error(`the injected crash did not happen in the "${options.way}" worker`);
  }
  const saved = await checkpoint.load();
  if (!saved?.pendingToolUse) throw new Error(`nothing to resume: ${checkpoint.location} has no pending tool_use`);
  const results = await resumeRun(options, checkpoint, saved);
  await saveAnswered(checkpoint, saved, results);
  const first = results[0];
  const report: WorkerReport = {
    ticketId: first && !first.is_error ? ticketIdOf(first.content) : null,
    isError: first?.is_error ?? true,
    content: first?.content ?? "(no tool_result)",
  };
  process.stdout.write(`${JSON.stringify(report)}\n`);
}

async function crashRun(options: CrashWorkerOptions): Promise<void> {
  const crash = killAt("after_execute");
  if (options.way === "effectgate") {
    const gate = createGate({ tools: [ticketToolForGate(options.service)], ledger: sqliteLedger(join(options.dir, "ledger.db")), faults: crash });
    await gate.runToolUses(contentOf(TOOL_USE), SCOPE);
    return;
  }
  // Both naive loops call the tool directly; the crash lands after it returned, before anything records the result.
  await callDirectly(options.service, TOOL_USE);
  crash("after_execute", { tool: TOOL_USE.name, key: TOOL_USE.id, toolUseId: TOOL_USE.id });
}

async function resumeRun(options: CrashWorkerOptions, checkpoint: CheckpointStore, saved: AgentCheckpoint): Promise<ToolResultBlock[]> {
  const pending = (saved.pendingToolUse ?? []).filter(isToolUse);
  switch (options.way) {
    case "no-ledger":
      // The checkpoint says the call is unanswered, so the loop answers it by calling the tool.
      return Promise.all(pending.map((block) => callDirectly(options.service, block)));
    case "ledger-after-execution": {
      const file = join(options.dir, "tool-results.json");
      const answered: Record<string, ToolResultBlock> = existsSync(file) ? (JSON.parse(readFileSync(file, "utf8")) as Record<string, ToolResultBlock>) : {};
      const out: ToolResultBlock[] = [];
      for (const block of pending) {
        const known = answered[block.id];
        if (known) {
          out.push(known);
          continue;
        }
        const result = await callDirectly(options.service, block);
        answered[block.id] = result;
        writeFileSync(file, JSON.stringify(answered));
        out.push(result);
      }
      return out;
    }
    case "effectgate": {
      const gate = createGate({ tools: [ticketToolForGate(options.service)], ledger: sqliteLedger(join(options.dir, "ledger.db")) });
      try {
        return (await gate.resume(checkpoint)).toolResults;
      } finally {
        await gate.close();
        await gate.ledger.close();
      }
    }
  }
}

/**
 * create_ticket for the gate. The cast works around a typing bug outside the demo: GateOptions.tools
 * (Tool<StandardSchemaV1, any>[]) rejects every tool whose schema has a concrete input type, because
 * Tool's `key` and `execute` are function-typed properties checked contravariantly.
 */
function ticketToolForGate(serviceUrl: string): AnyTool {
  return createTicketTool(serviceUrl) as unknown as AnyTool;
}

/** A naive loop's tool call: no ledger, no key the service honours, nothing recorded before or during. */
async function callDirectly(serviceUrl: string, block: ToolUseBlock): Promise<ToolResultBlock> {
  const tool = createTicketTool(serviceUrl, { probe: false });
  const ctx: ToolContext = {
    idempotencyKey: block.id, toolUseId: block.id, scope: SCOPE, fence: 1, signal: new AbortController().signal, attempt: 1,
  };
  try {
    const ticket = await tool.execute(block.input as { customer: string; title: string }, ctx);
    return { type: "tool_result", tool_use_id: block.id, content: JSON.stringify(ticket), is_error: false };
  } catch (err) {
    return { type: "tool_result", tool_use_id: block.id, content: `create_ticket failed: ${messageOf(err)}`, is_error: true };
  }
}

async function saveAnswered(store: CheckpointStore, saved: AgentCheckpoint, results: readonly ToolResultBlock[]): Promise<void> {
  await store.save({
    scope: saved.scope,
    messages: [...saved.messages, { role: "user", content: results }],
    counters: { ...saved.counters, turns: (saved.counters.turns ?? 0) + 1 },
    pendingToolUse: null,
  });
}

function contentOf(block: ToolUseBlock): unknown[] {
  return [{ type: "text", text: "I am opening a ticket for this fault." }, block];
}

function isToolUse(value: unknown): value is ToolUseBlock {
  return typeof value === "object" && value !== null && (value as { type?: unknown }).type === "tool_use";
}

function ticketIdOf(content: string): string | null {
  try {
    const parsed = JSON.parse(content) as { id?: unknown };
    return typeof parsed.id === "string" ? parsed.id : null;
  } catch {
    return null;
  }
}
