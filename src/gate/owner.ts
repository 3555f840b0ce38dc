/**
 * Who holds a claim. An owner id names the host and process, so a restarted worker on the
 * same machine can tell at once that a claim's holder is dead instead of waiting out its lease.
 */
import { randomBytes } from "node:crypto";
import { hostname } from "node:os";

export function newOwnerId(): string {
  return `${hostname()}/${process.pid}/${randomBytes(4).toString("hex")}`;
}

/** True only when the holder certainly is gone: same host, another pid, and no such process. */
export function isHolderDead(owner: string | null): boolean {
  if (owner === null) return true;
  const [host, pidText] = owner.split("/");
  const pid = Number(pidText);
  if (host !== hostname() || !Number.isInteger(pid) || pid <= 0 || pid === process.pid) return false;
  try {
    process.kill(pid, 0);
    return false;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "ESRCH";
  }
}
