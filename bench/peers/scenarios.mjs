/**
 * Scenarios B–D of the peer bench: each peer under a fault, in real child processes (worker.mjs).
 *
 *   B  SIGKILL after the effect, before its record (`roundsB` times): a child runs one step whose
 *      effect appends a line (fsync) to a downstream file and then SIGKILLs itself; a new child
 *      then makes the same call (same key / workflow id / invocation). Counted: the lines per key
 *      in the downstream file; reported: what the restarted call answered, and how fast.
 *   C  The same key with another payload: key K with {n:1}, then K with {n:2}.
 *   D  Two processes with the same key at once (`roundsD` times): both set up, then are released
 *      together by one "go" line on their stdin; the effect takes 200 ms.
 *
 * The ground truth is the downstream file: every effect is one line {key, n, pid} in it, so a
 * result can be told apart as the first run's (its pid) or another's. Restate's endpoint is its
 * own child process (the one that dies in B, restarted on the same port); its callers are ingress
 * requests with the `idempotency-key` header. Every child is stopped by its pid.
 */
import { spawn } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { effectgateVersion, freePort, here, loadEffectgate, progress, startRestateServer, versionOf } from "./setup.mjs";

const WORKER = join(here, "worker.mjs");
const CALL_TIMEOUT_MS = 40_000;
const POWERTOOLS_IN_PROGRESS_MS = 2_000;
const D_EFFECT_MS = 200;

/** A worker child: its JSON lines, "ready", "go", its exit; killed by its pid if it outlives `watchdogMs`. */
function startChild(job, watchdogMs = CALL_TIMEOUT_MS + 20_000) {
  const child = spawn(process.execPath, [WORKER, JSON.stringify(job)], { stdio: ["pipe", "pipe", "pipe"] });
  const lines = [];
  let stderr = "";
  let pending = "";
  let onReady;
  const ready = new Promise((ok) => (onReady = ok));
  child.stdout.setEncoding("utf8").on("data", (chunk) => {
    pending += chunk;
    let nl;
    while ((nl = pending.indexOf("\n")) >= 0) {
      const line = pending.slice(0, nl);
      pending = pending.slice(nl + 1);
      try {
        const value = JSON.parse(line);
        lines.push(value);
        if (value.ready) onReady(value);
      } catch {
        stderr += `${line}\n`; // a peer's own log line on stdout
      }
    }
  });
  child.stderr.setEncoding("utf8").on("data", (chunk) => (stderr = (stderr + chunk).slice(-4000)));
  child.stdin.on("error", () => {}); // a child that died before "go" closes its stdin
  let watchdogFired = false;
  const watchdog = setTimeout(() => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    watchdogFired = true;
    process.kill(child.pid, "SIGKILL");
  }, watchdogMs);
  const done = new Promise((ok) => child.on("close", (code, signal) => {
    clearTimeout(watchdog);
    onReady(undefined);
    ok({ code, signal, lines, stderr, pid: child.pid, watchdogFired });
  }));
  return {
    pid: child.pid, ready, done,
    go: () => child.stdin.write("go\n"),
    async stop() {
      if (child.exitCode === null && child.signalCode === null) process.kill(child.pid, "SIGTERM");
      return done;
    },
  };
}

/**
 * Sets `v` up once for scenario `s` in a child of its own, so that its schema exists before
 * processes race on it (two DBOS processes launching at once on a fresh database can fail).
 */
async function prepare(v, s, dir) {
  const exit = await startChild({ mode: "setup", peer: v.peer, key: "setup", downstream: join(dir, "setup.downstream"), ...v.jobFor(s) }).done;
  if (exit.code !== 0) throw new Error(`${v.id}: setting up for ${s} failed (${exit.code}/${exit.signal}): ${exit.stderr.slice(-600)}`);
}

/** prepare(), or a note that says why `v` is left out of scenario `s`. */
async function prepared(v, s, dir, notes) {
  try {
    await prepare(v, s, dir);
    return true;
  } catch (err) {
    notes.push(`${s}: ${v.id} left out: ${err instanceof Error ? err.message : String(err)}`);
    return false;
  }
}

/** The first line of a dead child's stderr that names an error, else its last lines. */
const deathOf = (exit) => `code ${exit.code} signal ${exit.signal}: ${/^.*(Error|error:).*$/m.exec(exit.stderr)?.[0] ?? exit.stderr.slice(-600)}`;

/** A call child's line of outcomes, and its `count` outcomes: those it printed, or failures that say how it ended. */
function outcomesOf(exit, count, died = "child died") {
  const out = exit.lines.find((l) => l.calls);
  return { out, outcomes: out?.calls ?? Array.from({ length: count }, () => ({ ok: false, error: { name: died, message: deathOf(exit) } })) };
}

