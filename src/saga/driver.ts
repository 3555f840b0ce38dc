/**
 * Is a saga's driver alive? Owner ids are `host/pid/random` (src/gate/owner.ts): on this host
 * the process table answers; on another host only the lease can.
 */
import { hostname } from "node:os";

/** true: alive; false: certainly dead; undefined: another host (judge by the lease). */
export function holderAlive(owner: string): boolean | undefined {
  const [host, pidText] = owner.split("/");
  const pid = Number(pidText);
  if (host !== hostname() || !Number.isInteger(pid) || pid <= 0) return undefined;
  if (pid === process.pid) return true;
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code !== "ESRCH";
  }
}
