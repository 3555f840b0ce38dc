/** Sample summaries for the benchmark. All figures are in microseconds unless a name says otherwise. */

export interface Summary {
  /** Number of samples. */
  readonly n: number;
  readonly median: number;
  readonly p99: number;
  readonly mean: number;
  readonly min: number;
  readonly max: number;
}

/** Nearest-rank percentile of an ascending-sorted array (p in 0..1). */
function percentile(sorted: Float64Array, p: number): number {
  if (sorted.length === 0) return Number.NaN;
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil(p * sorted.length) - 1));
  return sorted[rank] ?? Number.NaN;
}

export function summarize(samples: Float64Array): Summary {
  const sorted = Float64Array.from(samples).sort();
  let sum = 0;
  for (const v of sorted) sum += v;
  return {
    n: sorted.length,
    median: percentile(sorted, 0.5),
    p99: percentile(sorted, 0.99),
    mean: sorted.length === 0 ? Number.NaN : sum / sorted.length,
    min: sorted[0] ?? Number.NaN,
    max: sorted[sorted.length - 1] ?? Number.NaN,
  };
}

/** Microseconds elapsed since `start` (a process.hrtime.bigint() reading). */
export function usSince(start: bigint): number {
  return Number(process.hrtime.bigint() - start) / 1000;
}

/** Times `n` sequential runs of an async function, one sample per run (µs). */
export async function timeAsync(n: number, fn: (i: number) => Promise<unknown>): Promise<Float64Array> {
  const out = new Float64Array(n);
  for (let i = 0; i < n; i++) {
    const start = process.hrtime.bigint();
    await fn(i);
    out[i] = usSince(start);
  }
  return out;
}

/** Times `n` sequential runs of a synchronous function, one sample per run (µs). */
export function timeSync(n: number, fn: (i: number) => unknown): Float64Array {
  const out = new Float64Array(n);
  for (let i = 0; i < n; i++) {
    const start = process.hrtime.bigint();
    fn(i);
    out[i] = usSince(start);
  }
  return out;
}

/** Formats a µs figure for the table: µs below 10 ms, ms above. */
export function fmtUs(us: number): string {
  if (!Number.isFinite(us)) return "—";
  if (Math.abs(us) >= 10_000) return `${(us / 1000).toFixed(1)} ms`;
  if (Math.abs(us) >= 100) return `${us.toFixed(0)} µs`;
  return `${us.toFixed(1)} µs`;
}

/** A plain fixed-width table (first column left-aligned, the rest right-aligned). */
export function table(header: readonly string[], rows: readonly (readonly string[])[]): string {
  const widths = header.map((h, c) => Math.max(h.length, ...rows.map((r) => (r[c] ?? "").length)));
  const line = (cells: readonly string[]) =>
    cells.map((cell, c) => (c === 0 ? cell.padEnd(widths[c] ?? 0) : cell.padStart(widths[c] ?? 0))).join("  ");
  return [line(header), widths.map((w) => "-".repeat(w)).join("  "), ...rows.map(line)].join("\n");
}

/** Collects garbage between phases when node runs with --expose-gc (npm run bench does). */
export function collectGarbage(): void {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (gc) gc();
}
