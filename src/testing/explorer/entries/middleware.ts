/**
 * The Idempotency-Key middleware entry: a world of its own. A few servers, each a simulated
 * process running a Hono app (`app.request`, no socket) with `honoIdempotency` on the one shared
 * ledger in front of a handler that applies an effect on a simulated downstream (one that does
 * not honour keys itself: the middleware is all that stands between a retry and a second effect).
 * HTTP clients send each request with its key as Stripe's clients do: they give up waiting and
 * retry on another server, retry a 409 and a 503 after a while, sometimes send the same request to
 * two servers at once, and send it again once its key has expired (a key older than `ttlMs` acts
 * as new, by design). The seed's faults strike the middleware's ledger steps (kills, stalls,
 * failures, lost replies) before the handler runs; its outcome write is left whole, since a
 * handler that applied its effect and then lost its response is the one window the middleware
 * documents it cannot close (docs/server.md).
 *
 * The middleware renews its claim with a real `setInterval` and reads `performance.now()`: its
 * lease is set far longer than any handler here runs, and stalls stay under a quarter of it, so
 * the world never needs a renewal (nor a stall past the lease, which it could not model).
 *
 * Invariants, against the downstream's own counters and the claims the handler ran under:
 * - (I1) no applied effect of a key runs under a claim less than `ttlMs` after the claim of an
 *   earlier applied run whose response was stored: a key runs once per period of its TTL (a key
 *   released by a 5xx runs again, but its run applied nothing; a run whose server died before its
 *   response was stored is the documented window, and a retry runs again);
 * - (I5) every 2xx answer, replayed or not, is a response the handler gave for that key;
 * - (I3) every request ends with a definite answer once faults stop;
 * - (I7) a chunked body over the limit (no Content-Length) is answered 413 after the server pulled
 *   at most the limit and one chunk of it: the rest is never read nor buffered (issue 12 defect 8);
 * - (I5) a key reused for another body (a long account number that differs only past a double's
 *   precision) is never answered with the first body's stored response (issue 12 defect 7).
 *
 * Loaded only when a schedule asks for the "middleware" entry: it imports `hono`.
 */
import { Hono } from "hono";
import { honoIdempotency } from "../../../server.js";
import { messageOf } from "../../../core/errors.js";
import { ToolRejected } from "../../../core/outcome.js";
import type { AnyTool, ToolContext } from "../../../core/tool.js";
import type { Stores } from "../../../contracts/stores.js";
import { simulatedDownstream, type DownstreamConfig } from "../downstream.js";
import { Faults, type FaultRates } from "../faults.js";
import type { Violation } from "../invariants.js";
import { faultyLedger } from "../ledger.js";
import { seededRng } from "../rng.js";
import type { ScheduleOptions, ScheduleResult } from "../schedule.js";
import { drawDownstream } from "../workload.js";
import { World, type Process } from "../world.js";
import type { WorldEntry } from "./world-entry.js";
import { dedupe } from "./support.js";

/** The servers' body limit, and the chunk a client streams an over-long body in. */
const MAX_BODY_BYTES = 256 * 1024;
const CHUNK_BYTES = 16 * 1024;

/** Far longer than a handler runs here (its interval, a third of it, is real time: it never fires within a schedule). */
const LEASE_MS = 120_000;

/** One request of a client: its key, its body. */
interface ClientRequest {
  readonly key: string;
  readonly ref: string;
  readonly amount: number;
  /** Sent again once its key expired, to two servers at once (the expiry race). */
  readonly afterExpiry: boolean;
  /** An account number sent as a JSON integer longer than a double keeps (its digits, verbatim in the body). */
  readonly account?: string;
  /** A client bug: the key of an earlier request reused for another body (an account that differs past a double's precision); must get a 422. */
  readonly misuse?: boolean;
}

/** One run of the handler: the claim it ran under, and whether its effect was applied. */
interface Run {
  readonly key: string;
  readonly server: string;
  readonly claimCreatedAt: number;
  readonly claimToken: string;
  readonly at: number;
  applied: boolean;
  response?: string;
}

