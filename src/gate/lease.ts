/**
 * Keeps this gate's lease on a held call alive while it runs or probes, and tells when it is gone.
 *
 * The lease is renewed every leaseMs/3. It counts as held, on this process's monotonic clock, for
 * leaseMs after the last renewal that was *sent* and confirmed (the claim or take-over being the
 * first): an earlier start than the store's, so this worker gives the call up before any other
 * worker may take it. When a renewal is refused (another worker took the call over) or the lease
 * runs out without a confirmed renewal (the store unreachable, this process frozen by SIGSTOP, a
 * GC or VM pause), the tool's `ctx.signal` is aborted with a LeaseLost, and the gate starts no new
 * run of the tool. What the tool already sent is the downstream's to fence (ctx.fence).
 */
import { LeaseLost } from "../core/outcome.js";
import type { CallRecord } from "../contracts/calls.js";
import type { Runtime } from "./runtime.js";

export interface LeaseKeeper {
  /**
   * Follow the record after each compare-and-set write (the renewal names its version);
   * `sentAt` (rt.time.monotonic() before the write was sent) when the write also set a new lease.
   */
  track(record: CallRecord, sentAt?: number): void;
  /** Whether this gate still holds the call (checked before each run of the tool). */
  held(): boolean;
  /** Aborted when the lease is lost; what each run of the tool gets as `ctx.signal` (joined with its own). */
  readonly lost: AbortSignal;
  stop(): void;
}

/** `confirmedAt`: rt.time.monotonic() taken just before the claim or take-over that made this gate the holder was sent. */
export function keepLease(rt: Runtime, held: CallRecord, confirmedAt: number): LeaseKeeper {
  let current = held;
  let validUntil = confirmedAt + rt.leaseMs;
  const controller = new AbortController();
  const lose = (why: string) => {
    if (!controller.signal.aborted) controller.abort(new LeaseLost(why));
  };
  const check = () => {
    if (rt.time.monotonic() >= validUntil) lose(`the lease on ${current.tool} call ${current.key} ran out before it could be renewed`);
    return !controller.signal.aborted;
  };
  let renewing = false;
  const timer = rt.time.interval(Math.max(10, Math.floor(rt.leaseMs / 3)), () => {
    if (!check() || renewing) return;
    renewing = true;
    const sentAt = rt.time.monotonic();
    const sent = current;
    rt.calls.renewLease(sent.tenant, sent.key, sent.version, rt.owner, rt.leaseMs).then(
      async (ours) => {
        if (ours) validUntil = Math.max(validUntil, sentAt + rt.leaseMs);
        else if (await takenFrom(sent)) lose(`another worker took ${sent.tool} call ${sent.key} over (its lease could not be renewed)`);
        renewing = false;
      },
      () => {
        // The store did not answer: the lease runs out at validUntil unless a later renewal lands.
        renewing = false;
        check();
      },
    );
  });
  /**
   * A refused renewal means the record moved past the version it named: another worker took the
   * call (a new fence, another owner), or this gate's own write got there first (same fence, still
   * ours or released by us), which is no loss. Unreadable: not known to be lost; the lease runs out
   * at validUntil unless a later renewal lands.
   */
  const takenFrom = async (sent: CallRecord): Promise<boolean> => {
    const now = await rt.calls.get(sent.tenant, sent.key).catch(() => "unreadable" as const);
    if (now === "unreadable") return false;
    return now === undefined || now.fence !== sent.fence || (now.owner !== null && now.owner !== rt.owner);
  };
  return {
    track(record, sentAt) {
      current = record;
      // A write that set a new lease for this gate, sent at `sentAt`, renewed it as well.
      if (sentAt !== undefined && record.owner === rt.owner) validUntil = Math.max(validUntil, sentAt + rt.leaseMs);
    },
    held: check,
    lost: controller.signal,
    stop() {
      timer.cancel();
    },
  };
}
