/**
 * Time budgets of the demo, and the per-call timer behind the overhead columns.
 *
 * A call's overhead is the time from handing the tool_use block to the level until its
 * tool_result came back, minus the time during which a request of that call was at a
 * downstream service (the union of those intervals, so a probe running beside a late request
 * is not counted twice). Backoff sleeps, ledger writes, waiting for a twin and probe pauses
 * are overhead; the downstream's own latency is not.
 */
import { performance } from "node:perf_hooks";

/**
 * EFFECTGATE_DEMO_TIME_SCALE (default 1) stretches every time budget below alike. On a machine so
 * loaded that plain requests take longer than CALL_TIMEOUT_MS, spurious timeouts add faults the
 * seed did not plan (the naive levels then show more duplicates); a larger scale avoids that, at
 * the price of a longer run. Workers inherit the variable, so all processes agree.
 */
export const TIME_SCALE = timeScale(process.env.EFFECTGATE_DEMO_TIME_SCALE);
/** A duration of the demo, scaled. */
export const scaled = (ms: number) => Math.round(ms * TIME_SCALE);

/** How long every client waits for a downstream reply. */
export const CALL_TIMEOUT_MS = scaled(400);
/** How long a `slow` downstream request takes before it applies (well past CALL_TIMEOUT_MS). */
export const SLOW_MS = scaled(1200);

function timeScale(text: string | undefined): number {
  const n = Number(text ?? "1");
  return Number.isFinite(n) && n >= 0.1 && n <= 100 ? n : 1;
}

export class CallTimer {
  private readonly spans = new Map<string, [number, number][]>();

  /** Runs `work`, remembering when it ran for this tool_use id. */
  async around<T>(toolUseId: string, work: () => Promise<T>): Promise<T> {
    const start = performance.now();
    try {
      return await work();
    } finally {
      const list = this.spans.get(toolUseId) ?? [];
      list.push([start, performance.now()]);
      this.spans.set(toolUseId, list);
    }
  }

  /** Time spent at downstreams by this id within [from, to], in ms; forgets the id's spans. */
  take(toolUseId: string, from: number, to: number): number {
    const list = (this.spans.get(toolUseId) ?? []).map(([a, b]) => [Math.max(a, from), Math.min(b, to)] as const).filter(([a, b]) => b > a);
    this.spans.delete(toolUseId);
    list.sort((x, y) => x[0] - y[0]);
    let total = 0;
    let end = -Infinity;
    for (const [a, b] of list) {
      if (b <= end) continue;
      total += b - Math.max(a, end);
      end = b;
    }
    return total;
  }
}

/** Nearest-rank percentile of `values` (p in 0..100); null when empty. */
export function percentile(values: readonly number[], p: number): number | null {
  if (values.length === 0) return null;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.max(1, Math.ceil((p / 100) * sorted.length));
  return sorted[Math.min(rank, sorted.length) - 1] ?? null;
}
