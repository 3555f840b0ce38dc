/**
 * The simulated world a schedule runs in: one simulated clock, the processes (workers) on it,
 * and the scheduler that decides, with the schedule's seeded generator, which process moves
 * next. Nothing in a schedule waits on real time or real I/O ordering: a process's ledger
 * operations and its timers are the only places it can be overtaken, crashed or frozen, and the
 * scheduler lets one move at a time (ledger.ts), so a seed always replays the same run.
 */
import type { TimeSource, TimerHandle } from "../../core/time.js";
import type { Rng } from "./rng.js";

/** A simulated process: a worker with its own gate, or the agent, or a downstream system. */
export interface Process {
  readonly name: string;
  /** running; frozen (as by SIGSTOP) until `thawAt`; dead (as by SIGKILL). */
  state: "running" | "frozen" | "dead";
  thawAt: number;
}

interface Timer {
  due: number;
  readonly seq: number;
  readonly fn: () => void;
  readonly process: Process | undefined;
  cancelled: boolean;
  readonly every?: number;
}

interface Pending {
  readonly process: Process;
  readonly label: string;
  readonly go: () => void;
}

/** Simulated epoch of every schedule: 2026-12-01T00:00:00Z. */
export const SIM_EPOCH = Date.UTC(2026, 11, 1);

export class World {
  /** Simulated milliseconds since the schedule began. */
  now = 0;
  readonly trace: string[] = [];
  private readonly timers: Timer[] = [];
  private readonly pending: Pending[] = [];
  private seq = 0;
  private steps = 0;

  constructor(readonly rng: Rng, private readonly tracing: boolean, readonly maxSteps = 200_000) {}

  log(line: string): void {
    if (this.tracing) this.trace.push(`${String(this.now).padStart(7)} ms  ${line}`);
  }

  process(name: string): Process {
    return { name, state: "running", thawAt: 0 };
  }

  /** The clock a process sees: its timers never fire while it is frozen, and never once it is dead. */
  timeFor(process?: Process): TimeSource {
    return {
      monotonic: () => this.now,
      wall: () => SIM_EPOCH + this.now,
      timeout: (ms, fn) => this.addTimer(ms, fn, process),
      interval: (ms, fn) => this.addTimer(ms, fn, process, Math.max(1, ms)),
    };
  }

  /** The store's clock (epoch ms). */
  readonly wall = (): number => SIM_EPOCH + this.now;

  addTimer(ms: number, fn: () => void, process?: Process, every?: number): TimerHandle {
    const timer: Timer = { due: this.now + Math.max(0, ms), seq: this.seq++, fn, process, cancelled: false, ...(every === undefined ? {} : { every }) };
    this.timers.push(timer);
    return { cancel: () => void (timer.cancelled = true) };
  }

  /** Resolves at simulated time `at` (or at once if it passed). */
  until(at: number): Promise<void> {
    return new Promise((resolve) => void this.addTimer(at - this.now, resolve));
  }

  /**
   * A process asks to take one step (a ledger operation): it waits until the scheduler picks it.
   * A dead process never gets to; a frozen one only after it thaws.
   */
  permit(process: Process, label: string): Promise<void> {
    return new Promise((go) => void this.pending.push({ process, label, go }));
  }

  /** Resolves once `process` runs again (at once if it runs); never if it is dead. */
  running(process: Process): Promise<void> {
    if (process.state === "running") return Promise.resolve();
    if (process.state === "dead") return new Promise(() => undefined);
    return this.until(process.thawAt).then(() => this.running(process));
  }

  private readonly deaths = new Map<Process, { promise: Promise<void>; resolve: () => void }>();

  /** Resolves when `process` is killed. */
  died(process: Process): Promise<void> {
    let death = this.deaths.get(process);
    if (!death) {
      let resolve!: () => void;
      const promise = new Promise<void>((r) => (resolve = r));
      this.deaths.set(process, (death = { promise, resolve }));
      if (process.state === "dead") resolve();
    }
    return death.promise;
  }

