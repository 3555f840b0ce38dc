/**
 * Which faults a schedule injects, where, and how many: the rates are drawn from the seed per
 * schedule, and a budget keeps every schedule finite (a process killed at every step would never
 * finish anything). Every decision comes from the schedule's generator, in the order the run asks.
 */
import type { Rng } from "./rng.js";
import type { Process, World } from "./world.js";

export interface FaultRates {
  /** Per ledger operation and per fault point: kill the process. */
  readonly crash: number;
  /** Per ledger operation: freeze the process (as by SIGSTOP) for `freezeMs`. */
  readonly freeze: number;
  readonly freezeMs: readonly [min: number, max: number];
  /** Per ledger operation: it fails, nothing written. */
  readonly fail: number;
  /** Per ledger write: it commits, the reply is lost. */
  readonly lostReply: number;
}

export interface FaultCounts {
  crashes: number;
  freezes: number;
  ledgerFailures: number;
  lostReplies: number;
}

export type BeforeOp = "ok" | "crash" | "freeze" | "fail";
export type AfterOp = "ok" | "crash" | "lost_reply";

export class Faults {
  readonly counts: FaultCounts = { crashes: 0, freezes: 0, ledgerFailures: 0, lostReplies: 0 };
  private enabled = true;

  constructor(
    private readonly world: World,
    private readonly rng: Rng,
    readonly rates: FaultRates,
    private readonly budget: { crashes: number; freezes: number; failures: number },
  ) {}

  /** From now on, nothing is injected (the schedule is being settled). */
  stop(): void {
    this.enabled = false;
  }

  /** Whether `process` is exposed to faults (workers are; the agent and the final checks are not). */
  private exposed(process: Process): boolean {
    return this.enabled && process.name.startsWith("worker");
  }

  beforeLedgerOp(process: Process, label: string, writes: boolean): BeforeOp {
    if (!this.exposed(process)) return "ok";
    if (this.budget.crashes > 0 && this.rng.chance(this.rates.crash)) {
      this.budget.crashes--;
      this.counts.crashes++;
      return "crash";
    }
    if (this.budget.freezes > 0 && this.rng.chance(this.rates.freeze)) {
      this.budget.freezes--;
      this.counts.freezes++;
      this.world.freeze(process, this.rng.between(...this.rates.freezeMs), `before ${label}`);
      return "freeze";
    }
    if (this.budget.failures > 0 && this.rng.chance(writes ? this.rates.fail : this.rates.fail / 2)) {
      this.budget.failures--;
      this.counts.ledgerFailures++;
      return "fail";
    }
    return "ok";
  }

  afterLedgerOp(process: Process, _label: string, writes: boolean): AfterOp {
    if (!this.exposed(process)) return "ok";
    if (this.budget.crashes > 0 && this.rng.chance(this.rates.crash)) {
      this.budget.crashes--;
      this.counts.crashes++;
      return "crash";
    }
    if (writes && this.budget.failures > 0 && this.rng.chance(this.rates.lostReply)) {
      this.budget.failures--;
      this.counts.lostReplies++;
      return "lost_reply";
    }
    return "ok";
  }

  /** At one of the gate's named points (after the claim, after the tool returned, after the record). */
  atPoint(process: Process, point: string): "ok" | "crash" {
    if (!this.exposed(process)) return "ok";
    if (this.budget.crashes > 0 && this.rng.chance(this.rates.crash * 2)) {
      this.budget.crashes--;
      this.counts.crashes++;
      this.world.kill(process, `at ${point}`);
      return "crash";
    }
    return "ok";
  }
}
