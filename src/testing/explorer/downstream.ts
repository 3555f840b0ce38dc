/**
 * Simulated downstream systems for the fault explorer, and the interface a user's own simulator
 * implements (docs/testing.md). A downstream counts, per logical call (`ref`), every request that
 * reached it and every effect it applied: those counters, never the ledger, are what the
 * invariants are checked against.
 *
 * The built-in one is configured per schedule from the seed: it may honour idempotency keys or
 * not, keep the highest fence per key and refuse older ones, take a while to apply a request
 * (up to `maxLandMs`, which the tool declares as its settleMs), drop replies after applying,
 * refuse requests (nothing applied), answer 503 (nothing applied), keep applying a request the
 * client cancelled, and answer probes (done / running / absent) from what it actually applied.
 */
import { ToolRejected } from "../../core/outcome.js";
import type { ProbeResult } from "../../core/hooks.js";
import type { StandardSchemaV1 } from "../../core/standard-schema.js";
import { sleepOn } from "../../core/time.js";
import { defineTool, type AnyTool, type ToolContext } from "../../core/tool.js";
import type { Rng } from "./rng.js";
import type { Process, World } from "./world.js";

/** What the explorer needs from a simulated downstream system (built-in or your own). */
export interface SimulatedSystem {
  readonly name: string;
  /** This system's tools as `process` runs them: its requests come from that process (dead: never sent; frozen: sent once thawed). */
  toolsFor(process: Process): AnyTool[];
  /** A new logical call the agent makes, named `ref` (unique in the schedule): which tool, with what input. */
  newCall(rng: Rng, ref: string): { readonly tool: string; readonly input: unknown };
  /** How many requests for call `ref` reached the downstream. */
  sends(ref: string): number;
  /** How many times the effect of call `ref` was applied. */
  effects(ref: string): number;
  /** The result of call `ref`'s effect as the downstream applied it (first application), if it was. */
  resultOf(ref: string): unknown;
  /** Whether a request for `ref` was sent after an earlier one that may have applied (for I2; optional). */
  sentAfterApplied?(ref: string): boolean;
}

export interface DownstreamConfig {
  /** The tool's name (and the system's). */
  readonly name: string;
  readonly effect: "write" | "destructive";
  /** A second request with the same idempotency key returns the first's result and applies nothing (the tool says downstreamIdempotent). */
  readonly honoursKeys: boolean;
  /** Requests whose fence (ctx.fence) is lower than the highest seen for their key are refused (409), nothing applied. */
  readonly enforcesFence: boolean;
  /** The tool has a probe that looks the key up downstream. */
  readonly probe: boolean;
  /** The probe says "running" while a request for the key is still being worked on. */
  readonly probeSeesInflight: boolean;
  /** A request lands (is applied or dropped) at most this long after it is sent. */
  readonly maxLandMs: number;
  /** What the tool declares as settleMs (undefined: none). The guarantee assumes settleMs ≥ maxLandMs. */
  readonly settleMs: number | undefined;
  /** The reply comes up to this long after the request landed. */
  readonly replyDelayMs: number;
  readonly timeoutMs: number;
  /** Probability the reply is lost after the effect was applied (the client sees ECONNRESET). */
  readonly dropReply: number;
  /** Probability the request is refused (422, nothing applied). */
  readonly reject: number;
  /** Probability of a 503 (nothing applied). */
  readonly unavailable: number;
  /** A request whose client aborted before it landed is dropped (else it is applied anyway). */
  readonly honoursCancel: boolean;
  /** The tool passes ctx.signal to its request (its promise rejects on abort); else it waits for the reply. */
  readonly toolHonoursAbort: boolean;
  /** The tool awaits this long (simulated) before sending, e.g. for a token: a window in which its process may stall. */
  readonly preSendMs: number;
  /**
   * Once, on a worker, the tool's process stalls this long (a GC or VM pause) before it sends: past
   * its lease, so another worker may take the call over and send first; the stale send must then be
   * refused by its older fence (workload.ts drawStalls).
   */
  readonly stallMs?: number;
  /** The tool's intent window (its `repeats` policy), for re-plans under a new id; undefined: the effect class's default. */
  readonly repeats?: "collapse" | "refuse";
  /** What happens to the first requests, in order (a scripted scenario); later ones are drawn from the rates above. */
  readonly script?: readonly ScriptedRequest[];
  /**
   * Break one of the guarantee's assumptions on purpose, to see the explorer catch it:
   * "probe_lies" (the probe always says absent), "claims_idempotent" (the tool says
   * downstreamIdempotent though the downstream does not honour keys).
   */
  readonly lie?: "probe_lies" | "claims_idempotent";
}

