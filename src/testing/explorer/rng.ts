/**
 * A seeded pseudo-random generator (sfc32, seeded through splitmix32): every choice a schedule
 * makes comes from one of these, in the order the run asks for them, so a seed replays exactly.
 */
export interface Rng {
  /** A float in [0, 1). */
  next(): number;
  /** An integer in [0, n). */
  int(n: number): number;
  /** An integer in [min, max]. */
  between(min: number, max: number): number;
  /** True with probability p. */
  chance(p: number): boolean;
  /** One element of a non-empty list. */
  pick<T>(items: readonly T[]): T;
  /** An independent generator for a sub-task (its own stream, derived from this one). */
  fork(): Rng;
}

function splitmix32(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x9e3779b9) >>> 0;
    let z = state;
    z = Math.imul(z ^ (z >>> 16), 0x85ebca6b) >>> 0;
    z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35) >>> 0;
    return (z ^ (z >>> 16)) >>> 0;
  };
}

export function seededRng(seed: number): Rng {
  const mix = splitmix32(seed);
  let a = mix(), b = mix(), c = mix(), d = mix();
  const u32 = (): number => {
    const t = (((a + b) >>> 0) + d) >>> 0;
    d = (d + 1) >>> 0;
    a = b ^ (b >>> 9);
    b = (c + (c << 3)) >>> 0;
    c = ((c << 21) | (c >>> 11)) >>> 0;
    c = (c + t) >>> 0;
    return t;
  };
  for (let i = 0; i < 12; i++) u32();
  const rng: Rng = {
    next: () => u32() / 4294967296,
    int: (n) => Math.floor(rng.next() * n),
    between: (min, max) => min + rng.int(max - min + 1),
    chance: (p) => p > 0 && rng.next() < p,
    pick: (items) => items[rng.int(items.length)] as (typeof items)[number],
    fork: () => seededRng(u32()),
  };
  return rng;
}
