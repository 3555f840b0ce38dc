/**
 * The MCP entry: a world of its own. A host (the SDK's own `Client`, over its InMemoryTransport)
 * talks to one or two MCP gateways, each a simulated process on the one shared ledger, each in
 * front of its own upstream MCP server (a real SDK `McpServer`, the gateway's child) whose tools
 * call the simulated downstreams. Both upstreams may offer a tool of the same name, and both
 * gateways run the same default config (tenant, task): only the upstream tells their calls apart.
 *
 * The gateway is the product's (`createMcpGateway`, wired as `mcpGateway` wires it: a gate per
 * tool list and the policy's grant check), with two substitutions the product leaves no other way
 * to make: its gate gets the world's clock and the process's faulty view of the ledger, and its
 * upstream client speaks over an in-memory transport to a server in the world (the product's
 * `connectUpstream` only starts a child process or reaches a URL); the client classifies a failed
 * request exactly as `connectUpstream` does. The gateway judges its dedupe window on the ledger's
 * clock; the machine's clock (support.ts, what any `Date.now()` reads) is the world's with a skew
 * drawn per schedule, so a window judged on the gateway's own clock is a violation the world can find.
 *
 * The host behaves as docs/mcp.md tells hosts to: without a tool-use id in `_meta` (most of the
 * time), a repeat of a call is the same call; it repeats a call that timed out on its side, one
 * whose gateway died (after restarting it, as a host restarts a stdio server), and one it was told
 * to repeat (EG_IN_PROGRESS, EG_AWAITING_APPROVAL, EG_LEDGER_UNAVAILABLE, EG_NEEDS_HUMAN once a
 * person settled it), and sometimes one already answered. It never repeats a call whose record
 * settled more than half the dedupe window ago: within the window the docs promise the repeat is
 * answered from the ledger; after it, an identical call is a new one. A person decides approval
 * requests and settles calls that need a person by what the downstream really did.
 *
 * Invariants: I1–I6 (invariants.ts) per logical call (an upstream and its call), against the
 * downstream's own counters, plus, as I5, "no answer carries another upstream's result".
 *
 * Loaded only when a schedule asks for the "mcp" entry: it imports `@modelcontextprotocol/sdk`.
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { CallToolResultSchema, ErrorCode, McpError, type CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { z } from "zod";
import { renderResult } from "../../../core/blocks.js";
import { messageOf } from "../../../core/errors.js";
import { OutcomeUnknown, ToolRejected } from "../../../core/outcome.js";
import { isSettled } from "../../../core/states.js";
import type { AnyTool, ToolContext } from "../../../core/tool.js";
import type { CallRecord } from "../../../contracts/calls.js";
import { compilePolicy } from "../../../governance/compile.js";
import { parseMcpConfig, type McpConfig } from "../../../mcp/config.js";
import { createMcpGateway, type GateRunner, type McpGateway } from "../../../mcp/gateway.js";
import { META_FENCE, META_KEY } from "../../../mcp/gated-tools.js";
import { UpstreamDown, type Upstream } from "../../../mcp/upstream.js";
import { resolveCall } from "../../../reconcile/queue.js";
import { createGate, type Gate } from "../../../root/create-gate.js";
import { drawDownstream } from "../workload.js";
import { simulatedDownstream, type DownstreamConfig, type SimulatedSystem } from "../downstream.js";
import { Faults, type FaultRates } from "../faults.js";
import { checkInvariants, type Answer, type Violation } from "../invariants.js";
import { faultyLedger } from "../ledger.js";
import { seededRng, type Rng } from "../rng.js";
import type { ScheduleOptions, ScheduleResult } from "../schedule.js";
import type { Process } from "../world.js";
import { World } from "../world.js";
import type { WorldEntry } from "./world-entry.js";
import { canonical, decidePending, dedupe, machineClock, never } from "./support.js";

/** Tool names the upstreams draw theirs from: two upstreams with "charge" each is the collision. */
const TOOL_NAMES = ["charge", "open_ticket"] as const;
/** What a host hands the SDK as a request timeout: it never fires (the host's own timeout is a world timer). */
const NO_SDK_TIMEOUT = 2_000_000_000;
const CONNECTION_CLOSED: number = ErrorCode.ConnectionClosed;
const REFUSED = new Set<number>([ErrorCode.InvalidParams, ErrorCode.MethodNotFound, ErrorCode.InvalidRequest, ErrorCode.ParseError]);
/** Answers after which a host asks again, as the answer says to. */
const ASK_AGAIN = /^(EG_IN_PROGRESS|EG_LEDGER_UNAVAILABLE|EG_AWAITING_APPROVAL|EG_NEEDS_HUMAN)\b/;

