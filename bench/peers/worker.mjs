/**
 * One child process of scenarios B–D (scenarios.mjs starts it): one peer, one key, real process.
 * Argument: one JSON job.
 *
 *   mode "call":     set the peer up, print {"ready"}, wait for "go" on stdin when `barrier`, then
 *                    make `calls` one after the other with `key` (payload {n}), each bounded by
 *                    `timeoutMs`, and print {"calls": [outcome…]}. An outcome is {ok, result} or
 *                    {ok: false, error: {name, code, message}} or {hung: true}, with its ms.
 *   mode "endpoint": a Restate SDK endpoint on 127.0.0.1:`port` (the server calls it), until SIGTERM.
 *   mode "setup":    set the peer up and close it (its schema made before processes race on it).
 *
 * The effect of every peer is the same: wait `effectMs`, append one JSON line {key, n, pid} to the
 * `downstream` file and fsync it. With `die`, this process then SIGKILLs itself at once, after the
 * effect and before the peer can record it: the kill is a call in the effect, not a timer.
 */
import { closeSync, existsSync, fsyncSync, openSync, readFileSync, writeSync } from "node:fs";
import { createInterface } from "node:readline";
import { filePersistenceLayer, listenRestateEndpoint, loadEffectgate, restateSdk } from "./setup.mjs";

