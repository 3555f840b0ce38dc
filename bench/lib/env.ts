/** The environment the benchmark ran in: printed at the top and stored with the results. */
import { execFileSync } from "node:child_process";
import { readFileSync, statSync } from "node:fs";
import os from "node:os";

export interface FsInfo {
  readonly path: string;
  /** st_dev of the path: two paths with the same device are on the same filesystem. */
  readonly device: number;
  /** `df -PT` for the path: device, type, mount point. */
  readonly source: string;
  readonly type: string;
  readonly mountPoint: string;
  /** Mount options from /proc/mounts, when readable. */
  readonly mountOptions: string;
}

export interface EnvInfo {
  readonly date: string;
  readonly node: string;
  readonly v8: string;
  readonly platform: string;
  readonly kernel: string;
  readonly cpuModel: string;
  readonly cpus: number;
  readonly memoryGiB: number;
  readonly loadAverageAtStart: readonly number[];
  readonly gcExposed: boolean;
  readonly benchDir: FsInfo;
  readonly projectDir: FsInfo;
  readonly sameFilesystemAsProject: boolean;
  readonly betterSqlite3: string;
  readonly sqlite: string;
  /** The commit the measured code sits on, and the src/ files that differ from it (uncommitted work). */
  readonly gitCommit: string;
  readonly srcChanges: readonly string[];
}

export function fsInfo(path: string): FsInfo {
  const device = statSync(path).dev;
  let source = "?";
  let type = "?";
  let mountPoint = "?";
  try {
    // df -P -T: "Filesystem Type 1024-blocks Used Available Capacity Mounted-on"
    const lines = execFileSync("df", ["-P", "-T", path], { encoding: "utf8" }).trim().split("\n");
    const cols = (lines[lines.length - 1] ?? "").split(/\s+/);
    source = cols[0] ?? "?";
    type = cols[1] ?? "?";
    mountPoint = cols.slice(6).join(" ") || "?";
  } catch {
    // df missing: device number still tells whether the two paths share a filesystem.
  }
  let mountOptions = "?";
  try {
    const mounts = readFileSync("/proc/mounts", "utf8").split("\n").map((l) => l.split(" "));
    const hit = mounts.filter((m) => m[1] === mountPoint).pop();
    if (hit) mountOptions = hit[3] ?? "?";
  } catch {
    // not Linux
  }
  return { path, device, source, type, mountPoint, mountOptions };
}

function git(projectDir: string, args: readonly string[]): string | undefined {
  try {
    return execFileSync("git", ["-C", projectDir, ...args], { encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] }).trim();
  } catch {
    return undefined;
  }
}

export function envInfo(benchDir: string, projectDir: string, sqlite: { betterSqlite3: string; sqlite: string }): EnvInfo {
  const cpus = os.cpus();
  const bench = fsInfo(benchDir);
  const project = fsInfo(projectDir);
  return {
    date: new Date().toISOString(),
    node: process.version,
    v8: process.versions.v8,
    platform: `${process.platform} ${process.arch}`,
    kernel: os.release(),
    cpuModel: cpus[0]?.model.trim() ?? "?",
    cpus: cpus.length,
    memoryGiB: Math.round((os.totalmem() / 2 ** 30) * 10) / 10,
    loadAverageAtStart: os.loadavg().map((l) => Math.round(l * 100) / 100),
    gcExposed: typeof (globalThis as { gc?: unknown }).gc === "function",
    benchDir: bench,
    projectDir: project,
    sameFilesystemAsProject: bench.device === project.device,
    ...sqlite,
    gitCommit: git(projectDir, ["rev-parse", "--short", "HEAD"]) ?? "?",
    srcChanges: (git(projectDir, ["status", "--porcelain", "--", "src"]) ?? "").split("\n").filter((l) => l !== ""),
  };
}

export function describeEnv(env: EnvInfo): string {
  const fs = (f: FsInfo) => `${f.path}  [${f.type} on ${f.source}, mounted at ${f.mountPoint} (${f.mountOptions}), dev ${f.device}]`;
  return [
    `date            ${env.date}`,
    `node            ${env.node} (V8 ${env.v8}), ${env.platform}, kernel ${env.kernel}`,
    `cpu             ${env.cpuModel} × ${env.cpus}, ${env.memoryGiB} GiB RAM, load avg at start ${env.loadAverageAtStart.join(" / ")}`,
    `sqlite          better-sqlite3 ${env.betterSqlite3}, SQLite ${env.sqlite}`,
    `bench files     ${fs(env.benchDir)}`,
    `project         ${fs(env.projectDir)}`,
    `same filesystem ${env.sameFilesystemAsProject ? "yes: the temp dir and the project are on the same filesystem" : "NO: the temp dir is on a different filesystem than the project (figures describe the temp dir's disk)"}`,
    `code            commit ${env.gitCommit}${env.srcChanges.length === 0 ? ", src/ clean" : `, src/ has uncommitted changes: ${env.srcChanges.map((l) => l.trim()).join(", ")}`}`,
    `gc exposed      ${env.gcExposed ? "yes" : "no (run with node --expose-gc for steadier figures)"}`,
  ].join("\n");
}