interface Answer {
  readonly key: string;
  readonly server: string;
  readonly status: number;
  readonly body: string;
  readonly replayed: boolean;
  readonly phase: "run" | "final";
  /** An answer to the reused key's other body. */
  readonly misuse: boolean;
}

const PROFILES: readonly FaultRates[] = [
  { crash: 0, freeze: 0.05, freezeMs: [200, 4_000], fail: 0, lostReply: 0 },
  { crash: 0.03, freeze: 0.1, freezeMs: [200, 8_000], fail: 0.03, lostReply: 0.03 },
  { crash: 0.08, freeze: 0.15, freezeMs: [500, 15_000], fail: 0.06, lostReply: 0.06 },
];

/** The middleware's view of the ledger from one server: every step through the world's scheduler; faults on all but the outcome write and its lease checks. */
function serverLedger(world: World, base: Stores, process: Process, faults: Faults, whole: Faults): Stores {
  const faulty = faultyLedger(world, base, process, () => "", faults, { overwrote: () => undefined });
  const permitted = faultyLedger(world, base, process, () => "", whole, { overwrote: () => undefined });
  const calls = new Proxy(faulty.calls, {
    get: (target, name, receiver): unknown => (name === "update" || name === "renewLease" ? Reflect.get(permitted.calls, name) : Reflect.get(target, name, receiver)),
  });
  return { ...faulty, calls };
}