const job = JSON.parse(process.argv[2]);
const say = (value) => process.stdout.write(`${JSON.stringify(value)}\n`);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function appendDurably(file, text) {
  const fd = openSync(file, "a");
  try {
    writeSync(fd, text);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

/** The downstream's own record of `key`, as a probe reads it. */
function downstreamLine(file, key) {
  if (!existsSync(file)) return undefined;
  return readFileSync(file, "utf8").split("\n").filter(Boolean).map((l) => JSON.parse(l)).find((l) => l.key === key);
}

async function effect(key, n, { effectMs = job.effectMs ?? 0, downstream = job.downstream } = {}) {
  if (effectMs > 0) await sleep(effectMs);
  const line = { key, n, pid: process.pid };
  appendDurably(downstream, `${JSON.stringify(line)}\n`);
  if (job.die) {
    process.kill(process.pid, "SIGKILL");
    // A signal sent to oneself is delivered before kill returns; nothing below runs.
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0);
  }
  return line;
}

const describe = (err) => ({
  name: err?.name ?? typeof err, code: err?.code ?? undefined, message: String(err?.message ?? err).slice(0, 400),
});

// ---------------------------------------------------------------------------------------------
// Each peer: set up, then `call(n)` returns the result or throws; `close()` afterwards.

async function naive() {
  return { call: (n) => effect(job.key, n) };
}

/** The tutorial ledger: {key: result} read whole; a key it has is answered from it; rewritten whole + fsync after the effect. */
async function jsonFile() {
  return {
    async call(n) {
      const ledger = existsSync(job.ledger) ? JSON.parse(readFileSync(job.ledger, "utf8") || "{}") : {};
      if (ledger[job.key] !== undefined) return ledger[job.key];
      const result = await effect(job.key, n);
      ledger[job.key] = result;
      const fd = openSync(job.ledger, "w");
      writeSync(fd, JSON.stringify(ledger));
      fsyncSync(fd);
      closeSync(fd);
      return result;
    },
  };
}

async function powertools() {
  const { makeIdempotent, IdempotencyConfig } = await import("@aws-lambda-powertools/idempotency");
  const config = new IdempotencyConfig({ eventKeyJmesPath: "key", ...(job.powertools.validate ? { payloadValidationJmesPath: "n" } : {}) });
  // The in-progress record expires this long after the call starts (what a Lambda's deadline gives it).
  config.registerLambdaContext({ getRemainingTimeInMillis: () => job.powertools.inProgressMs });
  const handler = makeIdempotent(async (event) => effect(event.key, event.n), { persistenceStore: await filePersistenceLayer(job.powertools.dir), config });
  return { call: (n) => handler({ key: job.key, n }) };
}

/** A Restate client: the ingress, with the documented `idempotency-key` header. */
async function restateCaller() {
  return {
    async call(n) {
      const res = await fetch(`${job.restate.ingress}/faults/step`, {
        method: "POST",
        headers: { "content-type": "application/json", "idempotency-key": job.key },
        body: JSON.stringify({ key: job.key, n, downstream: job.downstream, effectMs: job.effectMs ?? 0 }),
      });
      const text = await res.text();
      if (res.ok) return JSON.parse(text);
      let body;
      try {
        body = JSON.parse(text);
      } catch {
        body = { message: text };
      }
      throw Object.assign(new Error(body.message ?? text), { name: `HTTP ${res.status}`, code: body.code });
    },
  };
}

async function dbos() {
  const { DBOS } = await import("@dbos-inc/dbos-sdk");
  const step = DBOS.registerWorkflow(async (key, n) => DBOS.runStep(() => effect(key, n), { name: "append" }), { name: "faultStep" });
  DBOS.setConfig({ name: "effectgate-bench-faults", systemDatabaseUrl: job.dbos.url, logLevel: "error" });
  await DBOS.launch();
  return {
    async call(n) {
      const handle = await DBOS.startWorkflow(step, { workflowID: job.key })(job.key, n);
      return handle.getResult();
    },
    close: () => DBOS.shutdown(),
  };
}

async function effectgate() {
  const { createGate, defineTool, sqliteLedger, postgresLedger, z } = await loadEffectgate();
  const eg = job.effectgate;
  const input = z.object({ n: z.number() });
  const tools = [
    defineTool({ name: "append_line", effect: "write", input, execute: (args, ctx) => effect(ctx.idempotencyKey, args.n) }),
    defineTool({
      name: "append_line_probed", effect: "write", input, execute: (args, ctx) => effect(ctx.idempotencyKey, args.n),
      // Reads the downstream itself, by the key the effect was made with.
      probe: async (_args, ctx) => {
        const line = downstreamLine(job.downstream, ctx.idempotencyKey);
        return line ? { status: "done", result: line } : { status: "absent" };
      },
    }),
  ];
  const ledger = eg.store === "sqlite" ? sqliteLedger(eg.path) : postgresLedger({ connectionString: eg.url, poolSize: 2 }, { schema: eg.schema });
  const alerts = [];
  const gate = createGate({ tools, ledger, onAlert: (a) => alerts.push(a.message), ...(eg.leaseMs ? { leaseMs: eg.leaseMs } : {}) });
  return {
    async call(n) {
      const [block] = await gate.runToolUses([{ type: "tool_use", id: job.key, name: eg.tool, input: { n } }], { tenant: "bench", task: "faults" });
      if (!block.is_error) return JSON.parse(block.content);
      const code = /^(EG_[A-Z_]+):/.exec(block.content)?.[1];
      // The gate never throws for a call: its answer is an is_error tool_result whose text starts with the code.
      throw Object.assign(new Error(block.content), { name: code ?? "is_error tool_result" });
    },
    extra: () => ({ alerts, stats: { ...gate.stats } }),
    async close() {
      await gate.close();
      await ledger.close();
    },
  };
}

const PEERS = { naive, "json-file": jsonFile, powertools, restate: restateCaller, dbos, effectgate };

async function endpoint() {
  const restate = await restateSdk();
  const service = restate.service({
    name: "faults",
    handlers: { step: async (ctx, req) => ctx.run("append", () => effect(req.key, req.n, { effectMs: req.effectMs, downstream: req.downstream })) },
  });
  await listenRestateEndpoint(restate, [service], job.port);
  say({ ready: true, pid: process.pid });
  process.once("SIGTERM", () => process.exit(0));
}

async function calls() {
  const peer = await PEERS[job.peer]();
  say({ ready: true, pid: process.pid });
  if (job.barrier) {
    const lines = createInterface({ input: process.stdin });
    for await (const line of lines) if (line.trim() === "go") break;
    lines.close();
  }
  const outcomes = [];
  for (const { n } of job.calls) {
    const t0 = performance.now();
    let timer;
    const bound = new Promise((resolve) => (timer = setTimeout(() => resolve({ hung: true }), job.timeoutMs)));
    const outcome = await Promise.race([
      Promise.resolve().then(() => peer.call(n)).then((result) => ({ ok: true, result }), (err) => ({ ok: false, error: describe(err) })),
      bound,
    ]);
    clearTimeout(timer);
    outcomes.push({ ...outcome, ms: Math.round(performance.now() - t0) });
    if (outcome.hung) break;
  }
  say({ calls: outcomes, ...(peer.extra?.() ?? {}) });
  // Closing is bounded too: a peer with a call still hanging may never finish closing.
  await Promise.race([Promise.resolve(peer.close?.()).catch(() => {}), sleep(5_000)]);
  process.exit(0);
}

async function setup() {
  const peer = await PEERS[job.peer]();
  await peer.close?.();
  process.exit(0);
}

await ({ endpoint, setup, call: calls }[job.mode])();