const PROFILES: readonly FaultRates[] = [
  { crash: 0, freeze: 0, freezeMs: [0, 0], fail: 0, lostReply: 0 },
  { crash: 0.03, freeze: 0.01, freezeMs: [100, 3_000], fail: 0.03, lostReply: 0.03 },
  { crash: 0.08, freeze: 0.03, freezeMs: [500, 10_000], fail: 0.06, lostReply: 0.06 },
];

/** One upstream tool and the downstream behind it. */
interface UpstreamTool {
  readonly name: string;
  readonly system: SimulatedSystem & { readonly config: DownstreamConfig };
}

interface UpstreamSpec {
  /** "A" or "B". */
  readonly id: string;
  readonly tools: readonly UpstreamTool[];
  readonly config: McpConfig;
}

/** One logical call of the host: a tool of one upstream with its arguments. */
interface HostCall {
  /** `${upstream}:${ref}`: unique in the schedule (two upstreams may get the very same arguments). */
  readonly id: string;
  readonly upstream: UpstreamSpec;
  readonly tool: UpstreamTool;
  readonly args: { readonly ref: string; readonly amount: number };
  /** A tool-use id the host puts in `_meta`, if it is a host that does. */
  readonly hostId: string | undefined;
}

interface McpWorkload {
  readonly upstreams: readonly UpstreamSpec[];
  readonly calls: readonly HostCall[];
  /** Batches the host sends at once (as a model's parallel tool calls). */
  readonly messages: readonly (readonly HostCall[])[];
  readonly windowMs: number;
  /** The machine's clock minus the store's. */
  readonly skewMs: number;
  readonly hostTimeoutMs: number;
  readonly backoffMs: readonly number[];
  readonly replay: number;
  readonly restartMs: readonly [number, number];
  readonly rates: FaultRates;
  readonly budget: { readonly crashes: number; readonly freezes: number; readonly failures: number };
}

function boundedFreezes(rates: FaultRates, maxMs: number): FaultRates {
  const [min, max] = rates.freezeMs;
  return { ...rates, freezeMs: [Math.min(min, maxMs), Math.min(max, maxMs)] };
}

/** The upstream's tool result for a downstream result: its text, and its structured content with a status (what its probe tool answers too). */
function mcpResultOf(result: unknown): CallToolResult {
  return { content: [{ type: "text", text: JSON.stringify(result) }], structuredContent: { status: "done", ...(result as Record<string, unknown>) } };
}

