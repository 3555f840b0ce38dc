/** Keeps this gate's lease on a held call alive while it runs or probes, so no other worker takes a live call over. */
import type { CallRecord } from "../contracts/calls.js";
import type { Runtime } from "./runtime.js";

export interface LeaseKeeper {
  /** Follow the record after each compare-and-set write (the renewal names its version). */
  track(record: CallRecord): void;
  stop(): void;
}

export function keepLease(rt: Runtime, held: CallRecord): LeaseKeeper {
  let current = held;
  const timer = setInterval(() => {
    rt.calls.renewLease(current.tenant, current.key, current.version, rt.owner, rt.leaseMs).catch(() => {
      // A failed renewal only shortens the lease; the next outcome write reports real trouble.
    });
  }, Math.max(10, Math.floor(rt.leaseMs / 3)));
  timer.unref();
  return {
    track(record) {
      current = record;
    },
    stop() {
      clearInterval(timer);
    },
  };
}
