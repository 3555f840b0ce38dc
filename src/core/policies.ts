/**
 * Timeouts, retries and probe budgets, per effect class with per-tool overrides.
 * read: backoff with full jitter. write: retried only where a second send is known to be
 * harmless (the downstream honours the key, or the request was never sent).
 * destructive: never retried automatically.
 */
import type { EffectClass } from "./effect-class.js";

export interface RetryPolicy {
  /** Total tries including the first (1 = no retry). */
  readonly attempts: number;
  readonly initialDelayMs: number;
  readonly maxDelayMs: number;
}

export interface ProbePolicy {
  /** How many times to ask the probe before sending the call to a human. */
  readonly attempts: number;
  readonly initialDelayMs: number;
  readonly maxDelayMs: number;
}

export const DEFAULT_TIMEOUT_MS = 30_000;

export const DEFAULT_RETRY: Readonly<Record<EffectClass, RetryPolicy>> = {
  read: { attempts: 3, initialDelayMs: 100, maxDelayMs: 2_000 },
  write: { attempts: 3, initialDelayMs: 200, maxDelayMs: 5_000 },
  destructive: { attempts: 1, initialDelayMs: 0, maxDelayMs: 0 },
};

export const DEFAULT_PROBE: ProbePolicy = { attempts: 6, initialDelayMs: 200, maxDelayMs: 5_000 };

/** "Full jitter" exponential backoff: a uniform delay in [0, min(max, initial·2^n)). */
export function backoffMs(policy: { initialDelayMs: number; maxDelayMs: number }, retry: number, random: () => number): number {
  const cap = Math.min(policy.maxDelayMs, policy.initialDelayMs * 2 ** retry);
  return Math.floor(random() * cap);
}

/** Exponential backoff without jitter, for probes (they ask one downstream about one key). */
export function probeDelayMs(policy: ProbePolicy, round: number): number {
  return Math.min(policy.maxDelayMs, policy.initialDelayMs * 2 ** round);
}

/**
 * How many times one call's tool may be started, all retries and re-runs after "absent" together,
 * before it goes to a person: a downstream that never answers in time (its latency always past the
 * timeout) must not keep a call uncertain forever.
 */
export const MAX_TOOL_STARTS = 10;

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