/** Runs a one-shot call child to its end; its outcomes, or a failure that says how it ended. */
async function runCalls(job) {
  const exit = await startChild({ mode: "call", timeoutMs: CALL_TIMEOUT_MS, ...job }).done;
  return { exit, ...outcomesOf(exit, job.calls.length) };
}

/** One row per variant that takes part in scenario `s` and could be set up; `row(v)` makes it, or returns undefined to leave it out. */
async function variantRows(s, variants, rounds, dir, notes, row) {
  const rows = [];
  for (const v of variants.filter((x) => x.scenarios.includes(s))) {
    progress(`${s}: ${v.id}, ${rounds} rounds`);
    if (!(await prepared(v, s, dir, notes))) continue;
    const made = await row(v);
    if (made) rows.push(made);
  }
  return rows;
}

/** Runs `fn` with a Restate variant's SDK endpoint up for all of it (the server sends the calls there). */
async function withEndpoint(v, fn) {
  const endpoint = v.peer === "restate" ? startChild({ mode: "endpoint", port: v.port }, 3_600_000) : undefined;
  await endpoint?.ready;
  try {
    return await fn();
  } finally {
    await endpoint?.stop();
  }
}

function linesOf(file, key) {
  if (!existsSync(file)) return [];
  return readFileSync(file, "utf8").split("\n").filter(Boolean).map((l) => JSON.parse(l)).filter((l) => l.key === key);
}

const errorText = (e) => `${e.name}${e.code && e.code !== e.name ? ` ${e.code}` : ""}`;

/** One answer in words, against the downstream lines of its key (`firstPid`: the first run's process). */
function answerOf(outcome, { firstPid } = {}) {
  if (outcome.hung) return `no answer within ${CALL_TIMEOUT_MS / 1000} s`;
  if (!outcome.ok) return errorText(outcome.error);
  const r = outcome.result;
  if (firstPid !== undefined && r?.pid !== undefined) return r.pid === firstPid ? `result n=${r.n} of the first run` : `result n=${r.n} of a re-run`;
  return `result n=${r?.n}`;
}

/** "A ×18, B ×2" from a list of answers. */
function tally(answers) {
  const counts = new Map();
  for (const a of answers) counts.set(a, (counts.get(a) ?? 0) + 1);
  return [...counts].sort((a, b) => b[1] - a[1]).map(([a, n]) => `${a} ×${n}`).join(", ");
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? s[Math.floor((s.length - 1) / 2)] : undefined;
};

/** The first error message of each kind, for the reader (the table has only the class/code). */
function examples(outcomes) {
  const seen = new Map();
  for (const o of outcomes) if (o && !o.ok && !o.hung && !seen.has(errorText(o.error))) seen.set(errorText(o.error), o.error.message);
  return Object.fromEntries(seen);
}

// ---------------------------------------------------------------------------------------------
// The peers, as variants: a row of a table, and what its jobs carry.