export async function runMiddlewareSchedule(seed: number, options: ScheduleOptions): Promise<ScheduleResult> {
  const rng = seededRng(seed);
  const world = new World(rng.fork(), options.trace === true);
  const opened = await options.ledger(seed, world.wall);
  const base = opened.stores;
  const drawRng = rng.fork();
  const ttlMs = drawRng.pick([1_000, 3_000, 10_000]);
  const drawn = drawDownstream(drawRng, `${opened.prefix}payments`);
  const config: DownstreamConfig = {
    ...drawn, effect: "write", honoursKeys: false, enforcesFence: false, dropReply: 0, preSendMs: 0,
    maxLandMs: Math.min(drawn.maxLandMs, 3_000), replyDelayMs: Math.min(drawn.replyDelayMs, 1_000), timeoutMs: 600_000, toolHonoursAbort: false,
  };
  const downstream = simulatedDownstream(world, rng.fork(), config);
  const requests: ClientRequest[] = Array.from({ length: drawRng.between(1, 4) }, (_, i) => ({
    key: `${opened.prefix}key_${i}`, ref: `${opened.prefix}charge_${i}`, amount: drawRng.between(1, 500), afterExpiry: drawRng.chance(0.6),
  }));
  // Sometimes, from a stream of its own (so other seeds draw as before): one request carries a long
  // integer account, and its key is then reused for the same body with that account one digit off.
  const misuseRng = seededRng((seed ^ 0x5bd1e995) >>> 0);
  if (misuseRng.chance(0.3)) {
    const at = misuseRng.int(requests.length);
    const digits = `1${Array.from({ length: 19 }, () => misuseRng.int(10)).join("")}`;
    const other = `${digits.slice(0, -1)}${(Number(digits.at(-1)) + 1 + misuseRng.int(8)) % 10}`;
    const first = { ...requests[at]!, account: digits, afterExpiry: false };
    requests.splice(at, 1, first, { ...first, account: other, misuse: true });
  }
  // Sometimes (a stream of its own) a client streams a body far over the servers' limit, chunked, under a key of its own.
  const oversized = seededRng((seed ^ 0x6c8e9cf5) >>> 0).chance(0.3) ? { key: `${opened.prefix}key_big`, chunks: 64 } : undefined;
  const serverCount = drawRng.between(2, 3);
  const clientTimeoutMs = drawRng.pick([300, 2_000, 10_000]);
  const rates = drawRng.pick(PROFILES);
  const faults = new Faults(world, rng.fork(), rates, { crashes: drawRng.between(0, 2), freezes: drawRng.between(1, 3), failures: drawRng.between(0, 3) });
  const whole = new Faults(world, rng.fork(), rates, { crashes: 0, freezes: 0, failures: 0 });
  whole.stop();
  const clientRng = rng.fork();
  const violations: Violation[] = [];
  const runs: Run[] = [];
  const answers: Answer[] = [];
  const tenant = `http:${opened.tenant}`;

  interface Server {
    readonly process: Process;
    readonly app: Hono;
  }
  const servers: (Server | undefined)[] = [];
  let started = 0;

  function startServer(slot: number): Server {
    const process = world.process(`worker-srv${slot}-${++started}`);
    const [effect] = downstream.toolsFor(process) as [AnyTool];
    const app = new Hono();
    app.use("/charges", honoIdempotency({ ledger: serverLedger(world, base, process, faults, whole), ttlMs, leaseMs: LEASE_MS, maxBodyBytes: MAX_BODY_BYTES, clientId: () => opened.tenant }));
    app.post("/charges", async (c) => {
      const key = c.req.header("idempotency-key") ?? "";
      const body = await c.req.json<{ ref: string; amount: number }>();
      // The claim this run holds, as the ledger has it now (read as an observer: no step, no fault).
      const claim = await world.track(base.calls.get(tenant, key));
      const run: Run = { key, server: process.name, claimCreatedAt: claim?.createdAt ?? Number.NaN, claimToken: claim?.claimToken ?? "?", at: world.now, applied: false };
      runs.push(run);
      world.log(`${process.name} runs the handler for ${key} (claim of ${claim ? claim.createdAt - world.wall() + world.now : "?"} ms, token ${run.claimToken.slice(0, 6)})`);
      const ctx = { idempotencyKey: key, toolUseId: key, fence: 0, signal: new AbortController().signal, attempt: 1, scope: { tenant, task: "http" } } satisfies ToolContext;
      try {
        const result = await effect.execute({ ref: body.ref, amount: body.amount }, ctx);
        run.applied = true;
        run.response = JSON.stringify(result);
        return c.json(result as Record<string, unknown>, 201);
      } catch (err) {
        if (err instanceof ToolRejected) return c.json({ error: messageOf(err) }, 422);
        return c.json({ error: messageOf(err) }, 503);
      }
    });
    const server = { process, app };
    servers[slot] = server;
    world.log(`${process.name} started`);
    void world.died(process).then(() => {
      if (servers[slot] === server) servers[slot] = undefined;
      world.addTimer(clientRng.between(10, 2_000), () => void startServer(slot));
    });
    return server;
  }

  async function someServer(except?: Server): Promise<Server> {
    for (;;) {
      const up = servers.filter((s): s is Server => s !== undefined && s.process.state !== "dead" && s !== except);
      if (up.length > 0) return up[clientRng.int(up.length)]!;
      await world.until(world.now + 100);
    }
  }

  /** One POST: the answer, or "timeout" when the client stopped waiting (the server may still be running it). */
  async function post(server: Server, request: ClientRequest, phase: Answer["phase"]): Promise<Answer | "timeout"> {
    world.log(`client → ${server.process.name} ${request.key}`);
    const sent = Promise.resolve(server.app.request("/charges", {
      method: "POST", headers: { "content-type": "application/json", "idempotency-key": request.key },
      body: request.account === undefined
        ? JSON.stringify({ ref: request.ref, amount: request.amount })
        : `{"ref":${JSON.stringify(request.ref)},"amount":${request.amount},"account":${request.account}}`,
    })).then(async (res) => ({ status: res.status, body: await res.text(), replayed: res.headers.get("idempotent-replayed") === "true" }));
    let timer: { cancel(): void } | undefined;
    // Once faults stopped the client waits as long as a handler can take (a short timeout with a short TTL would make every retry a new request).
    const waitMs = phase === "final" ? Math.max(clientTimeoutMs, 30_000) : clientTimeoutMs;
    const gaveUp = new Promise<"timeout">((resolve) => (timer = world.addTimer(waitMs, () => resolve("timeout"))));
    const out = await Promise.race([world.answerOf(server.process, sent), gaveUp]);
    timer?.cancel();
    if (out === "timeout") {
      world.log(`client: ${request.key} timed out on ${server.process.name}`);
      return out;
    }
    const answer: Answer = { key: request.key, server: server.process.name, phase, misuse: request.misuse === true, ...out };
    answers.push(answer);
    world.log(`client ← ${server.process.name} ${request.key}: ${out.status}${out.replayed ? " (replayed)" : ""} ${out.body.slice(0, 120)}`);
    return answer;
  }

  const definite = (a: Answer | "timeout") => a !== "timeout" && a.status !== 409 && a.status < 500;

  /** The client's way with one request: send, retry (same key) until a definite answer. */
  async function send(request: ClientRequest, phase: Answer["phase"], twin: boolean): Promise<void> {
    for (let attempt = 0; attempt < 10; attempt++) {
      const first = await someServer();
      const targets = twin && attempt === 0 ? [first, await someServer(first)] : [first];
      const outs = await Promise.all(targets.map((s) => post(s, request, phase)));
      if (outs.some(definite)) return;
      await world.until(world.now + clientRng.pick([100, 1_000, 3_000]));
    }
  }

  let unsettled: string | undefined;
  const main = (async () => {
    for (let slot = 0; slot < serverCount; slot++) startServer(slot);
    // The misused key is sent again right after its first body got its answer, well within its TTL.
    let firstAnswered!: () => void;
    const answeredFirst = new Promise<void>((resolve) => (firstAnswered = resolve));
    const misused = requests.filter((r) => r.misuse).map(async (request) => {
      await answeredFirst;
      await send(request, "run", false);
    });
    const streamed = oversized ? [(async () => {
      await world.until(world.now + clientRng.between(0, 500));
      const server = await someServer();
      let pulled = 0;
      let sent = 0;
      const body = new ReadableStream<Uint8Array>({
        pull(controller) {
          if (sent === oversized.chunks) return controller.close();
          sent++;
          pulled += CHUNK_BYTES;
          controller.enqueue(new Uint8Array(CHUNK_BYTES).fill(0x20));
        },
      }, { highWaterMark: 0 });
      world.log(`client → ${server.process.name} ${oversized.key}: a chunked body of ${oversized.chunks * CHUNK_BYTES} bytes`);
      const answered = world.answerOf(server.process, Promise.resolve(server.app.request("/charges", {
        method: "POST", headers: { "content-type": "application/json", "idempotency-key": oversized.key }, body, duplex: "half",
      })));
      let timer: { cancel(): void } | undefined;
      const res = await Promise.race([answered, new Promise<"timeout">((resolve) => (timer = world.addTimer(30_000, () => resolve("timeout"))))]);
      timer?.cancel();
      if (res === "timeout") return world.log(`client: ${oversized.key} timed out on ${server.process.name}`);
      world.log(`client ← ${server.process.name} ${oversized.key}: ${res.status} after the server pulled ${pulled} bytes`);
      if (res.status !== 413 || pulled > MAX_BODY_BYTES + CHUNK_BYTES) {
        violations.push({ seed, invariant: "I7", message: `[middleware: a body over the limit is refused unread] ${server.process.name} answered a chunked body of ${oversized.chunks * CHUNK_BYTES} bytes (limit ${MAX_BODY_BYTES}) ${res.status} after pulling ${pulled} bytes of it` });
      }
    })()] : [];
    await Promise.all([...streamed, ...misused, ...requests.filter((r) => !r.misuse).map(async (request) => {
      await world.until(world.now + clientRng.between(0, 500));
      await send(request, "run", clientRng.chance(0.3));
      if (request.account !== undefined) firstAnswered();
      if (request.afterExpiry) {
        // Its key has expired: the same request again, to two servers at once.
        await world.until(world.now + ttlMs + clientRng.pick([0, 1, 50, 500]));
        await send(request, "run", true);
      }
    })]);
    // Settle: no more faults; past every lease, each request once more until its answer is definite.
    faults.stop();
    for (let round = 0; ; round++) {
      await world.until(world.now + LEASE_MS + 1);
      await Promise.all(requests.map((r) => send(r, "final", false)));
      const open = requests.filter((r) => !definite(answers.filter((a) => a.key === r.key && a.phase === "final").at(-1) ?? "timeout"));
      if (open.length === 0) break;
      if (round >= 5) {
        unsettled = `after 5 rounds past the lease, ${open.map((r) => r.key).join(", ")} still had no definite answer`;
        break;
      }
    }
  })();

  const ended = await world.run(main);
  if (ended === "done") await main;
  else violations.push({ seed, invariant: "I3", message: ended === "stuck" ? "the middleware schedule deadlocked" : "the middleware schedule did not settle within its step budget (a livelock)" });
  if (unsettled) violations.push({ seed, invariant: "I3", message: unsettled });
  for (const s of servers) if (s) s.process.state = "dead";
  violations.push(...middlewareInvariants(seed, ttlMs, requests, runs, answers, downstream));
  await opened.release();
  return {
    seed, calls: requests.length, faults: faults.counts, workersStarted: started, violations: dedupe(violations), trace: world.trace,
  };
}

