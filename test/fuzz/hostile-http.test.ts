/**
 * A fixed sample of the hostile-request fuzzer (bench/fuzz-http.ts, `npm run bench:fuzz-http`
 * runs the full count): a few hundred seeded requests per surface, each surface in its own
 * process on a real SQLite ledger (the BUILT package), over raw sockets. Every check of the
 * fuzzer must hold: the process stays up and answers a good request after each batch, no 5xx for
 * a client's error, nothing but the public pages answers 2xx without the token (or, for receipts,
 * without a signature over the bytes sent), RSS within the bound, at most one effect per key, the
 * ledger passes `PRAGMA quick_check`, nothing logged at error level for a client's mistake.
 *
 * KNOWN lists findings that are reported (bench/fuzz/FINDINGS.md) and not fixed yet, each with
 * its reproducer: they are expected, so the sample stays green and honest; any other finding
 * fails it. Remove an entry once its fix lands.
 */
import { afterAll, describe, expect, it } from "vitest";
import { removeHeapProbeDirs } from "../../bench/fuzz/heap.js";
import { fuzzHttpSurface, type Finding } from "../../bench/fuzz/run-http.js";
import { fuzzStdio } from "../../bench/fuzz/run-stdio.js";
import type { HttpSurfaceName } from "../../bench/fuzz/surfaces.js";
import { requireBuild } from "../support/processes.js";

requireBuild();

const SEED = 24;
const REQUESTS = 300;
// Real processes on a shared 2-core machine: a slow start is load, not a failure (no assertion is on time).
const TIMEOUT_MS = 180_000;

interface Known {
  readonly surface: string;
  readonly kind: Finding["kind"];
  readonly detail: RegExp;
  /** FINDINGS.md entry and a one-line reproducer. */
  readonly why: string;
}

// None: F1–F4 are fixed (bench/fuzz/FINDINGS.md).
const KNOWN: readonly Known[] = [];

function unexpected(findings: readonly Finding[]): Finding[] {
  return findings.filter((f) => !KNOWN.some((k) => k.surface === f.surface && k.kind === f.kind && k.detail.test(f.detail)));
}

const HTTP: readonly HttpSurfaceName[] = ["middleware-node", "middleware-hono", "console", "receipts", "mcp-http"];

describe("the hostile-request fuzzer's fixed sample (seed 24)", { timeout: TIMEOUT_MS }, () => {
  afterAll(removeHeapProbeDirs);
  for (const surface of HTTP) {
    it(`${surface}: ${REQUESTS} hostile requests, no finding`, async () => {
      const report = await fuzzHttpSurface(surface, { seed: SEED, requests: REQUESTS, concurrency: 8, batch: 100 });
      expect(report.requests).toBeGreaterThanOrEqual(REQUESTS);
      expect(report.quickCheck.split(", ").every((c) => c === "ok")).toBe(true);
      if (surface.startsWith("middleware")) {
        expect(report.effects?.handled).toBeGreaterThan(0);
        expect(report.effects?.max).toBe(1);
      }
      expect(unexpected(report.findings)).toEqual([]);
    });
  }

  it(`mcp-stdio: ${REQUESTS} hostile lines, no finding`, async () => {
    const report = await fuzzStdio({ seed: SEED, requests: REQUESTS, batch: 100 });
    expect(report.quickCheck.split(", ").every((c) => c === "ok")).toBe(true);
    expect(report.statuses["probe answered"]).toBeGreaterThan(0);
    expect(unexpected(report.findings)).toEqual([]);
  });
});