async function makeVariants({ work, pg, want, stops, notes }) {
  const dir = join(work, "faults");
  mkdirSync(dir, { recursive: true });
  const variants = [];
  const add = (v) => variants.push({ jobFor: () => ({}), ...v });
  if (want("naive")) add({ id: "naive", peer: "naive", name: "naive call (no record)", version: "-", scenarios: "BCD" });
  if (want("json-file")) {
    add({
      id: "json-file", peer: "json-file", name: "JSON-file ledger", version: "-", scenarios: "BCD",
      jobFor: (s) => {
        const ledger = join(dir, `${s}-ledger.json`);
        if (!existsSync(ledger)) writeFileSync(ledger, "{}");
        return { ledger };
      },
    });
  }
  if (want("powertools")) {
    const version = versionOf("@aws-lambda-powertools/idempotency");
    const powertools = (s, validate) => {
      const at = join(dir, `${s}-powertools${validate ? "-validated" : ""}`);
      mkdirSync(at, { recursive: true });
      return { powertools: { dir: at, validate, inProgressMs: POWERTOOLS_IN_PROGRESS_MS } };
    };
    add({ id: "powertools", peer: "powertools", name: "Powertools idempotency (file store)", version, scenarios: "BCD", jobFor: (s) => powertools(s, false) });
    add({ id: "powertools-validated", peer: "powertools", name: "Powertools + payloadValidationJmesPath", version, scenarios: "C", jobFor: (s) => powertools(s, true) });
  }
  if (want("restate")) {
    try {
      const server = await startRestateServer(work, stops, "restate-faults");
      const port = await freePort();
      const first = startChild({ mode: "endpoint", port, die: false });
      if (!(await first.ready)) throw new Error(`the endpoint did not start: ${(await first.done).stderr}`);
      await server.register(`http://127.0.0.1:${port}`);
      await first.stop();
      add({
        id: "restate", peer: "restate", name: "Restate (ingress idempotency-key)", version: `server ${versionOf("@restatedev/restate-server")}, sdk ${versionOf("@restatedev/restate-sdk")}`,
        scenarios: "BCD", port, jobFor: () => ({ restate: { ingress: server.ingress } }),
      });
    } catch (err) {
      notes.push(`restate: could not run here: ${err instanceof Error ? err.message : String(err)}`);
    }
  }
  if (pg && want("dbos")) {
    add({ id: "dbos", peer: "dbos", name: "DBOS workflowID (embedded PostgreSQL)", version: versionOf("@dbos-inc/dbos-sdk"), scenarios: "BCD", jobFor: (s) => ({ dbos: { url: pg.database(`dbos_faults_${s.toLowerCase()}`) } }) });
  }
  if (want("effectgate")) {
    const version = effectgateVersion();
    const stores = [{ id: "sqlite", name: "SQLite", job: (s) => ({ store: "sqlite", path: join(dir, `${s}-ledger.db`) }) }];
    if (pg) {
      const schema = "eg_bench_faults";
      const { migratePostgres } = await loadEffectgate();
      await migratePostgres(pg.url, schema);
      stores.push({ id: "pg", name: "PostgreSQL", job: () => ({ store: "postgres", url: pg.url, schema }) });
    }
    for (const store of stores) {
      add({ id: `effectgate-${store.id}`, peer: "effectgate", name: `effectgate ${store.name}, write`, version, scenarios: "BCD", jobFor: (s) => ({ effectgate: { ...store.job(s), tool: "append_line" } }) });
      add({ id: `effectgate-${store.id}-probe`, peer: "effectgate", name: `effectgate ${store.name}, write + probe`, version, scenarios: "B", jobFor: (s) => ({ effectgate: { ...store.job(s), tool: "append_line_probed" } }) });
    }
  }
  return variants;
}

// ---------------------------------------------------------------------------------------------
// B: SIGKILL after the effect, before its record; then the same call in a new process.

/** The restarted calls for one round of `v`: one new child, and for Powertools one more after the in-progress expiry. */
async function restartB(v, job) {
  const answers = [];
  const first = await runCalls(job);
  answers.push({ when: "restart", outcome: first.outcomes[0], extra: first.out });
  if (v.peer === "powertools") {
    // The dead call's in-progress record blocks until its expiry: wait for exactly that moment, then call again.
    const record = powertoolsRecord(job.powertools.dir);
    if (record?.inProgressExpiry) await new Promise((r) => setTimeout(r, Math.max(0, record.inProgressExpiry - Date.now()) + 20));
    const later = await runCalls(job);
    answers.push({ when: "after in-progress expiry", outcome: later.outcomes[0] });
  }
  return answers;
}

/** The one record in a Powertools record directory (each B round has its own). */
function powertoolsRecord(dir) {
  const file = existsSync(dir) ? readdirSync(dir).find((f) => !f.endsWith(".lock") && !f.startsWith(".tmp-")) : undefined;
  return file === undefined ? undefined : JSON.parse(readFileSync(join(dir, file), "utf8"));
}

async function roundB(v, round, dir) {
  const key = `b-${v.id}-${round}`;
  const downstream = join(dir, `B-${v.id}.downstream`);
  const base = { peer: v.peer, key, downstream, calls: [{ n: 1 }], ...v.jobFor("B") };
  if (v.peer === "powertools") {
    // One record directory per round, so the record the parent waits on is this round's.
    base.powertools = { ...base.powertools, dir: join(base.powertools.dir, String(round)) };
    mkdirSync(base.powertools.dir, { recursive: true });
  }
  let crashPid;
  let answers;
  let atDeath;
  const t0 = performance.now();
  if (v.peer === "restate") {
    // The endpoint is the process that dies; the server retries the invocation, so the caller's one request gets the answer.
    const dying = startChild({ mode: "endpoint", port: v.port, die: true });
    await dying.ready;
    const caller = startChild({ mode: "call", timeoutMs: CALL_TIMEOUT_MS, ...base });
    const death = await dying.done;
    crashPid = death.pid;
    atDeath = linesOf(downstream, key).length;
    if (death.signal !== "SIGKILL" || death.watchdogFired) throw new Error(`the Restate endpoint was not SIGKILLed (${death.code}/${death.signal}): ${death.stderr}`);
    const restarted = startChild({ mode: "endpoint", port: v.port, die: false });
    await restarted.ready;
    const exit = await caller.done;
    await restarted.stop();
    answers = [{ when: "the caller's request", outcome: outcomesOf(exit, 1, "caller died").outcomes[0] }];
  } else {
    const crash = await runCalls({ ...base, die: true });
    crashPid = crash.exit.pid;
    atDeath = linesOf(downstream, key).length;
    if (crash.exit.signal !== "SIGKILL" || crash.exit.watchdogFired) throw new Error(`${v.id}: the crashing child was not SIGKILLed (${crash.exit.code}/${crash.exit.signal}): ${crash.exit.stderr}`);
    answers = await restartB(v, base);
  }
  const effects = linesOf(downstream, key).length;
  return { key, atDeath, effects, ms: Math.round(performance.now() - t0), crashPid, answers };
}

