/**
 * Who holds a claim, and whether that holder is certainly gone.
 *
 * A holder is judged by its lease, on the store's clock. This file adds one shortcut, for a
 * holder on this very machine, that cannot be fooled: an owner id names the host, the process,
 * the machine's boot, the process's PID namespace and the process's start time. Another process
 * judges a holder dead at once only when it shares that boot and that PID namespace (so the pid
 * means the same process to both) and no process with that pid and start time exists. A holder in
 * another PID namespace (a container sharing the hostname, Kubernetes hostNetwork), on another
 * boot or another host, or any owner id it cannot read, is judged by its lease alone: never
 * taken for dead because a pid looks free.
 */
import { randomBytes } from "node:crypto";
import { readFileSync, readlinkSync } from "node:fs";
import { hostname } from "node:os";

/** This process as a fast-path check can recognise it: boot id, PID-namespace inode, start time (clock ticks after boot). */
interface ProcessIdentity {
  readonly boot: string;
  readonly pidns: string;
  readonly start: string;
}

let self: ProcessIdentity | null | undefined;

/** The /proc/<pid>/stat start time (field 22), read after the ")" that ends the command name (which may hold spaces). */
function startTimeOf(pid: number | "self"): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    const start = fields[19];
    return start !== undefined && /^\d+$/.test(start) ? start : undefined;
  } catch {
    return undefined;
  }
}

function identity(): ProcessIdentity | null {
  if (self !== undefined) return self;
  try {
    const boot = readFileSync("/proc/sys/kernel/random/boot_id", "utf8").trim().replace(/-/g, "");
    const pidns = /\[(\d+)\]/.exec(readlinkSync("/proc/self/ns/pid"))?.[1];
    const start = startTimeOf("self");
    self = boot !== "" && pidns !== undefined && start !== undefined ? { boot, pidns, start } : null;
  } catch {
    // Not Linux, or /proc is not mounted: holders are judged by their leases only.
    self = null;
  }
  return self;
}

/** `host/pid/random` and, where this machine lets a process know itself, `/boot/pidns/start`. */
export function newOwnerId(): string {
  const base = `${hostname()}/${process.pid}/${randomBytes(4).toString("hex")}`;
  const me = identity();
  return me ? `${base}/${me.boot.slice(0, 16)}/${me.pidns}/${me.start}` : base;
}

/**
 * True only when the holder certainly is gone: same host, same boot, same PID namespace, and no
 * process with its pid and start time. Anything else (including an owner id of an older format,
 * which carries no boot or namespace) is left to the lease.
 */
export function isHolderDead(owner: string | null): boolean {
  if (owner === null) return true;
  const [host, pidText, , boot, pidns, start] = owner.split("/");
  const me = identity();
  const pid = Number(pidText);
  if (!me || host !== hostname() || boot !== me.boot.slice(0, 16) || pidns !== me.pidns || start === undefined) return false;
  if (!Number.isInteger(pid) || pid <= 0 || pid === process.pid) return false;
  // The pid is free, or another process (started at another time) has it now: the holder is gone.
  return startTimeOf(pid) !== start;
}