  kill(process: Process, why: string): void {
    if (process.state === "dead") return;
    process.state = "dead";
    this.log(`✝ ${process.name} killed ${why}`);
    this.deaths.get(process)?.resolve();
  }

  freeze(process: Process, ms: number, why: string): void {
    if (process.state !== "running") return;
    process.state = "frozen";
    process.thawAt = this.now + ms;
    this.log(`❄ ${process.name} frozen for ${ms} ms ${why}`);
    this.addTimer(ms, () => {
      if (process.state !== "frozen") return;
      process.state = "running";
      this.log(`☀ ${process.name} thawed`);
    });
  }

  private readonly recent: string[] = [];

  private note(move: string): void {
    if (!this.tracing) return;
    this.recent.push(move);
    if (this.recent.length > 30) this.recent.shift();
  }

  /** Real work in flight (a PostgreSQL statement): nothing else moves until it is done. */
  private readonly busy = new Set<Promise<unknown>>();

  track<T>(work: Promise<T>): Promise<T> {
    const settled = work.then(() => undefined, () => undefined);
    this.busy.add(settled);
    void settled.then(() => this.busy.delete(settled));
    return work;
  }

  /** Resolves with the promise's outcome, or never if `process` dies first (a dead process answers nothing). */
  answerOf<T>(process: Process, work: Promise<T>): Promise<T> {
    return work.then(
      (value) => (process.state === "dead" ? new Promise<T>(() => undefined) : value),
      (err: unknown) => {
        if (process.state === "dead") return new Promise<T>(() => undefined);
        throw err;
      },
    );
  }

  /**
   * Runs the world until `main` has settled: each turn lets every microtask (and real work in
   * flight) finish, then moves one pending step (chosen by the seed among the running processes'),
   * or else the next timer. "stuck" when nothing can move although `main` is not done (a
   * deadlock), "livelock" when the step budget ran out.
   */
  async run(main: Promise<unknown>): Promise<"done" | "stuck" | "livelock"> {
    let finished = false;
    void main.then(() => (finished = true), () => (finished = true));
    for (;;) {
      await this.settle();
      if (finished) return "done";
      if (++this.steps > this.maxSteps) {
        this.log(`livelock: last moves ${this.recent.join(" | ")}`);
        return "livelock";
      }
      for (let i = this.pending.length - 1; i >= 0; i--) if (this.pending[i]!.process.state === "dead") this.pending.splice(i, 1);
      const ready = this.pending.filter((p) => p.process.state === "running");
      if (ready.length > 0) {
        const chosen = ready[this.rng.int(ready.length)]!;
        this.pending.splice(this.pending.indexOf(chosen), 1);
        this.note(`${chosen.process.name}:${chosen.label}`);
        chosen.go();
        continue;
      }
      const timer = this.nextTimer();
      if (!timer) return "stuck";
      this.now = Math.max(this.now, timer.due);
      const owner = timer.process;
      if (timer.every === undefined) timer.cancelled = true;
      else timer.due = this.now + timer.every;
      this.note(`timer@${this.now}(${owner?.name ?? "world"}${timer.every === undefined ? "" : ` every ${timer.every}`})`);
      timer.fn();
    }
  }

  /** Lets every queued microtask (and what it queues) run, and waits out real work in flight. */
  private async settle(): Promise<void> {
    for (;;) {
      await new Promise((resolve) => setImmediate(resolve));
      if (this.busy.size === 0) return;
      await Promise.all([...this.busy]);
    }
  }

  private nextTimer(): Timer | undefined {
    let best: Timer | undefined;
    for (let i = this.timers.length - 1; i >= 0; i--) {
      const t = this.timers[i]!;
      if (t.cancelled || t.process?.state === "dead") {
        this.timers.splice(i, 1);
        continue;
      }
      // A frozen process's timers wait for it to thaw (a world timer), then fire in their order.
      if (t.process?.state === "frozen") continue;
      if (!best || t.due < best.due || (t.due === best.due && t.seq < best.seq)) best = t;
    }
    return best;
  }
}