function scenarioB(variants, rounds, dir, notes) {
  return variantRows("B", variants, rounds, dir, notes, async (v) => {
    const results = [];
    try {
      for (let r = 0; r < rounds; r++) results.push(await roundB(v, r, dir));
    } catch (err) {
      notes.push(`B: ${v.id} stopped after ${results.length} rounds: ${err instanceof Error ? err.message : String(err)}`);
      if (results.length === 0) return undefined;
    }
    const whens = [...new Set(results.flatMap((x) => x.answers.map((a) => a.when)))];
    return {
      id: v.id, peer: v.name, version: v.version, rounds: results.length,
      killedAfterEffect: results.filter((x) => x.atDeath === 1).length,
      effects: results.reduce((n, x) => n + x.effects, 0),
      duplicates: results.reduce((n, x) => n + Math.max(0, x.effects - 1), 0),
      roundsWithDuplicate: results.filter((x) => x.effects > 1).length,
      answers: whens.map((when) => {
        const outcomes = results.map((x) => ({ ...x.answers.find((a) => a.when === when), crashPid: x.crashPid }));
        return {
          when, summary: tally(outcomes.map((a) => answerOf(a.outcome, { firstPid: a.crashPid }))),
          medianMs: median(outcomes.map((a) => a.outcome.ms).filter((m) => m !== undefined)),
          errors: examples(outcomes.map((a) => a.outcome)),
        };
      }),
      alerts: results.flatMap((x) => x.answers.flatMap((a) => a.extra?.alerts ?? [])).slice(0, 3),
    };
  });
}

// ---------------------------------------------------------------------------------------------
// C: the same key with another payload.

function scenarioC(variants, rounds, dir, notes) {
  return variantRows("C", variants, rounds, dir, notes, async (v) => {
    const results = await withEndpoint(v, async () => {
      const made = [];
      for (let r = 0; r < rounds; r++) {
        const key = `c-${v.id}-${r}`;
        const downstream = join(dir, `C-${v.id}.downstream`);
        const { outcomes } = await runCalls({ peer: v.peer, key, downstream, calls: [{ n: 1 }, { n: 2 }], ...v.jobFor("C") });
        made.push({ outcomes, effects: linesOf(downstream, key).length });
      }
      return made;
    });
    return {
      id: v.id, peer: v.name, version: v.version, rounds,
      effects: results.reduce((n, x) => n + x.effects, 0),
      first: tally(results.map((x) => answerOf(x.outcomes[0]))),
      second: tally(results.map((x) => answerOf(x.outcomes[1] ?? { hung: true }))),
      errors: examples(results.flatMap((x) => x.outcomes)),
    };
  });
}

// ---------------------------------------------------------------------------------------------
// D: two processes, the same key, released together.

function scenarioD(variants, rounds, dir, notes) {
  return variantRows("D", variants, rounds, dir, notes, async (v) => {
    const results = await withEndpoint(v, async () => {
      const made = [];
      for (let r = 0; r < rounds; r++) {
        const key = `d-${v.id}-${r}`;
        const downstream = join(dir, `D-${v.id}.downstream`);
        const job = { mode: "call", timeoutMs: CALL_TIMEOUT_MS, peer: v.peer, key, downstream, calls: [{ n: 1 }], barrier: true, effectMs: D_EFFECT_MS, ...v.jobFor("D") };
        const pair = [startChild(job), startChild(job)];
        await Promise.all(pair.map((c) => c.ready));
        for (const c of pair) c.go();
        const exits = await Promise.all(pair.map((c) => c.done));
        const outcomes = exits.map((e) => outcomesOf(e, 1).outcomes[0]);
        const same = outcomes.every((o) => o.ok) && JSON.stringify(outcomes[0].result) === JSON.stringify(outcomes[1].result);
        made.push({ outcomes, same, effects: linesOf(downstream, key).length });
      }
      return made;
    });
    return {
      id: v.id, peer: v.name, version: v.version, rounds,
      effects: results.reduce((n, x) => n + x.effects, 0),
      roundsWithDuplicate: results.filter((x) => x.effects > 1).length,
      sameResult: results.filter((x) => x.same).length,
      // When the two answers differ: what each of them was (a result, or an error class/code).
      otherwise: tally(results.filter((x) => !x.same).map((x) => (x.outcomes.every((o) => o.ok)
        ? "each its own run's result"
        : x.outcomes.map((o) => answerOf(o)).sort().join(" / ")))),
      errors: examples(results.flatMap((x) => x.outcomes)),
    };
  });
}