function drawMcpWorkload(world: World, rng: Rng, prefix: string, tenant: string): McpWorkload {
  const two = rng.chance(0.6);
  const ids = two ? ["A", "B"] : ["A"];
  const windowMs = rng.pick([2_000, 2_000, 10_000, 600_000]);
  const upstreams = ids.map((id): UpstreamSpec => {
    // Each upstream has "charge" (so two upstreams collide) and maybe a tool of its own.
    const names = rng.chance(0.5) ? [...TOOL_NAMES] : ["charge"];
    const tools = names.map((name): UpstreamTool => {
      const drawn = drawDownstream(rng, `${prefix}${id}_${name}`);
      // Every failure an upstream reports as a tool result (isError) is its answer, recorded as such: the simulated
      // downstream refuses nothing here, and a lost reply is the upstream crashing (its connection closes).
      const config: DownstreamConfig = { ...drawn, reject: 0, unavailable: 0, maxLandMs: Math.min(drawn.maxLandMs, 3_000), settleMs: drawn.settleMs === undefined ? undefined : Math.min(drawn.settleMs, 3_500) };
      return { name, system: simulatedDownstream(world, rng.fork(), config) };
    });
    const toolConfigs = Object.fromEntries(tools.map((t) => [t.name, {
      timeoutMs: t.system.config.timeoutMs,
      ...(t.system.config.settleMs === undefined ? {} : { settleMs: t.system.config.settleMs }),
      ...(t.system.config.probe ? { probe: { tool: `find_${t.name}`, arguments: { key: "${key}" }, done: ["done"], absent: ["absent"], running: ["running"] } } : {}),
    }]));
    const config = parseMcpConfig({ tenant, task: "mcp", keys: { dedupeWindowMs: windowMs }, tools: toolConfigs }, `explorer upstream ${id}`);
    return { id, tools, config };
  });
  const count = rng.between(1, 5);
  const calls: HostCall[] = [];
  const hostIds = rng.chance(0.25);
  for (let i = 0; i < count; i++) {
    const upstream = rng.pick(upstreams);
    const previous = calls.filter((c) => c.upstream !== upstream && upstream.tools.some((t) => t.name === c.tool.name));
    // The collision: the very call the host made through the other gateway, now through this one.
    const same = previous.length > 0 && rng.chance(0.4) ? rng.pick(previous) : undefined;
    const tool = same ? upstream.tools.find((t) => t.name === same.tool.name)! : rng.pick(upstream.tools);
    const args = same ? same.args : { ref: `${prefix}call_${i}`, amount: rng.between(1, 500) };
    if (calls.some((c) => c.upstream === upstream && c.args.ref === args.ref)) continue;
    calls.push({ id: `${upstream.id}:${args.ref}`, upstream, tool, args, hostId: hostIds ? `toolu_${upstream.id}_${i}` : undefined });
  }
  const messages: HostCall[][] = [];
  for (let i = 0; i < calls.length;) {
    const size = Math.min(calls.length - i, rng.between(1, 2));
    messages.push(calls.slice(i, i + size));
    i += size;
  }
  return {
    upstreams, calls, messages, windowMs,
    skewMs: rng.pick([0, 0, 0, 1_500, -1_500]),
    hostTimeoutMs: rng.pick([500, 1_000, 5_000, 60_000]),
    backoffMs: [rng.pick([100, 300, 1_000]), rng.pick([500, 2_000, 4_000])],
    replay: rng.pick([0, 0.3]),
    restartMs: [10, rng.pick([100, 2_000])],
    // A gateway stalled (SIGSTOP) between a host's repeat and its key lookup may see the window closed: a stall
    // longer than the margin the host keeps (half the window) is a repeat after the window, a new call by design.
    rates: boundedFreezes(rng.pick(PROFILES), windowMs / 4),
    budget: { crashes: rng.between(0, 2), freezes: rng.between(0, 2), failures: rng.between(0, 3) },
  };
}

