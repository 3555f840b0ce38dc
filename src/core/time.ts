/**
 * Time as the gate sees it: a monotonic clock for leases, timeouts and settle horizons, the wall
 * clock, and timers. Real time by default; the fault explorer (effectgate/testing) passes a
 * simulated one so that a schedule of crashes, stalls and late replies replays exactly from its
 * seed. Every wait of the gate goes through one of these, never through setTimeout directly.
 */
import { performance } from "node:perf_hooks";

/** A running timer or interval; `cancel` is idempotent. */
export interface TimerHandle {
  cancel(): void;
}

export interface TimeSource {
  /** Monotonic milliseconds (performance.now() in real time): leases, timeouts, horizons. */
  monotonic(): number;
  /** Epoch milliseconds (Date.now() in real time). */
  wall(): number;
  /** Calls `fn` once after `ms`. A real timer is unref'd when `background` (it never keeps the process alive). */
  timeout(ms: number, fn: () => void, options?: { readonly background?: boolean }): TimerHandle;
  /** Calls `fn` every `ms` until cancelled; always background. */
  interval(ms: number, fn: () => void): TimerHandle;
}

export const realTime: TimeSource = {
  monotonic: () => performance.now(),
  wall: () => Date.now(),
  timeout(ms, fn, options) {
    const timer = setTimeout(fn, ms);
    if (options?.background === true) timer.unref();
    return { cancel: () => clearTimeout(timer) };
  },
  interval(ms, fn) {
    const timer = setInterval(fn, ms);
    timer.unref();
    return { cancel: () => clearInterval(timer) };
  },
};

/** Resolves after `ms` on `time`. */
export function sleepOn(time: TimeSource, ms: number, options?: { readonly background?: boolean }): Promise<void> {
  return new Promise<void>((resolve) => void time.timeout(ms, resolve, options));
}

/** Resolves after `ms` on `time`, or as soon as `early` settles (either way); the timer is cancelled then. */
export async function sleepUnless(time: TimeSource, ms: number, early: Promise<unknown> | undefined, options?: { readonly background?: boolean }): Promise<void> {
  let handle: TimerHandle | undefined;
  const slept = new Promise<void>((resolve) => (handle = time.timeout(ms, resolve, options)));
  try {
    await (early ? Promise.race([slept, early.then(() => undefined, () => undefined)]) : slept);
  } finally {
    handle?.cancel();
  }
}
