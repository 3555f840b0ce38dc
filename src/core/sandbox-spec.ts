/** What a tool's `sandbox` option says, and the checks defineTool runs on it. The runner is sandbox.ts. */
import { isAbsolute } from "node:path";

/**
 * Run the tool's `execute` in a child process under Node's permission model: it may read only
 * its own code (the package its module belongs to, and effectgate's), plus `allowRead`; write
 * only `allowWrite`; start no processes or workers; use at most `memoryMb` of heap; and it is
 * killed after `timeoutMs`. The network is NOT restricted (Node 20's model has no network
 * permission). See docs/governance.md, "Sandboxed tools", for what this does and does not stop.
 */
export interface SandboxSpec {
  /** The module that exports this tool, as a file URL (`import.meta.url`) or an absolute path: the child imports it. */
  readonly module: string;
  /** The export holding the tool (default: the tool's name). */
  readonly export?: string;
  /** Files and directories (absolute) the tool may read besides its own code. A directory grants everything under it. */
  readonly allowRead?: readonly string[];
  /** Files and directories (absolute) the tool may write. Default: none. */
  readonly allowWrite?: readonly string[];
  /** Heap limit in MB (`--max-old-space-size`, default 128). */
  readonly memoryMb?: number;
  /** Kill the child (SIGKILL) after this long (default: the tool's timeoutMs, else 30 s). Its outcome is then unknown. */
  readonly timeoutMs?: number;
  /** Names of environment variables the child gets (default none: secrets in the parent's environment stay there). */
  readonly env?: readonly string[];
}

/** What is wrong with a sandbox spec, or undefined. */
export function sandboxProblem(spec: unknown): string | undefined {
  if (typeof spec !== "object" || spec === null) return "sandbox must be an object { module, export?, allowRead?, allowWrite?, memoryMb?, timeoutMs?, env? }";
  const s = spec as Record<string, unknown>;
  if (typeof s.module !== "string" || !(s.module.startsWith("file:") || isAbsolute(s.module))) {
    return "sandbox.module must be the file URL (import.meta.url) or absolute path of the module that exports the tool, so the sandbox process can import it";
  }
  if (s.export !== undefined && (typeof s.export !== "string" || s.export === "")) return "sandbox.export must be the name of the export holding the tool";
  for (const list of ["allowRead", "allowWrite"] as const) {
    const v = s[list];
    if (v !== undefined && (!Array.isArray(v) || v.some((p) => typeof p !== "string" || !isAbsolute(p)))) {
      return `sandbox.${list} must be a list of absolute paths`;
    }
  }
  if (s.env !== undefined && (!Array.isArray(s.env) || s.env.some((p) => typeof p !== "string" || p === ""))) return "sandbox.env must be a list of variable names";
  if (s.memoryMb !== undefined && !(typeof s.memoryMb === "number" && Number.isInteger(s.memoryMb) && s.memoryMb >= 16)) {
    return "sandbox.memoryMb must be a whole number of megabytes, at least 16";
  }
  if (s.timeoutMs !== undefined && !(typeof s.timeoutMs === "number" && s.timeoutMs > 0)) return "sandbox.timeoutMs must be a positive number of milliseconds";
  return undefined;
}