export interface ScriptedRequest {
  readonly fate?: "apply" | "reject" | "unavailable";
  readonly landMs?: number;
  readonly replyMs?: number;
  readonly dropReply?: boolean;
}

interface Applied {
  readonly result: Record<string, unknown>;
}

const callInput: StandardSchemaV1<unknown, { ref: string; amount: number }> = {
  "~standard": {
    version: 1, vendor: "effectgate-explorer",
    validate: (value) => {
      const v = value as { ref?: unknown; amount?: unknown } | null;
      return typeof v === "object" && v !== null && typeof v.ref === "string" && typeof v.amount === "number"
        ? { value: { ref: v.ref, amount: v.amount } }
        : { issues: [{ message: "expected { ref: string, amount: number }" }] };
    },
  },
};

function httpError(status: number, message: string): Error {
  return status >= 400 && status < 500 && status !== 408 && status !== 429 ? new ToolRejected(message) : Object.assign(new Error(message), { status });
}

/** The built-in simulated downstream: one tool, its effects counted per logical call. */
export function simulatedDownstream(world: World, rng: Rng, config: DownstreamConfig): SimulatedSystem & { readonly config: DownstreamConfig } {
  const byKey = new Map<string, Applied>();
  const effects = new Map<string, number>();
  const sends = new Map<string, number>();
  const results = new Map<string, unknown>();
  const inflight = new Map<string, number>();
  const highestFence = new Map<string, number>();
  /** Per call, the requests sent that may have applied (not dropped or refused before they landed); and the calls sent again after one. */
  const mayHaveApplied = new Map<string, number>();
  const sentAfter = new Set<string>();
  let seq = 0;
  let requests = 0;
  let stalled = false;
  const bump = (map: Map<string, number>, key: string, by = 1) => map.set(key, (map.get(key) ?? 0) + by);

  function request(process: Process, key: string, fence: number, input: { ref: string; amount: number }, signal: AbortSignal | undefined): Promise<unknown> {
    return new Promise((resolve, reject) => {
      let cancelled = false;
      let answered = false;
      const answer = (fn: () => void) => {
        if (answered) return;
        answered = true;
        fn();
      };
      if (signal) {
        if (signal.aborted) return answer(() => reject(Object.assign(new Error("aborted before sending"), { name: "AbortError" })));
        signal.addEventListener("abort", () => {
          cancelled = true;
          answer(() => reject(Object.assign(new Error("the request was aborted"), { name: "AbortError" })));
        }, { once: true });
      }
      void world.running(process).then(() => {
        if (process.state === "dead") return;
        bump(sends, input.ref);
        bump(inflight, key);
        // The fence is kept from when a request arrives: an older one still being processed is refused when it lands.
        if (config.enforcesFence) highestFence.set(key, Math.max(fence, highestFence.get(key) ?? 0));
        const scripted = config.script?.[requests++];
        const fate = scripted?.fate ?? (rng.chance(config.reject) ? "reject" : rng.chance(config.unavailable) ? "unavailable" : "apply");
        if ((mayHaveApplied.get(input.ref) ?? 0) > 0) sentAfter.add(input.ref);
        if (fate === "apply") bump(mayHaveApplied, input.ref);
        const landIn = scripted?.landMs ?? rng.between(0, config.maxLandMs);
        const replyIn = scripted?.replyMs ?? rng.between(0, config.replyDelayMs);
        const drop = scripted?.dropReply ?? rng.chance(config.dropReply);
        world.log(`${config.name} ← ${process.name} request ${input.ref} key ${key} fence ${fence} (${fate}, lands in ${landIn} ms)`);
        world.addTimer(landIn, () => {
          bump(inflight, key, -1);
          let reply: () => void;
          if (fate === "reject") reply = () => reject(httpError(422, `${config.name} refused the request (injected)`));
          else if (fate === "unavailable") reply = () => reject(httpError(503, `${config.name} is unavailable (injected 503; nothing applied)`));
          else if (cancelled && config.honoursCancel) {
            world.log(`${config.name}: request ${input.ref} cancelled before it landed, dropped`);
            // It never applied: a later send of the call is not a second one (seed 3938).
            bump(mayHaveApplied, input.ref, -1);
            return;
          } else if (config.enforcesFence && fence < (highestFence.get(key) ?? 0)) {
            world.log(`${config.name}: request ${input.ref} refused, fence ${fence} < ${highestFence.get(key) ?? 0}`);
            bump(mayHaveApplied, input.ref, -1);
            reply = () => reject(httpError(409, `${config.name} refused a stale fence ${fence}`));
          } else {
            highestFence.set(key, Math.max(fence, highestFence.get(key) ?? 0));
            const existing = config.honoursKeys ? byKey.get(key) : undefined;
            let result: Record<string, unknown>;
            if (existing) {
              result = existing.result;
            } else {
              result = { id: `${config.name}-${++seq}`, ref: input.ref, amount: input.amount };
              bump(effects, input.ref);
              if (!results.has(input.ref)) results.set(input.ref, result);
              if (!byKey.has(key)) byKey.set(key, { result });
              world.log(`${config.name}: applied ${input.ref} as ${String(result.id)} (effect #${effects.get(input.ref)})`);
            }
            const applied = result;
            reply = drop
              ? () => reject(Object.assign(new Error(`connection reset after ${config.name} applied the request (injected)`), { code: "ECONNRESET" }))
              : () => resolve(structuredClone(applied));
          }
          world.addTimer(replyIn, () => answer(reply));
        });
      });
    });
  }

  function toolFor(process: Process): AnyTool {
    const time = world.timeFor(process);
    const tool = defineTool({
      name: config.name,
      description: `simulated ${config.name}`,
      effect: config.effect,
      input: callInput,
      timeoutMs: config.timeoutMs,
      ...(config.settleMs === undefined ? {} : { settleMs: config.settleMs }),
      ...(config.honoursKeys || config.lie === "claims_idempotent" ? { downstreamIdempotent: true } : {}),
      // A window longer than any schedule: a re-plan is always the same intent as the call it repeats.
      ...(config.repeats ? { repeats: { action: config.repeats, windowMs: 30 * 86_400_000 } } : {}),
      ...(config.effect === "destructive"
        ? { dryRun: (input: { ref: string; amount: number }) => ({ effect: `would_${config.name}`, would_affect: { ref: input.ref, amount: input.amount }, reversible: false }) }
        : {}),
      async execute(input, ctx: ToolContext) {
        if (config.stallMs !== undefined && !stalled && process.name.startsWith("worker")) {
          stalled = true;
          world.freeze(process, config.stallMs, `in ${config.name} for ${ctx.toolUseId} before it sends (fence ${ctx.fence})`);
        }
        if (config.preSendMs > 0) await sleepOn(time, config.preSendMs);
        return request(process, ctx.idempotencyKey, ctx.fence, input, config.toolHonoursAbort ? ctx.signal : undefined);
      },
      ...(config.probe
        ? {
            async probe(_input: { ref: string; amount: number }, ctx: ToolContext): Promise<ProbeResult<unknown>> {
              await world.running(process);
              if (config.lie === "probe_lies") return { status: "absent" };
              const found = byKey.get(ctx.idempotencyKey);
              if (found) return { status: "done", result: structuredClone(found.result) };
              if (config.probeSeesInflight && (inflight.get(ctx.idempotencyKey) ?? 0) > 0) return { status: "running" };
              return { status: "absent" };
            },
          }
        : {}),
    });
    return tool as unknown as AnyTool;
  }

  return {
    name: config.name,
    config,
    toolsFor: (process) => [toolFor(process)],
    newCall: (r, ref) => ({ tool: config.name, input: { ref, amount: r.between(1, 500) } }),
    sends: (ref) => sends.get(ref) ?? 0,
    effects: (ref) => effects.get(ref) ?? 0,
    resultOf: (ref) => results.get(ref),
    sentAfterApplied: (ref) => sentAfter.has(ref),
  };
}