function middlewareInvariants(
  seed: number, ttlMs: number, requests: readonly ClientRequest[], runs: readonly Run[], answers: readonly Answer[],
  downstream: { effects(ref: string): number },
): Violation[] {
  const out: Violation[] = [];
  for (const request of requests.filter((r) => r.misuse)) {
    const wrong = answers.find((a) => a.misuse && a.key === request.key && a.status >= 200 && a.status < 300 && a.replayed && a.phase === "run");
    if (wrong) {
      out.push({ seed, invariant: "I5", message: `[middleware: a reused key with another body is a 422] ${wrong.server} answered ${request.key}, sent again with account ${request.account ?? ""} (another body), ${wrong.status} (replayed) with the first body's response ${wrong.body.slice(0, 120)}` });
    }
  }
  for (const request of requests.filter((r) => !r.misuse)) {
    const applied = runs.filter((r) => r.key === request.key && r.applied).sort((a, b) => a.claimCreatedAt - b.claimCreatedAt);
    // A response some client got was stored first (store, then send): a run whose response nobody ever got died
    // before its response was stored, the window the middleware documents it cannot close; a retry runs again.
    const stored = new Set(answers.filter((a) => a.key === request.key).map((a) => a.body));
    for (let i = 1; i < applied.length; i++) {
      const [earlier, later] = [applied[i - 1]!, applied[i]!];
      if (earlier.response !== undefined && stored.has(earlier.response) && !(later.claimCreatedAt - earlier.claimCreatedAt >= ttlMs)) {
        out.push({
          seed, invariant: "I1",
          message: `[middleware: a key runs once per TTL] ${request.key} was applied by ${earlier.server} (claim of t=${earlier.at}) and again by ${later.server} (claim of t=${later.at}), ` +
            `${later.claimCreatedAt - earlier.claimCreatedAt} ms apart with ttlMs ${ttlMs}; the downstream applied it ${downstream.effects(request.ref)} time(s)`,
        });
        break;
      }
    }
    const responses = new Set(runs.filter((r) => r.key === request.key && r.response !== undefined).map((r) => r.response));
    for (const a of answers.filter((x) => x.key === request.key && x.status >= 200 && x.status < 300)) {
      if (!responses.has(a.body)) {
        out.push({ seed, invariant: "I5", message: `[middleware: a 2xx is the handler's response] ${a.server} answered ${request.key} ${a.status}${a.replayed ? " (replayed)" : ""} with ${a.body.slice(0, 120)}, which no run of its handler gave` });
        break;
      }
    }
  }
  return out;
}

export const middlewareEntry: WorldEntry = { kind: "world", name: "middleware", run: runMiddlewareSchedule };


