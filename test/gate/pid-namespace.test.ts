/**
 * Defect 2 of the correctness issue: a live holder was judged dead across PID namespaces.
 * Liveness was hostname() + process.kill(pid, 0); two containers with one hostname (host
 * networking, Kubernetes hostNetwork) see each other's pids as free, so worker B took over worker
 * A's running call at once: two runs. Now a holder is judged by its lease on the store's clock; the
 * same-machine shortcut applies only within one boot and one PID namespace, checking the pid's
 * start time. Worker B here really runs in a PID namespace of its own (unshare --pid --fork).
 */
import { spawn, spawnSync } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { hostname } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { isHolderDead, newOwnerId } from "../../src/gate/owner.js";
import { requireBuild } from "../support/processes.js";
import { tempDir } from "../support/tmp.js";

const WORKER = fileURLToPath(new URL("./fixtures/pidns-worker.mjs", import.meta.url));
const unshareWorks = spawnSync("unshare", ["--pid", "--fork", "--mount-proc", "true"]).status === 0;

describe("who is dead: the same-machine shortcut cannot be fooled", () => {
  it("an owner id names the host, pid, boot, PID namespace and start time", () => {
    const [host, pid, random, boot, pidns, start] = newOwnerId().split("/");
    expect([host, pid]).toEqual([hostname(), String(process.pid)]);
    expect(random).toMatch(/^[0-9a-f]{8}$/);
    expect(boot).toMatch(/^[0-9a-f]{16}$/);
    expect(pidns).toMatch(/^\d+$/);
    expect(start).toMatch(/^\d+$/);
  });

  it("dead only for a gone process of this boot and PID namespace; a namespace, boot or host of its own is left to the lease", () => {
    const [host, , , boot, pidns] = newOwnerId().split("/");
    const child = spawnSync(process.execPath, ["-e", "process.stdout.write(String(process.pid))"], { encoding: "utf8" });
    const gonePid = Number(child.stdout);
    expect(isHolderDead(`${host}/${gonePid}/abcd1234/${boot}/${pidns}/123`)).toBe(true);
    // The same pid in another PID namespace, on another boot, another host, or an owner id that carries no identity.
    expect(isHolderDead(`${host}/${gonePid}/abcd1234/${boot}/4026531999/123`)).toBe(false);
    expect(isHolderDead(`${host}/${gonePid}/abcd1234/0123456789abcdef/${pidns}/123`)).toBe(false);
    expect(isHolderDead(`other-host/${gonePid}/abcd1234/${boot}/${pidns}/123`)).toBe(false);
    expect(isHolderDead(`${host}/${gonePid}/abcd1234`)).toBe(false);
    // A live process whose pid was given to another program since (another start time) is not the holder: dead.
    const mine = readFileSync("/proc/self/stat", "utf8");
    const myStart = mine.slice(mine.lastIndexOf(")") + 2).split(" ")[19]!;
    expect(isHolderDead(`${host}/1/abcd1234/${boot}/${pidns}/${Number(myStart) + 1}`)).toBe(true);
    expect(isHolderDead(`${host}/${process.pid}/abcd1234/${boot}/${pidns}/${myStart}`)).toBe(false);
  });
});

describe.skipIf(!unshareWorks)("a worker in a PID namespace of its own (unshare --pid --fork)", () => {
  it("does not take over the call a live worker on this machine holds: it waits, the tool runs once", async () => {
    requireBuild();
    const dir = tempDir("effectgate-pidns-");
    const job = { ledger: join(dir, "ledger.db"), effects: join(dir, "effects.log") };
    writeFileSync(job.effects, "");
    const holder = spawn(process.execPath, [WORKER, JSON.stringify({ ...job, mode: "hold" })], { stdio: ["pipe", "pipe", "pipe"] });
    let held = "";
    holder.stdout.setEncoding("utf8").on("data", (chunk: string) => (held += chunk));
    const holderExit = new Promise<number | null>((resolve) => holder.on("exit", resolve));
    for (let i = 0; i < 500 && !held.includes("holding"); i++) await new Promise((r) => setTimeout(r, 10));
    expect(held).toContain("holding");
    const replay = spawnSync("unshare", ["--pid", "--fork", "--mount-proc", process.execPath, WORKER, JSON.stringify({ ...job, mode: "replay" })], {
      encoding: "utf8", timeout: 20_000,
    });
    expect(replay.stderr).toBe("");
    const lines = replay.stdout.trim().split("\n").map((l) => JSON.parse(l) as { owner?: string; result?: { content: string } });
    // Its owner id shows another PID namespace than the holder's.
    const holderOwner = (JSON.parse(held.split("\n")[0]!) as { owner: string }).owner.split("/");
    const replayOwner = lines[0]!.owner!.split("/");
    expect(replayOwner[4]).not.toBe(holderOwner[4]);
    expect(lines.at(-1)!.result!.content).toMatch(/^EG_IN_PROGRESS: this book call is held by another worker/);
    holder.stdin.end("done\n");
    expect(await holderExit).toBe(0);
    expect(readFileSync(job.effects, "utf8").trim().split("\n")).toHaveLength(1);
  });
});