export async function runMcpSchedule(seed: number, options: ScheduleOptions): Promise<ScheduleResult> {
  const rng = seededRng(seed);
  const world = new World(rng.fork(), options.trace === true);
  const opened = await options.ledger(seed, world.wall);
  const base = opened.stores;
  const tenant = opened.tenant;
  const workload = drawMcpWorkload(world, rng.fork(), opened.prefix, tenant);
  const faults = new Faults(world, rng.fork(), workload.rates, { ...workload.budget });
  const agentRng = rng.fork();
  const restoreClock = machineClock(world, workload.skewMs);
  const violations: Violation[] = [];
  const answers: Answer[] = [];
  /** Starts of a tool per gateway process and logical call: "had this gateway started it before it answered?" (I4). */
  const runs = new Map<string, number>();
  /** The keys each logical call reached its gate under, in order (a second one is a second generation). */
  const keysOf = new Map<string, string[]>();
  /** Which logical calls reached their gate under a key (two, when two upstreams' calls share one). */
  const callsOfKey = new Map<string, HostCall[]>();
  const callOf = (upstream: UpstreamSpec, input: unknown) => workload.calls.find((c) => c.upstream === upstream && c.args.ref === (input as { ref?: unknown } | null)?.ref);
  let started = 0;

  /** One gateway incarnation: a process, the product's gateway, the gate it made, its upstream child and its host connection. */
  interface Gateway {
    readonly process: Process;
    readonly upstream: UpstreamSpec;
    readonly gateway: McpGateway;
    gates: Gate[];
    host?: Client;
    /** Resolves once it serves its host. */
    ready: Promise<boolean>;
  }
  const live = new Map<string, Gateway>();
  const waiting = new Map<string, (() => void)[]>();

  /** The upstream MCP server, a child of the gateway: killed with it; its tools call the downstreams from its own process. */
  function upstreamServer(spec: UpstreamSpec, process: Process, onCrash: () => void): McpServer {
    const server = new McpServer({ name: `explorer-upstream-${spec.id}`, version: "1.0.0" });
    for (const tool of spec.tools) {
      const [run] = tool.system.toolsFor(process) as [AnyTool];
      const ctxOf = (key: string, fence: number, signal: AbortSignal): ToolContext => ({
        idempotencyKey: key, toolUseId: key, fence, signal, attempt: 1, scope: { tenant, task: "mcp" },
      });
      server.registerTool(tool.name, {
        description: `simulated ${tool.system.name}`,
        inputSchema: { ref: z.string(), amount: z.number() },
        annotations: { destructiveHint: tool.system.config.effect === "destructive", ...(tool.system.config.honoursKeys ? { idempotentHint: true } : {}) },
      }, async (args, extra) => {
        const meta = (extra._meta ?? {}) as Record<string, unknown>;
        const key = typeof meta[META_KEY] === "string" ? meta[META_KEY] : `no-key-${args.ref}`;
        const fence = typeof meta[META_FENCE] === "number" ? meta[META_FENCE] : 0;
        try {
          return mcpResultOf(await run.execute(args, ctxOf(key, fence, extra.signal)));
        } catch (err) {
          if ((err as { code?: unknown }).code === "ECONNRESET") {
            // Its reply to the gateway is lost the way a stdio server's is: it dies mid-call.
            world.log(`upstream ${spec.id} (${process.name}) crashes after ${tool.system.name} applied ${args.ref}`);
            onCrash();
            return never<CallToolResult>();
          }
          return { isError: true, content: [{ type: "text", text: messageOf(err) }] };
        }
      });
      if (run.probe) {
        const probe = run.probe.bind(run);
        server.registerTool(`find_${tool.name}`, { description: `is ${tool.name} with this key done?`, inputSchema: { key: z.string() }, annotations: { readOnlyHint: true } },
          async ({ key }, extra) => {
            const found = await probe({}, ctxOf(key, 0, extra.signal));
            return found.status === "done" ? mcpResultOf(found.result) : { content: [{ type: "text", text: found.status }], structuredContent: { status: found.status } };
          });
      }
    }
    return server;
  }

  /**
   * The gateway's upstream client over an in-memory transport, started (and restarted after a
   * crash) on demand like connectUpstream's child; a failed request classified as connectUpstream
   * classifies it.
   */
  function inMemoryUpstream(spec: UpstreamSpec, owner: Process): Upstream {
    let client: Client | undefined;
    let connecting: Promise<Client> | undefined;
    let closed = false;
    let children = 0;
    const listeners: (() => void)[] = [];
    const stopChild: (() => void)[] = [];
    const describe = `explorer upstream ${spec.id}`;
    async function connected(): Promise<Client> {
      if (closed || owner.state === "dead") throw new UpstreamDown(`the gateway is closing; the upstream ${describe} takes no more calls`);
      if (client) return client;
      connecting ??= (async () => {
        const child = world.process(`upstream-${spec.id}-${owner.name}-${++children}`);
        const [gatewaySide, upstreamSide] = InMemoryTransport.createLinkedPair();
        const fresh = new Client({ name: "effectgate-mcp-gateway", version: "0.1.0" });
        const crash = () => {
          if (child.state === "dead") return;
          world.kill(child, "(upstream crashed)");
          void gatewaySide.close();
        };
        stopChild.push(crash);
        fresh.onclose = () => {
          if (client === fresh) client = undefined;
        };
        await upstreamServer(spec, child, crash).connect(upstreamSide);
        await fresh.connect(gatewaySide);
        client = fresh;
        return fresh;
      })().finally(() => {
        connecting = undefined;
      });
      return connecting;
    }
    return {
      describe,
      // What connectUpstream derives from a command or URL: each upstream its own, the same for every incarnation of its gateway.
      identity: `explorer-upstream-${spec.id}`,
      async listTools() {
        return (await (await connected()).listTools()).tools;
      },
      async call(call) {
        const c = await connected();
        try {
          return await c.request({ method: "tools/call", params: { name: call.name, arguments: call.arguments, _meta: call.meta } }, CallToolResultSchema,
            { timeout: NO_SDK_TIMEOUT, ...(call.signal ? { signal: call.signal } : {}) });
        } catch (err) {
          // As connectUpstream (src/mcp/upstream.ts) reads a failed request.
          if (call.signal?.aborted) throw err;
          if (err instanceof McpError && REFUSED.has(err.code)) {
            throw new ToolRejected(`the upstream refused the call: ${err.message}`, { cause: err });
          }
          if (err instanceof McpError && err.code === CONNECTION_CLOSED) {
            throw new OutcomeUnknown(`the upstream ${describe} closed the connection while ${call.name} was running (it crashed or exited): it may or may not have done it`, { cause: err });
          }
          if (err instanceof Error && err.message === "Not connected") throw new UpstreamDown(`the upstream ${describe} was not connected, so ${call.name} was not sent`, { cause: err });
          throw new OutcomeUnknown(`the upstream's answer to ${call.name} was not a usable tool result (${messageOf(err)})`, { cause: err });
        }
      },
      onToolsChanged(listener) {
        listeners.push(listener);
      },
      async close() {
        closed = true;
        for (const stop of stopChild) stop();
        const c = client;
        client = undefined;
        await c?.close().catch(() => undefined);
      },
    };
  }

  function startGateway(spec: UpstreamSpec): Gateway {
    const process = world.process(`worker-gw${spec.id}-${++started}`);
    const upstream = inMemoryUpstream(spec, process);
    const made: Gateway = {
      process, upstream: spec, gates: [], ready: Promise.resolve(false),
      gateway: createMcpGateway({
        config: spec.config, upstream, version: "0.1.0", log: (line) => world.log(`${process.name}: ${line.slice(0, 200)}`),
        calls: faultyLedger(world, base, process, () => "", faults, { overwrote: () => undefined }).calls,
        // As src/root/mcp-gateway.ts wires it, with the world's clock and this process's view of the ledger.
        makeGate(tools, approver) {
          const holder: { gate?: Gate } = {};
          const gate = createGate({
            tools: tools.map((t) => counted(t, spec, process)),
            ledger: faultyLedger(world, base, process, () => holder.gate?.owner ?? "", faults, {
              overwrote: (p, owner, before, op) => violations.push({
                seed, invariant: "I6", message: `${p.name} (${owner}) wrote ${op} on ${before.key} while ${before.owner} held it (fence ${before.fence})`,
              }),
            }),
            approver, time: world.timeFor(process), random: () => agentRng.next(),
            onAlert: (a) => world.log(`${process.name} alert ${a.code}: ${a.message.slice(0, 160)}`),
            faults: (point) => (faults.atPoint(process, point) === "crash" ? never<void>() : undefined),
            ...(spec.config.timeoutMs === undefined ? {} : { timeoutMs: spec.config.timeoutMs }),
          });
          holder.gate = gate;
          made.gates.push(gate);
          const grants = compilePolicy(undefined, new Map(tools.map((t) => [t.name, t])));
          return { runner: observed(gate, spec), isGranted: (tool, scope) => grants.isGranted(tool, scope) };
        },
      }),
    };
    const starting = (async () => {
      await world.answerOf(process, made.gateway.start());
      const [hostSide, gatewaySide] = InMemoryTransport.createLinkedPair();
      await world.answerOf(process, made.gateway.connectHost(gatewaySide));
      const host = new Client({ name: "explorer-host", version: "1.0.0" });
      await host.connect(hostSide);
      made.host = host;
      return true;
    })().catch((err: unknown) => {
      world.log(`${process.name} could not start: ${messageOf(err)}`);
      world.kill(process, "(its start failed)");
      return false;
    });
    made.ready = Promise.race([starting, world.died(process).then(() => false)]);
    live.set(spec.id, made);
    void world.died(process).then(() => {
      if (live.get(spec.id) === made) live.delete(spec.id);
      // The host's connection closes (stdio EOF), the upstream child dies with its parent.
      void made.host?.close().catch(() => undefined);
      void upstream.close();
      world.addTimer(agentRng.between(...workload.restartMs), () => {
        const next = startGateway(spec);
        void next.ready.then((ok) => {
          if (!ok) return;
          for (const wake of waiting.get(spec.id)?.splice(0) ?? []) wake();
        });
      });
    });
    return made;
  }

  /** The gate's tools, counting each start per gateway process and logical call. */
  function counted(tool: AnyTool, spec: UpstreamSpec, process: Process): AnyTool {
    return {
      ...tool,
      execute(input, ctx) {
        const call = callOf(spec, input);
        const id = `${process.name}\u0001${call?.id ?? "?"}`;
        runs.set(id, (runs.get(id) ?? 0) + 1);
        world.log(`${process.name} starts ${tool.name} for ${call?.id ?? "?"} key ${ctx.idempotencyKey} (attempt ${ctx.attempt}, fence ${ctx.fence})`);
        return tool.execute(input, ctx);
      },
    };
  }

  /** The gate as the gateway sees it, noting which key each logical call reached it under. */
  function observed(gate: Gate, spec: UpstreamSpec): GateRunner {
    return {
      runToolUses(content, scope) {
        for (const block of content as { id?: string; input?: unknown }[]) {
          const call = callOf(spec, block.input);
          if (!call || typeof block.id !== "string") continue;
          const keys = keysOf.get(call.id) ?? [];
          if (!keys.includes(block.id)) keys.push(block.id);
          keysOf.set(call.id, keys);
          const sharing = callsOfKey.get(block.id) ?? [];
          if (!sharing.includes(call)) sharing.push(call);
          callsOfKey.set(block.id, sharing);
        }
        return gate.runToolUses(content, scope);
      },
      recover: () => gate.recover(),
      drain: () => gate.drain(),
      close: () => gate.close(),
    };
  }

  async function connection(spec: UpstreamSpec): Promise<Gateway> {
    for (;;) {
      const current = live.get(spec.id);
      if (current && (await current.ready) && current.process.state !== "dead" && current.host) return current;
      await new Promise<void>((wake) => waiting.set(spec.id, [...(waiting.get(spec.id) ?? []), wake]));
    }
  }

  /** The record a logical call's latest key names, read from the ledger as an observer (no faults). */
  async function latestRecord(call: HostCall): Promise<CallRecord | undefined> {
    const key = keysOf.get(call.id)?.at(-1);
    return key === undefined ? undefined : world.track(base.calls.get(tenant, key));
  }

  /** Whether the docs promise that a repeat now is the same call: no tool-use id, and settled less than half the window ago (or not settled). */
  async function mayRepeat(call: HostCall): Promise<boolean> {
    if (call.hostId !== undefined) return true;
    const record = await latestRecord(call);
    return !record || !isSettled(record.state) || world.wall() - record.updatedAt < workload.windowMs / 2;
  }

  /** One tools/call from the host: the answer, or "timeout" (the host gave up waiting) or "closed" (its gateway died). */
  async function send(call: HostCall, phase: Answer["phase"]): Promise<Answer | "timeout" | "closed"> {
    const gw = await connection(call.upstream);
    const host = gw.host!;
    const abort = new AbortController();
    const timer = world.addTimer(workload.hostTimeoutMs, () => abort.abort(new Error("the host's request timed out")));
    world.log(`host → ${gw.process.name} ${call.tool.name} ${call.id}${call.hostId === undefined ? "" : ` (_meta ${call.hostId})`}`);
    try {
      const result = await host.request(
        { method: "tools/call", params: { name: call.tool.name, arguments: { ...call.args }, ...(call.hostId === undefined ? {} : { _meta: { toolUseId: call.hostId } }) } },
        CallToolResultSchema, { timeout: NO_SDK_TIMEOUT, signal: abort.signal },
      );
      if (gw.process.state === "dead") return "closed";
      const text = result.content[0]?.type === "text" ? result.content[0].text : JSON.stringify(result.content);
      const isError = result.isError === true;
      const answer: Answer = {
        ref: call.id, toolUseId: keysOf.get(call.id)?.at(-1) ?? call.hostId ?? "?", worker: gw.process.name, phase, at: world.now,
        content: isError ? text : renderResult(canonical(result)), isError,
        ranHere: (runs.get(`${gw.process.name}\u0001${call.id}`) ?? 0) > 0,
      };
      answers.push(answer);
      world.log(`host ← ${gw.process.name} ${call.id}: ${isError ? "error " : ""}${answer.content.slice(0, 160)}`);
      return answer;
    } catch (err) {
      if (abort.signal.aborted) {
        world.log(`host: ${call.id} timed out after ${workload.hostTimeoutMs} ms`);
        return "timeout";
      }
      world.log(`host: ${call.id} failed: ${messageOf(err).slice(0, 120)}`);
      return "closed";
    } finally {
      timer.cancel();
    }
  }

  const sent = new Set<string>();

  /** The host's way with one call: send, and repeat while it has no answer or was told to repeat (within the window). */
  async function deliver(call: HostCall, phase: Answer["phase"], attempts: number): Promise<void> {
    for (let attempt = 0; attempt < attempts; attempt++) {
      if (sent.has(call.id) && !(await mayRepeat(call))) return;
      sent.add(call.id);
      const outcome = await send(call, phase);
      if (outcome !== "timeout" && outcome !== "closed" && !ASK_AGAIN.test(outcome.content)) {
        if (phase === "final" || !agentRng.chance(workload.replay)) return;
      }
      if (attempt === attempts - 1) return;
      await world.until(world.now + agentRng.pick(workload.backoffMs));
    }
  }

  /** A person: decides approval requests, and settles a call that needs one by what its downstream did, once no request can still land. */
  async function person(): Promise<void> {
    await decidePending(world, base, tenant, agentRng);
    for (const record of await world.track(base.calls.list({ tenant, state: "needs_human", limit: 1000 }))) {
      const call = callsOfKey.get(record.key)?.[0];
      if (!call) continue;
      const { system } = call.tool;
      if (world.wall() < record.startedAt + system.config.maxLandMs + system.config.replyDelayMs + 1) continue;
      const ref = call.args.ref;
      const done = system.effects(ref) > 0;
      try {
        await world.track(resolveCall(base, tenant, record.key, done
          ? { completedWith: canonical(mcpResultOf(system.resultOf(ref))), by: "explorer", note: `checked ${system.name}` }
          : { failed: `${system.name} has no effect of ${ref}`, by: "explorer" }));
        world.log(`person settled ${record.key} (${call.id}) as ${done ? "done" : "not done"}`);
      } catch (err) {
        world.log(`person could not settle ${record.key}: ${messageOf(err).slice(0, 120)}`);
      }
    }
  }
  let deciding = true;
  const personLoop = async () => {
    while (deciding) {
      await world.until(world.now + agentRng.pick([50, 1_000, 10_000]));
      if (deciding) await person();
    }
  };

  let records: CallRecord[] = [];
  let unsettled: string | undefined;
  const main = (async () => {
    for (const spec of workload.upstreams) startGateway(spec);
    const deciding$ = personLoop();
    for (const message of workload.messages) await Promise.all(message.map((call) => deliver(call, "run", 8)));
    deciding = false;
    await deciding$;

    // Settle: no more faults; recover every gateway's gate, let a person settle what waits for one, the host repeats each call once.
    faults.stop();
    const horizon = Math.max(...workload.upstreams.flatMap((u) => u.tools.map((t) => (t.system.config.settleMs ?? 0) + t.system.config.maxLandMs))) + 30_001;
    /** A call the host still waits for, or has not made once more since faults stopped (as schedule.ts replays every message). */
    const waitingFor = async (call: HostCall) => {
      const said = answers.filter((a) => a.ref === call.id);
      const last = said.at(-1);
      const open = last === undefined || ASK_AGAIN.test(last.content) || !said.some((a) => a.phase === "final");
      return open && (await mayRepeat(call));
    };
    for (let round = 0; ; round++) {
      for (const spec of workload.upstreams) {
        const gw = await connection(spec);
        for (const gate of gw.gates) await world.answerOf(gw.process, gate.recover()).catch(() => undefined);
      }
      await person();
      // The host repeats, at once, each call it still waits for or has not repeated yet (one settled too long ago would be a new call: not made again).
      const repeat: HostCall[] = [];
      for (const call of workload.calls) if (await waitingFor(call)) repeat.push(call);
      await Promise.all(repeat.map((call) => deliver(call, "final", 1)));
      const held = (await world.track(base.calls.list({ tenant, limit: 1000 }))).filter((r) => !isSettled(r.state));
      const open: HostCall[] = [];
      for (const call of workload.calls) if (await waitingFor(call)) open.push(call);
      if (held.length === 0 && open.length === 0) break;
      if (round >= 30) {
        unsettled = `after 30 rounds of recovery, ${[...held.map((r) => `${r.key} (${r.state})`), ...open.map((c) => `${c.id} (still waiting)`)].join(", ")} not settled`;
        break;
      }
      await world.until(world.now + horizon);
    }
    for (const gw of live.values()) {
      await gw.host?.close().catch(() => undefined);
      await world.answerOf(gw.process, gw.gateway.close()).catch(() => undefined);
    }
    records = await world.track(base.calls.list({ tenant, limit: 1000 }));
  })();

  let ended: Awaited<ReturnType<World["run"]>>;
  try {
    ended = await world.run(main);
    if (ended === "done") await main;
  } finally {
    restoreClock();
  }
  if (ended !== "done") {
    violations.push({ seed, invariant: "I3", message: ended === "stuck" ? "the MCP schedule deadlocked: nothing could move and the host was still waiting" : "the MCP schedule did not settle within its step budget (a livelock)" });
  }
  if (unsettled) violations.push({ seed, invariant: "I3", message: unsettled });
  for (const gw of live.values()) gw.process.state = "dead";

  const byKey = new Map(records.map((r) => [r.key, { ...r, result: r.result === null ? null : canonical(r.result) } satisfies CallRecord]));
  const evidence = workload.calls.map((call) => {
    const key = keysOf.get(call.id)?.at(-1) ?? `never-reached:${call.id}`;
    const { system } = call.tool;
    const [tool] = system.toolsFor(world.process("probe-only")) as [AnyTool];
    const counters: SimulatedSystem = {
      ...system,
      resultOf: (ref) => {
        const real = system.resultOf(ref.slice(call.upstream.id.length + 1));
        return real === undefined ? undefined : canonical(mcpResultOf(real));
      },
      effects: (ref) => system.effects(ref.slice(call.upstream.id.length + 1)),
      sends: (ref) => system.sends(ref.slice(call.upstream.id.length + 1)),
      sentAfterApplied: (ref) => system.sentAfterApplied?.(ref.slice(call.upstream.id.length + 1)) === true,
    };
    return { ref: call.id, block: { id: key }, system: counters, tool };
  });
  violations.push(...checkInvariants(seed, { calls: evidence, answers, records: byKey }));
  violations.push(...crossUpstream(seed, workload, answers, keysOf));
  await opened.release();
  return {
    seed, calls: workload.calls.length, faults: faults.counts, workersStarted: started,
    violations: dedupe(violations), trace: world.trace,
  };
}

