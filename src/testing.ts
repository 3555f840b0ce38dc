/**
 * effectgate/testing: fault injection for your own crash tests, and the store contract suites.
 *
 *   createGate({ tools, faults: killAt("after_execute") })
 *
 * kills the process with a real SIGKILL right after the tool's side effect and before its
 * outcome is recorded: run it in a child process, then recover in a fresh one and check
 * that your downstream saw the effect exactly once. The same `killAt` strikes a saga's points
 * (`createGate({ sagaFaults: killAt("saga_before_compensation") })`).
 *
 *   contractSuite({ vitest, name: "my-store", open: () => myLedger() })
 *
 * runs the store contract suites (calls and checkpoints; sagas, governance and reconcile when the
 * bundle has them) against your own store, in your vitest; see docs/testing.md. This entry never
 * loads vitest itself: you pass in `import * as vitest from "vitest"`.
 *
 *   const report = await explore({ schedules: 10_000, ledger: "sqlite" })
 *
 * runs the fault explorer: seeded schedules of agents, twins, crashes, stalls, ledger faults and
 * misbehaving downstreams on simulated time, each checked against invariants I1–I6; a violation
 * names its seed, and `explore({ seed, schedules: 1, trace: true })` replays it exactly.
 * `exploreKills` does the same with real child processes killed by SIGKILL. See docs/testing.md.
 */
import type { FaultContext, FaultPoint } from "./gate/faults.js";
import type { SagaFaultPoint } from "./saga/faults.js";

export type { FaultContext, FaultHook, FaultPoint } from "./gate/faults.js";
export type { SagaFaultHook, SagaFaultPoint } from "./saga/faults.js";
export { contractSuite, type ContractSkip, type ContractSuiteOptions, type OptionalStore, type TestApi } from "./testing/contract-suite.js";

export const FAULT_POINTS: readonly FaultPoint[] = ["after_claim", "after_execute", "after_record"];

/** Points in a saga's life (steps and compensations) where `killAt` can strike; see docs/sagas.md. */
export const SAGA_FAULT_POINTS: readonly SagaFaultPoint[] = ["saga_before_step", "saga_after_step", "saga_before_compensation", "saga_after_compensation"];

/**
 * A fault hook that SIGKILLs this process the first time `point` is reached (optionally only for
 * one tool). Give it as `faults` for a call's points, as `sagaFaults` for a saga's.
 */
export function killAt<P extends FaultPoint | SagaFaultPoint>(point: P, options: { tool?: string } = {}): (reached: string, call: FaultContext) => void {
  return (reached, call) => {
    if (reached === point && (options.tool === undefined || options.tool === call.tool)) {
      process.kill(process.pid, "SIGKILL");
    }
  };
}

export { explore, type ExploreOptions, type ExploreReport, type ExplorerLedger } from "./testing/explorer/explore.js";
export { exploreKills, type KillOptions, type KillReport, type KillRun } from "./testing/explorer/kills.js";
export { INVARIANTS, type Invariant, type Violation } from "./testing/explorer/invariants.js";
export { simulatedDownstream, type DownstreamConfig, type ScriptedRequest, type SimulatedSystem } from "./testing/explorer/downstream.js";
export { drawDownstream, drawWorkload, type Workload } from "./testing/explorer/workload.js";
export type { ScheduleLedger, ScheduleResult } from "./testing/explorer/schedule.js";
export type { FaultCounts, FaultRates } from "./testing/explorer/faults.js";
export { World, SIM_EPOCH, type Process } from "./testing/explorer/world.js";
export { seededRng, type Rng } from "./testing/explorer/rng.js";
export { DEFAULT_PROXY_RATES, seededProxyPlan, startPgProxy, type PgProxy, type PgProxyOptions, type ProxiedRequest, type ProxyCounts, type ProxyFault, type ProxyFaultRates, type ProxyPlan } from "./testing/explorer/pg-proxy.js";
