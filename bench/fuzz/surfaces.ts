/**
 * The surfaces under fuzz, each in its own child process on a real SQLite ledger in a temporary
 * folder: the Idempotency-Key middleware on node:http and on Hono, the operator console, the
 * receipts endpoint (children/*.mjs, on the BUILT package in dist/), and the MCP gateway's HTTP
 * listener (`effectgate mcp --listen`, the built CLI, in front of the test fixture upstream).
 * Each says what a good request is, which requests may answer 2xx without credentials, and how
 * to ask it whether it still answers.
 */
import { fork, spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import os from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { requestTargetUrl } from "../../src/core/local-server.js";
import { signReceipt } from "../../src/root/receipts-endpoint.js";
import { draft, type Draft, type SurfaceShape } from "./generate.js";
import { countClasses, heapProbeEnv, retained } from "./heap.js";
import type { Rng } from "./rng.js";
import { exchange, type WireResponse } from "./wire.js";

/** The project root: the folder of the nearest package.json above this file (source or dist-bench). */
function projectRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  while (!existsSync(join(dir, "package.json")) || !existsSync(join(dir, "src"))) {
    const up = dirname(dir);
    if (up === dir) throw new Error("cannot find the project root");
    dir = up;
  }
  return dir;
}

export const ROOT = projectRoot();
const CHILDREN = join(ROOT, "bench", "fuzz", "children");
export const CLI = join(ROOT, "dist", "cli", "main.js");
/** The MCP listener's rate-limited line about sessions it closed (src/mcp/http-sessions.ts). */
const SESSION_CLOSED = /^effectgate mcp http: session \S+ closed \((idle for \d+ ms|the listener's \d+ sessions were open and this one was idle longest)\)(; \d+ more closed since the last such line)?$/;
const UPSTREAM = join(ROOT, "test", "mcp", "fixtures", "upstream.mjs");

let heap: ReturnType<typeof heapProbeEnv> | undefined;
/** The heap probe every surface child is started with (heap.ts): one folder for the run, a file per pid. */
export function heapProbe(): ReturnType<typeof heapProbeEnv> {
  return (heap ??= heapProbeEnv(ROOT));
}

export const HTTP_SURFACES = ["middleware-node", "middleware-hono", "console", "mcp-http", "receipts"] as const;
export type HttpSurfaceName = (typeof HTTP_SURFACES)[number];

export interface EffectReport {
  readonly handled: number;
  readonly keys: number;
  /** The most effects any one (client, key) had. */
  readonly max: number;
  readonly repeated: readonly { readonly key: string; readonly effects: number }[];
}

export interface GoodRequest {
  readonly draft: Draft;
  /** Statuses a working surface answers this request with. */
  readonly ok: (status: number) => boolean;
}

export interface RunningSurface {
  readonly name: HttpSurfaceName;
  readonly port: number;
  readonly pid: number;
  readonly db: string;
  readonly shape: SurfaceShape;
  /** A good request (fresh key, right token, signed body): the start of every hostile one. */
  good(rng: Rng): GoodRequest;
  /**
   * Whether `d` may be answered 2xx by a surface that keeps its access rules: for the console, a
   * public page or a request carrying the token; for the MCP listener, one carrying the token;
   * for the receipts endpoint, a body signed as sent. The middleware has no access rule.
   */
  mayPass(d: Draft, original: Draft): boolean;
  /** A 5xx that is a documented refusal, not a failure (a full stream cap with Retry-After). */
  allowed5xx(response: WireResponse): boolean;
  /** Undefined when a good request gets a good answer; else what went wrong. */
  alive(): Promise<string | undefined>;
  effects(): Promise<EffectReport>;
  /** Lines the surface wrote at error level (a client's mistake must write none). */
  errorLines(): readonly string[];
  /** Whether the process has exited, and how. */
  exited(): { code: number | null; signal: NodeJS.Signals | null } | undefined;
  /** SIGTERM, then waits for the exit; SIGKILL after 10 s. */
  stop(): Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** Removes the temporary folder (after the ledger was checked). */
  cleanup(): void;
  /** Sees every answer the fuzzer read (the MCP listener: the session ids it handed out). */
  observe?(response: WireResponse): void;
  /** The MCP listener, at the end: the sessions it handed out, how many it still holds, and how many session objects live. */
  sessionCheck?(): Promise<SessionCheck>;
}

export interface SessionCheck {
  /** Session ids the listener handed out (an answered initialize). */
  readonly opened: number;
  /** Of those, the ones it still holds (a ping in the session answered 200). */
  readonly held: number;
  /** Live session transports and MCP servers in the listener after a forced GC (heap-probe.cjs); undefined when the probe did not answer. */
  readonly transports: number | undefined;
  readonly servers: number | undefined;
}

const TOKEN = "fuzz-token-4f1c2b9e7d30a5";
const SECRET = "fuzz-receipt-secret";

interface Child {
  readonly child: ChildProcess;
  readonly stderr: () => string;
  readonly exit: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  exitState: { code: number | null; signal: NodeJS.Signals | null } | undefined;
}

/** Children still running: killed if the fuzzer itself ends first (a surface must not outlive its run). */
const live = new Set<ChildProcess>();
process.once("exit", () => {
  for (const child of live) child.kill("SIGKILL");
});

function watch(child: ChildProcess): Child {
  live.add(child);
  child.once("exit", () => live.delete(child));
  let stderr = "";
  child.stderr?.setEncoding("utf8").on("data", (chunk: string) => {
    // Bounded: the fuzzer looks at error lines, not at megabytes of them.
    if (stderr.length < 4 * 1024 * 1024) stderr += chunk;
  });
  const state: Child = {
    child,
    stderr: () => stderr,
    exit: new Promise((resolve) => child.once("exit", (code, signal) => {
      state.exitState = { code, signal };
      resolve({ code, signal });
    })),
    exitState: undefined,
  };
  return state;
}

function forkChild(script: string, config: object): Promise<{ watched: Child; port: number }> {
  const child = fork(join(CHILDREN, script), [JSON.stringify(config)], { stdio: ["ignore", "ignore", "pipe", "ipc"], cwd: ROOT, env: { ...process.env, ...heapProbe().env } });
  const watched = watch(child);
  return new Promise((resolve, reject) => {
    child.once("message", (m: { op?: string; port?: number }) => {
      if (m.op === "ready" && typeof m.port === "number") resolve({ watched, port: m.port });
    });
    void watched.exit.then(({ code, signal }) => reject(new Error(`${script} exited (${code ?? signal}) before it listened:\n${watched.stderr()}`)));
  });
}

function effectsOf(child: ChildProcess): Promise<EffectReport> {
  return new Promise((resolve, reject) => {
    const onMessage = (m: EffectReport & { op?: string }) => {
      if (m.op !== "effects") return;
      child.off("message", onMessage);
      resolve(m);
    };
    child.on("message", onMessage);
    if (!child.connected) reject(new Error("the child is gone"));
    else child.send({ op: "effects" });
  });
}

async function stopChild(watched: Child): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
  if (watched.exitState) return watched.exitState;
  watched.child.kill("SIGTERM");
  const timer = setTimeout(() => watched.child.kill("SIGKILL"), 10_000);
  const exit = await watched.exit;
  clearTimeout(timer);
  return exit;
}

/** Sends `g` on a fresh connection; undefined if it got a good answer. */
async function probe(port: number, g: GoodRequest, hangMs: number): Promise<string | undefined> {
  const bytes = serializeGood(g.draft);
  const result = await exchange(port, { requests: [bytes], heads: [g.draft.method === "HEAD"], complete: true, hangMs });
  if (result.refused) return "connection refused";
  if (result.hung) return `no answer within ${hangMs} ms`;
  const response = result.responses[0];
  if (!response) return "closed without an answer";
  if (!g.ok(response.status)) return `answered ${response.status}: ${response.body.toString("utf8").slice(0, 200)}`;
  return undefined;
}

export function serializeGood(d: Draft): Buffer {
  const head = [`${d.method} ${d.target} HTTP/1.1`, ...d.headers.map(([n, v]) => `${n}: ${v}`), `Content-Length: ${d.body.length}`].join("\r\n");
  return Buffer.concat([Buffer.from(`${head}\r\n\r\n`, "latin1"), d.body]);
}

let keyCounter = 0;
const freshKey = (rng: Rng) => `k-${++keyCounter}-${rng.word(6, 10)}`;
const KEY_POOL = Array.from({ length: 64 }, (_, i) => `pool-${i}`);

const tmp = () => mkdtempSync(join(os.tmpdir(), "effectgate-fuzz-"));
const is2xx = (s: number) => s >= 200 && s < 300;
const hasToken = (d: Draft) => !d.rawHead && d.headers.some(([n, v]) => n.trim().toLowerCase() === "authorization" && v.includes(TOKEN));

function middlewareSurface(name: "middleware-node" | "middleware-hono", watched: Child, port: number, dir: string, db: string): RunningSurface {
  const host = `127.0.0.1:${port}`;
  const shape: SurfaceShape = { paths: ["/v1/charges", "/v1/refunds", "/"], bodyLimit: 1024 * 1024, keyHeader: "Idempotency-Key", host };
  const good = (rng: Rng): GoodRequest => {
    // Mostly fresh keys; some from a small pool, so replays and mismatches (422) happen too.
    const pooled = rng.chance(0.2);
    const key = pooled ? rng.pick(KEY_POOL) : freshKey(rng);
    const body = pooled ? JSON.stringify({ amount: 100 + (KEY_POOL.indexOf(key) % 3) * (rng.chance(0.1) ? 7 : 0) }) : JSON.stringify({ amount: rng.int(1, 9999), currency: "eur" });
    const headers: [string, string][] = [["Host", host], ["Content-Type", "application/json"], ["Idempotency-Key", key]];
    if (rng.chance(0.3)) headers.push(["Authorization", `Bearer client-${rng.int(1, 3)}`]);
    return { draft: draft("POST", rng.chance(0.8) ? "/v1/charges" : "/v1/refunds", headers, body), ok: (s) => s === 201 || s === 409 || s === 422 };
  };
  return {
    name, port, pid: watched.child.pid!, db, shape, good,
    mayPass: () => true,
    allowed5xx: () => false,
    alive: () => probe(port, { draft: draft("POST", "/v1/charges", [["Host", host], ["Content-Type", "application/json"], ["Idempotency-Key", `alive-${++keyCounter}`]], "{\"amount\":1}"), ok: (s) => s === 201 }, 15_000),
    effects: () => effectsOf(watched.child),
    errorLines: () => watched.stderr().split("\n").filter((l) => l.trim() !== ""),
    exited: () => watched.exitState,
    stop: () => stopChild(watched),
    cleanup: () => rmSync(dir, { recursive: true, force: true }),
  };
}

const CONSOLE_GETS = ["/api/overview", "/api/badges", "/api/calls", "/api/approvals", "/api/queue", "/api/sagas", "/api/findings", "/api/kill", "/api/breakers", "/api/openapi.json", "/api/calls/default/k1", "/api/approvals/a1", "/api/queue/q1", "/api/sagas/default/s1", "/metrics", "/api/events"];
const CONSOLE_POSTS: readonly (readonly [string, string])[] = [
  ["/api/kill", "{\"on\":false,\"tenant\":\"fuzz\",\"reason\":\"fuzz\"}"],
  ["/api/approvals/a1/approve", "{\"note\":\"x\"}"],
  ["/api/approvals/a1/deny", "{}"],
  ["/api/queue/q1/resolve", "{\"completedWith\":{\"ok\":true}}"],
  ["/api/sagas/default/s1/compensate", "{}"],
  ["/api/sagas/default/s1/resolve", "{\"note\":\"x\"}"],
  ["/api/breakers/b1/close", "{}"],
];
const CONSOLE_PUBLIC = new Set(["/", "/console.js", "/console.css"]);

function consoleSurface(watched: Child, port: number, dir: string, db: string): RunningSurface {
  const host = `127.0.0.1:${port}`;
  const shape: SurfaceShape = { paths: [...CONSOLE_GETS, ...CONSOLE_POSTS.map(([p]) => p), "/", "/console.js", "/console.css", "/favicon.ico"], bodyLimit: 64 * 1024, token: TOKEN, host };
  const good = (rng: Rng): GoodRequest => {
    const auth: [string, string] = ["Authorization", `Bearer ${TOKEN}`];
    if (rng.chance(0.35)) {
      const [path, body] = rng.pick(CONSOLE_POSTS);
      return { draft: draft("POST", path, [["Host", host], auth, ["Content-Type", "application/json"]], body), ok: (s) => s === 200 || s === 404 || s === 409 };
    }
    const path = rng.pick([...CONSOLE_GETS.filter((p) => p !== "/api/events"), "/", "/console.js"]);
    return { draft: draft("GET", path, [["Host", host], auth]), ok: (s) => s === 200 || s === 404 };
  };
  return {
    name: "console", port, pid: watched.child.pid!, db, shape, good,
    mayPass: (d) => {
      if (hasToken(d)) return true;
      // Node's parser skips extra spaces around the request-target (`GET  / HTTP/1.1` asks for /).
      const url = requestTargetUrl(d.target.trim());
      if (url === undefined) return false;
      if (url.pathname === "/favicon.ico") return true;
      return CONSOLE_PUBLIC.has(url.pathname) && (d.method === "GET" || d.method === "HEAD");
    },
    // The live-update stream cap is a documented refusal.
    allowed5xx: (r) => r.status === 503 && r.headers["retry-after"] !== undefined,
    alive: () => probe(port, { draft: draft("GET", "/api/overview", [["Host", host], ["Authorization", `Bearer ${TOKEN}`]]), ok: (s) => s === 200 }, 15_000),
    effects: () => effectsOf(watched.child),
    errorLines: () => watched.stderr().split("\n").filter((l) => l.startsWith("ERROR")),
    exited: () => watched.exitState,
    stop: () => stopChild(watched),
    cleanup: () => rmSync(dir, { recursive: true, force: true }),
  };
}

function receiptsSurface(watched: Child, port: number, dir: string, db: string): RunningSurface {
  const host = `127.0.0.1:${port}`;
  const shape: SurfaceShape = { paths: ["/receipts", "/"], bodyLimit: 256 * 1024, host, extraHeaders: ["Effectgate-Signature"] };
  const signed = (n: number): Draft => {
    const body = JSON.stringify({ id: `r-${n}`, tool: "charge", record: { ref: `ch_${n}`, key: `key-${n}`, ...(n % 3 === 0 ? { fields: { amount: n } } : {}) } });
    return draft("POST", "/receipts", [["Host", host], ["Content-Type", "application/json"], ["Effectgate-Signature", signReceipt(body, SECRET)]], body);
  };
  return {
    name: "receipts", port, pid: watched.child.pid!, db, shape,
    good: (rng) => ({ draft: signed(rng.int(1, rng.chance(0.3) ? 50 : 1_000_000)), ok: (s) => s === 200 || s === 409 }),
    mayPass: (d, original) => {
      if (d.rawHead || (d.framing !== "length" && d.framing !== "chunked") || !d.body.equals(original.body)) return false;
      const sig = (x: Draft) => x.headers.filter(([n]) => n.trim().toLowerCase() === "effectgate-signature").map(([, v]) => v);
      const now = sig(d);
      return now.length === 1 && now[0] === sig(original)[0];
    },
    allowed5xx: () => false,
    alive: () => probe(port, { draft: signed(7), ok: (s) => s === 200 }, 15_000),
    effects: () => effectsOf(watched.child),
    errorLines: () => watched.stderr().split("\n").filter((l) => l.trim() !== ""),
    exited: () => watched.exitState,
    stop: () => stopChild(watched),
    cleanup: () => rmSync(dir, { recursive: true, force: true }),
  };
}

const MCP_ACCEPT: [string, string] = ["Accept", "application/json, text/event-stream"];
/** What an MCP session is made of in the listener: counted live after a GC, so a session object the listener no longer holds is seen (F10). */
const MCP_SESSION_CLASSES = countClasses({
  transports: ["@modelcontextprotocol/sdk/server/streamableHttp.js", "StreamableHTTPServerTransport"],
  servers: ["@modelcontextprotocol/sdk/server/index.js", "Server"],
});

async function mcpHttpSurface(dir: string, db: string): Promise<RunningSurface> {
  const effectsFile = join(dir, "effects.jsonl");
  const child = spawn(process.execPath, [CLI, "mcp", "--listen", "127.0.0.1:0", "--token", TOKEN, "--db", db, "--", process.execPath, UPSTREAM], {
    cwd: dir, env: { ...process.env, UPSTREAM_EFFECTS: effectsFile, ...heapProbe().env, ...MCP_SESSION_CLASSES }, stdio: ["ignore", "ignore", "pipe"],
  });
  const watched = watch(child);
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setInterval(() => {
      const m = /listening on (http:\/\/\S+)/.exec(watched.stderr());
      if (m?.[1]) {
        clearInterval(timer);
        resolve(m[1]);
      }
    }, 20);
    void watched.exit.then(({ code, signal }) => {
      clearInterval(timer);
      reject(new Error(`effectgate mcp exited (${code ?? signal}) before it listened:\n${watched.stderr()}`));
    });
  });
  const startupLog = watched.stderr().length;
  const { port, pathname: path } = new URL(url);
  const host = `127.0.0.1:${port}`;
  const auth: [string, string] = ["Authorization", `Bearer ${TOKEN}`];
  let session = "";
  /** Every session id the listener handed out to the fuzzer. */
  const opened = new Set<string>();
  let rpcId = 0;
  const rpc = (method: string, params?: object, id: number | null = ++rpcId) =>
    JSON.stringify({ jsonrpc: "2.0", ...(id === null ? {} : { id }), method, ...(params === undefined ? {} : { params }) });
  const initBody = () => rpc("initialize", { protocolVersion: "2025-11-25", capabilities: {}, clientInfo: { name: "fuzz", version: "1" } });
  const headers = (withSession: boolean): [string, string][] =>
    [["Host", host], auth, ["Content-Type", "application/json"], MCP_ACCEPT, ...(withSession && session !== "" ? [["Mcp-Session-Id", session] as [string, string]] : [])];

  /** Opens a session as a host does: initialize, then the initialized notification. */
  async function initialize(): Promise<string | undefined> {
    const result = await exchange(Number(port), { requests: [serializeGood(draft("POST", path, headers(false), initBody()))], complete: true, hangMs: 15_000, sseData: true });
    const response = result.responses[0];
    const id = response?.headers["mcp-session-id"];
    if (!response || response.status !== 200 || !id) return `initialize answered ${response?.status ?? (result.hung ? "nothing" : "a close")}`;
    session = id;
    opened.add(id);
    const note = await exchange(Number(port), { requests: [serializeGood(draft("POST", path, headers(true), rpc("notifications/initialized", undefined, null)))], complete: true, hangMs: 15_000 });
    return note.responses[0]?.status === 202 ? undefined : `notifications/initialized answered ${note.responses[0]?.status ?? "nothing"}`;
  }
  const failed = await initialize();
  if (failed) throw new Error(`the MCP listener did not open a session: ${failed}`);

  const shape: SurfaceShape = { paths: [path, "/", "/mcp/", "/sse", "/messages"], bodyLimit: 4 * 1024 * 1024, token: TOKEN, host, extraHeaders: ["Mcp-Session-Id", "Mcp-Protocol-Version", "Last-Event-ID"] };
  const good = (rng: Rng): GoodRequest => {
    const body = rng.weighted<() => string>([
      [5, () => rpc("tools/list")],
      [3, () => rpc("ping")],
      [2, () => rpc("tools/call", { name: "find_ticket_by_key", arguments: { key: rng.word() } })],
      [1, () => rpc("tools/call", { name: "count_effects", arguments: {} })],
      [1, () => rpc(rng.pick(["resources/list", "prompts/list", "nope/nope", "tools/call"]), rng.chance(0.5) ? { name: rng.word() } : undefined)],
      // A host reconnecting: a new session each time (issue 24 item 2: nothing frees them).
      [1, () => initBody()],
    ])();
    const initializing = body.includes("\"initialize\"");
    return { draft: draft("POST", path, headers(!initializing), body), ok: (s) => s === 200 || s === 202 };
  };
  return {
    name: "mcp-http", port: Number(port), pid: child.pid!, db, shape, good,
    mayPass: (d) => hasToken(d),
    // A session cap, if one refuses with Retry-After, is a documented refusal.
    allowed5xx: (r) => r.status === 503 && r.headers["retry-after"] !== undefined,
    async alive() {
      const answer = await probe(Number(port), { draft: draft("POST", path, headers(true), rpc("tools/list")), ok: (s) => s === 200 }, 15_000);
      // A hostile DELETE with our session id ends it, as it may: open another one.
      if (answer?.startsWith("answered 404")) return initialize();
      return answer;
    },
    effects: async () => {
      const lines = existsSync(effectsFile) ? readFileSync(effectsFile, "utf8").split("\n").filter((l) => l !== "") : [];
      return { handled: lines.length, keys: lines.length, max: lines.length > 0 ? 1 : 0, repeated: [] };
    },
    // The one operator line the listener writes for what hosts do, at most once a minute: sessions it closed (idle, or at its cap).
    errorLines: () => watched.stderr().slice(startupLog).split("\n").filter((l) => l.trim() !== "" && !SESSION_CLOSED.test(l)),
    exited: () => watched.exitState,
    stop: () => stopChild(watched),
    cleanup: () => rmSync(dir, { recursive: true, force: true }),
    observe(response) {
      const id = response.headers["mcp-session-id"];
      if (response.status === 200 && id) opened.add(id);
    },
    async sessionCheck() {
      let held = 0;
      for (const id of opened) {
        const ping = serializeGood(draft("POST", path, [["Host", host], auth, ["Content-Type", "application/json"], MCP_ACCEPT, ["Mcp-Session-Id", id]], rpc("ping")));
        const result = await exchange(Number(port), { requests: [ping], complete: true, hangMs: 15_000, sseData: true });
        if (result.responses[0]?.status === 200) held++;
      }
      const counts = (await retained(child.pid!, heapProbe().dir))?.counts;
      return { opened: opened.size, held, transports: counts?.transports, servers: counts?.servers };
    },
  };
}

export async function startSurface(name: HttpSurfaceName): Promise<RunningSurface> {
  const dir = tmp();
  const db = join(dir, "ledger.db");
  switch (name) {
    case "middleware-node":
    case "middleware-hono": {
      const { watched, port } = await forkChild(`${name}.mjs`, { db });
      return middlewareSurface(name, watched, port, dir, db);
    }
    case "console": {
      const { watched, port } = await forkChild("console.mjs", { db, token: TOKEN });
      return consoleSurface(watched, port, dir, db);
    }
    case "receipts": {
      const { watched, port } = await forkChild("receipts.mjs", { db, secret: SECRET });
      return receiptsSurface(watched, port, dir, db);
    }
    case "mcp-http":
      return mcpHttpSurface(dir, db);
  }
}

export const FUZZ_TOKEN = TOKEN;
export { is2xx };

/** Registers a child the fuzzer started itself, so it is killed if the fuzzer ends first. */
export function watchChild(child: ChildProcess): void {
  live.add(child);
  child.once("exit", () => live.delete(child));
}