/**
 * Entry-specific, reported as I5: no successful answer to a call on one upstream carries a result
 * another upstream's downstream produced, and no call is refused as a repeat of another upstream's
 * call (a destructive tool's repeats window, which compares intents); and, as I1, a call whose repeats all came within the
 * dedupe window never reached its gate under a second generation of its key.
 */
function crossUpstream(seed: number, workload: McpWorkload, answers: readonly Answer[], keysOf: ReadonlyMap<string, readonly string[]>): Violation[] {
  const out: Violation[] = [];
  for (const call of workload.calls) {
    const own = `"${call.tool.system.name}-`;
    for (const a of answers.filter((x) => x.ref === call.id && !x.isError)) {
      const other = workload.upstreams.flatMap((u) => u.tools).find((t) => t !== call.tool && a.content.includes(`"${t.system.name}-`));
      if (other && !a.content.includes(own)) {
        out.push({ seed, invariant: "I5", message: `[mcp: no answer carries another upstream's result] ${a.worker} answered ${call.id} (${call.tool.system.name}) with a result of ${other.system.name}: ${a.content.slice(0, 160)}` });
        break;
      }
    }
    // A destructive tool refuses a repeat of the same intent: one upstream's call must never be taken for a repeat of another's.
    for (const a of answers.filter((x) => x.ref === call.id && x.content.startsWith("EG_REPEATED_CALL"))) {
      const other = workload.calls.find((c) => c.upstream !== call.upstream && (keysOf.get(c.id) ?? []).some((k) => a.content.includes(`key ${k})`)));
      if (other) {
        out.push({ seed, invariant: "I5", message: `[mcp: no call is taken for a repeat of another upstream's call] ${a.worker} refused ${call.id} (${call.tool.system.name}) as a repeat of ${other.id} (${other.tool.system.name}): ${a.content.slice(0, 160)}` });
        break;
      }
    }
    const keys = keysOf.get(call.id) ?? [];
    if (call.hostId === undefined && keys.length > 1) {
      out.push({ seed, invariant: "I1", message: `[mcp: a repeat within the dedupe window is the same call] ${call.id} reached its gate under ${keys.length} keys (${keys.join(", ")}), though the host repeated it only within ${workload.windowMs / 2} ms of its settling (window ${workload.windowMs} ms)` });
    }
  }
  return out;
}

export const mcpEntry: WorldEntry = { kind: "world", name: "mcp", run: runMcpSchedule };
