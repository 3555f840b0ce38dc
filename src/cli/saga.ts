/** `effectgate saga ls|show|compensate|resolve`: the saga log of a ledger file. */
import { defaultOperator } from "./operator.js";
import type { Json } from "../core/json.js";
import type { Stores } from "../contracts/stores.js";
import type { SagaEvent, SagaLog, SagaRecord, SagaState, SagaStepRecord } from "../contracts/sagas.js";
import { requestSagaCompensation, resolveSaga } from "../saga/operator.js";
import { CliError, EXIT_FAILURE, EXIT_USAGE } from "./errors.js";
import { hanging, indent, iso, relative, short, table } from "./format.js";
import { openLedgerForChanges, openLedgerForReading } from "./open-ledger.js";

const SAGA_STATE_MEANING: Readonly<Record<SagaState, string>> = {
  running: "its driver is adding steps (or died without anyone noticing yet: gate.recover() marks such a saga stalled).",
  stalled: "its driver died mid-way. Recovery does not continue forward steps: run the saga's code again to resume it (completed steps return their stored results), or roll it back with `effectgate saga compensate`.",
  completed: "every step is done.",
  compensating: "its completed steps are being undone in reverse order; if nobody is doing it now, the next gate.recover() of a process with the saga's tools continues.",
  compensated: "every completed, compensable step was undone; approved non-compensable steps stay.",
  compensation_failed: "a compensation failed, or a step's outcome is unknown: a person must check the steps below, then settle the saga with `effectgate saga resolve`.",
  resolved: "a person settled it (see the resolution).",
};

async function withLedger<T>(ledger: Stores, fn: (log: SagaLog) => Promise<T>): Promise<T> {
  try {
    if (!ledger.sagas) throw new CliError(`the ledger ${ledger.location} keeps no sagas`, EXIT_FAILURE);
    return await fn(ledger.sagas);
  } finally {
    await ledger.close();
  }
}



/** The saga `id` names: in `tenant`, or the only tenant that has it. */
async function findSaga(log: SagaLog, id: string, tenant: string | undefined, file: string): Promise<SagaRecord> {
  if (tenant !== undefined) {
    const saga = await log.get(tenant, id);
    if (!saga) {
      const elsewhere = (await log.list({ id, limit: 1000 })).map((s) => s.tenant);
      const hint = elsewhere.length ? ` It exists in tenant${elsewhere.length === 1 ? "" : "s"} ${elsewhere.join(", ")}.` : "";
      throw new CliError(`no saga ${JSON.stringify(id)} in tenant ${JSON.stringify(tenant)} of ${file}.${hint}`, EXIT_FAILURE);
    }
    return saga;
  }
  const matches = await log.list({ id, limit: 1000 });
  if (matches.length === 0) throw new CliError(`no saga ${JSON.stringify(id)} in ${file}. List them with: effectgate saga ls --db ${file}`, EXIT_FAILURE);
  if (matches.length > 1) {
    throw new CliError(
      `saga ${JSON.stringify(id)} exists in ${matches.length} tenants (${matches.map((m) => m.tenant).join(", ")}); say which one with --tenant`,
      EXIT_USAGE,
    );
  }
  return matches[0] as SagaRecord;
}

export async function sagaLs(options: { db: string; tenant?: string; state?: SagaState; limit: number; json: boolean }): Promise<void> {
  const { ledger, file } = openLedgerForReading(options.db);
  await withLedger(ledger, async (log) => {
    const sagas = await log.list({
      limit: options.limit,
      ...(options.tenant === undefined ? {} : { tenant: options.tenant }),
      ...(options.state === undefined ? {} : { state: options.state }),
    });
    if (options.json) {
      process.stdout.write(`${JSON.stringify(sagas, null, 2)}\n`);
      return;
    }
    const filters = [options.tenant && `tenant=${options.tenant}`, options.state && `state=${options.state}`].filter(Boolean);
    const where = `${file}${filters.length ? ` (${filters.join(", ")})` : ""}`;
    if (sagas.length === 0) {
      process.stdout.write(`No sagas in ${where}.\n`);
      return;
    }
    const rows: string[][] = [];
    for (const s of sagas) {
      const steps = await log.steps(s.tenant, s.id);
      rows.push([s.id, s.tenant, s.task, s.state, String(steps.length), iso(s.updatedAt), short(s.resolution ?? s.reason ?? "", 60)]);
    }
    process.stdout.write(`${table(["ID", "TENANT", "TASK", "STATE", "STEPS", "UPDATED", "REASON"], rows)}\n`);
    const more = sagas.length === options.limit ? ` (the first ${options.limit}, oldest first; raise --limit to see more)` : "";
    process.stdout.write(`\n${sagas.length} saga${sagas.length === 1 ? "" : "s"} in ${where}${more}. Details: effectgate saga show ID --tenant TENANT\n`);
  });
}

export async function sagaShow(id: string, options: { db: string; tenant?: string; json: boolean }): Promise<void> {
  const { ledger, file } = openLedgerForReading(options.db);
  await withLedger(ledger, async (log) => {
    const saga = await findSaga(log, id, options.tenant, file);
    const steps = await log.steps(saga.tenant, saga.id);
    const history = await log.history(saga.tenant, saga.id, { limit: 10_000 });
    process.stdout.write(options.json ? `${JSON.stringify({ saga, steps, history }, null, 2)}\n` : describe(saga, steps, history, file, Date.now()));
  });
}