// ---------------------------------------------------------------------------------------------

/**
 * Runs the scenarios in `ids` ("B", "C", "D") for every peer `want` allows. Returns, per scenario,
 * `{ env, rounds, rows, notes }` (env from `environment()` before it, with the load after it), and the printed tables.
 */
export async function runFaultScenarios({ ids, work, pg, want, stops, environment, rounds = {} }) {
  const notes = [];
  const dir = join(work, "faults");
  const variants = await makeVariants({ work, pg, want, stops, notes });
  const counts = { B: rounds.B ?? 20, C: rounds.C ?? 3, D: rounds.D ?? 10 };
  const run = { B: scenarioB, C: scenarioC, D: scenarioD };
  const out = {};
  for (const id of ids) {
    const env = environment();
    const rows = await run[id](variants, counts[id], dir, notes);
    out[id] = { env: { ...env, loadAfter: environment().load }, rounds: counts[id], rows, notes };
  }
  rmSync(dir, { recursive: true, force: true });
  return { json: out, text: faultTables(out) };
}

/** The printed (markdown) tables of B–D, from what runFaultScenarios returns. */
export function faultTables(out) {
  const parts = [];
  const { B, C, D } = out;
  if (B) {
    parts.push(`B: SIGKILL after the effect, before its record (${B.rounds} rounds per peer; load ${B.env.load} before, ${B.env.loadAfter} after)`, "",
      "| peer | killed after effect | effects | duplicates | restarted call answered | median ms to answer |", "|---|---:|---:|---:|---|---:|",
      ...B.rows.map((r) => `| ${r.peer} | ${r.killedAfterEffect}/${r.rounds} | ${r.effects} | ${r.duplicates} | ${r.answers.map((a) => (r.answers.length > 1 ? `${a.when}: ${a.summary}` : a.summary)).join("; ")} | ${r.answers.map((a) => a.medianMs).join(" / ")} |`), "");
  }
  if (C) {
    parts.push(`C: key K with {n:1}, then K with {n:2} (${C.rounds} rounds per peer, one key each)`, "",
      "| peer | effects | first call | second call ({n:2}) |", "|---|---:|---|---|",
      ...C.rows.map((r) => `| ${r.peer} | ${r.effects} / ${r.rounds} keys | ${r.first} | ${r.second} |`), "");
  }
  if (D) {
    parts.push(`D: two processes, one key, released together, effect ${D_EFFECT_MS} ms (${D.rounds} rounds per peer)`, "",
      "| peer | effects | rounds with 2 effects | both got the same result | otherwise (the two answers) |", "|---|---:|---:|---:|---|",
      ...D.rows.map((r) => `| ${r.peer} | ${r.effects} / ${r.rounds} keys | ${r.roundsWithDuplicate} | ${r.sameResult}/${r.rounds} | ${r.otherwise || "–"} |`), "");
  }
  const errors = [...(B?.rows ?? []).flatMap((r) => r.answers.map((a) => [r.peer, a.errors])), ...[...(C?.rows ?? []), ...(D?.rows ?? [])].map((r) => [r.peer, r.errors])];
  const seen = new Set();
  const said = [];
  for (const [peer, errs] of errors) {
    for (const [kind, message] of Object.entries(errs ?? {})) {
      if (seen.has(`${peer}|${kind}`)) continue;
      seen.add(`${peer}|${kind}`);
      said.push(`- ${peer}, ${kind}: ${message.replace(/\s+/g, " ").slice(0, 300)}`);
    }
  }
  if (said.length) parts.push("What the errors said (first of each kind):", ...said, "");
  const notes = [...new Set([B, C, D].flatMap((x) => x?.notes ?? []))];
  if (notes.length) parts.push("notes:", ...notes, "");
  return parts.join("\n");
}
