/** Seeded randomness for simulations: the same seed gives the same faults, whatever the timing. */
import { createHash } from "node:crypto";

/** mulberry32: a small, fast PRNG good enough for fault injection. */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** A uniform number in [0, 1) fixed by its parts: the fault for "the 2nd request for key K" never depends on arrival order. */
export function uniformFor(...parts: readonly (string | number)[]): number {
  const digest = createHash("sha256").update(parts.join("\u0000")).digest();
  return digest.readUInt32BE(0) / 4294967296;
}