export async function sagaCompensate(id: string, options: { db: string; tenant?: string; note: string; by?: string }): Promise<void> {
  const { ledger, file } = openLedgerForChanges(options.db);
  await withLedger(ledger, async (log) => {
    const found = await findSaga(log, id, options.tenant, file);
    const was = found.state;
    const status = await requestSagaCompensation(ledger, found.tenant, found.id, options.note, options.by ?? defaultOperator());
    const steps = status.steps.filter((s) => s.state === "completed" && s.compensable && s.compensation !== null).length;
    process.stdout.write(was === "compensating"
      ? `Saga ${id} (tenant ${found.tenant}) is already compensating; nothing changed.\n`
      : `Saga ${id} (tenant ${found.tenant}) was ${was}; it is now marked for compensation (${steps} step${steps === 1 ? "" : "s"} to undo).\n` +
        `Nothing has been undone yet: the next gate.recover() of a process created with the saga's tools undoes its completed\n` +
        `steps in reverse order. Follow it with: effectgate saga show ${id} --tenant ${found.tenant}\n`);
  });
}

export async function sagaResolve(id: string, options: { db: string; tenant?: string; note: string; undone?: boolean; kept?: boolean; by?: string }): Promise<void> {
  if (options.undone !== true && options.kept !== true) {
    throw new CliError("say what became of the effects: --undone (you undid them by hand) or --kept (they stay, knowingly)", EXIT_USAGE);
  }
  const { ledger, file } = openLedgerForChanges(options.db);
  await withLedger(ledger, async (log) => {
    const found = await findSaga(log, id, options.tenant, file);
    const status = await resolveSaga(ledger, found.tenant, found.id, {
      note: options.note, outcome: options.undone === true ? "undone" : "kept", by: options.by ?? defaultOperator(),
    });
    process.stdout.write(`Saga ${id} (tenant ${found.tenant}) is resolved: ${status.resolution ?? ""}\n`);
  });
}

function render(value: Json | null): string {
  return value === null ? "" : typeof value === "string" ? value : JSON.stringify(value);
}

function describe(saga: SagaRecord, steps: readonly SagaStepRecord[], history: readonly SagaEvent[], file: string, now: number): string {
  const field = (name: string, value: string) => `  ${name.padEnd(10)} ${value}`;
  const lines = [
    `Saga ${saga.id} in tenant ${saga.tenant}  (${file})`,
    "",
    field("state", saga.state),
    hanging("", SAGA_STATE_MEANING[saga.state], 10, 100),
    field("task", saga.task),
    field("driver", saga.owner === null ? "- (nobody holds it)" : `${saga.owner}${saga.leaseExpiresAt === null ? "" : `, lease ${saga.leaseExpiresAt > now ? "ends" : "ended"} ${relative(saga.leaseExpiresAt, now)}`}`),
    field("on abandon", saga.onAbandon === "hold" ? "hold (a dead driver's saga is marked stalled)" : "compensate (a dead driver's saga is rolled back)"),
    field("created", `${iso(saga.createdAt)} (${relative(saga.createdAt, now)})`),
    field("updated", `${iso(saga.updatedAt)} (${relative(saga.updatedAt, now)})`),
  ];
  if (saga.reason !== null) lines.push(field("reason", saga.reason));
  if (saga.resolution !== null) lines.push(field("resolution", saga.resolution));
  lines.push("", `Steps (${steps.length}, in order; compensation runs from the last):`);
  if (steps.length === 0) lines.push("  (none)");
  else {
    lines.push(indent(table(["#", "STEP", "TOOL", "STATE", "UNDO", "RESULT / ERROR"], steps.map((s) => [
      String(s.position + 1), s.name, s.tool, s.state, undo(s), short(s.error ?? render(s.result), 60),
    ]))));
    lines.push("", "  Keys:");
    for (const s of steps) lines.push(`    ${s.name}: ${s.key}${s.compensationKey === null ? "" : `  (compensation: ${s.compensationKey})`}`);
  }
  const open = steps.filter((s) => s.state === "compensation_failed" || s.state === "unknown");
  if (saga.state === "compensation_failed" && open.length > 0) {
    lines.push("", "Needs a person:");
    for (const s of open) {
      lines.push(`  - ${s.name} (${s.tool}, call ${s.key}): ${s.state === "unknown" ? "its outcome is unknown" : "its compensation failed"}.`);
      lines.push(hanging("", s.error ?? "", 4, 100));
      lines.push(`    Input:  ${render(s.input)}`);
      if (s.result !== null) lines.push(`    Result: ${render(s.result)}`);
    }
    lines.push(
      "",
      "  Check the downstream system for each, undo what is still there by hand if it must go, then:",
      `    effectgate saga resolve ${saga.id} --tenant ${saga.tenant} --undone --note "what you did"`,
      `    effectgate saga resolve ${saga.id} --tenant ${saga.tenant} --kept --note "why it stays"`,
    );
  }
  lines.push("", `History (${history.length} event${history.length === 1 ? "" : "s"}):`);
  lines.push(indent(table(["AT", "EVENT", "STEP", "WHAT"], history.map((e) => [iso(e.at), e.kind, e.step ?? "", e.message]))), "");
  return `${lines.join("\n")}\n`;
}

function undo(step: SagaStepRecord): string {
  if (step.effect === "read") return "- (read)";
  if (!step.compensable || step.compensation === null) return step.approval === "approved" ? "none (approved)" : "none";
  return step.compensation.kind === "hook" ? `${step.tool}:compensate` : step.compensation.tool;
}
