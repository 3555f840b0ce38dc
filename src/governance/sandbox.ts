/**
 * Sandboxed tools: the gate runs a tool marked `sandbox` by starting a fresh Node process
 * under the permission model for each execution. The child imports the tool's module (named
 * by `sandbox.module`), calls that export's `execute` with the validated input, and sends the
 * result back over IPC.
 *
 * What the child may do (Node 20's model; the limits are in docs/governance.md):
 * - read its own code (the package the tool's module belongs to, and effectgate's), plus `allowRead`;
 * - write only `allowWrite`;
 * - start no child processes and no worker threads (the model denies both unless allowed);
 * - use at most `memoryMb` of heap, and live at most `timeoutMs` (then SIGKILL);
 * - see only the environment variables listed in `env`.
 * It may use the network: Node 20 has no network permission.
 *
 * Outcomes: a result → the result; the tool's own error → that error (same name, code and
 * HTTP status, so the gate classifies it as it would in-process); an access the permission
 * model refused → EG_SANDBOX_DENIED (a definite failure); a child killed on timeout, out of
 * memory or crashed → OutcomeUnknown (the tool may have done something first), so the probe
 * is asked as for any unknown outcome. dryRun and probe run in the gate's process.
 */
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { EffectgateError } from "../core/errors.js";
import type { AnyTool, ToolContext } from "../core/tool.js";
import { OutcomeUnknown, ToolRejected } from "../core/outcome.js";
import type { SandboxSpec } from "../core/sandbox-spec.js";

const DEFAULT_SANDBOX_MEMORY_MB = 128;

/** The child's program: import the module, run the tool, answer once over IPC, exit. */
const RUNNER = `
const answer = (message) => new Promise((resolve) => process.send(message, () => resolve()));
const describe = (e, depth = 0) => {
  if (e === null || typeof e !== "object") return { name: "Error", message: String(e) };
  const out = { name: String(e.name ?? "Error"), message: String(e.message ?? e) };
  for (const f of ["code", "status", "statusCode", "permission", "resource"]) if (typeof e[f] === "string" || typeof e[f] === "number") out[f] = e[f];
  if (e.cause !== undefined && depth < 4) out.cause = describe(e.cause, depth + 1);
  return out;
};
process.once("message", async (request) => {
  let reply;
  try {
    const mod = await import(request.module);
    const tool = mod[request.exportName];
    if (!tool || typeof tool.execute !== "function" || tool.name !== request.tool) {
      reply = { ok: false, setup: true, error: { name: "Error", message: "the module " + request.module + " has no export " + JSON.stringify(request.exportName) + " holding the tool " + request.tool } };
    } else {
      const ctx = { ...request.ctx, signal: new AbortController().signal };
      const value = await tool.execute(request.input, ctx);
      reply = { ok: true, value: value === undefined ? null : JSON.parse(JSON.stringify(value)) };
    }
  } catch (e) {
    reply = { ok: false, error: describe(e) };
  }
  await answer(reply);
  process.exit(0);
});
`;

interface ErrorShape {
  readonly name: string;
  readonly message: string;
  readonly code?: string | number;
  readonly status?: number;
  readonly statusCode?: number;
  readonly permission?: string;
  readonly resource?: string;
  readonly cause?: ErrorShape;
}

type Reply = { ok: true; value: unknown } | { ok: false; setup?: boolean; error: ErrorShape };

/** The flag that turns the permission model on: `--permission` from Node 22.13/23.5, `--experimental-permission` before. */
function permissionFlag(): string {
  return process.allowedNodeEnvironmentFlags.has("--permission") ? "--permission" : "--experimental-permission";
}

/** The nearest directory at or above `from` holding a package.json (the package a file belongs to), else `from`. */
function packageRoot(from: string): string {
  for (let dir = from; ; dir = dirname(dir)) {
    if (existsSync(join(dir, "package.json"))) return dir;
    if (dirname(dir) === dir) return from;
  }
}

const EFFECTGATE_ROOT = packageRoot(dirname(fileURLToPath(import.meta.url)));

export interface SandboxPlan {
  readonly moduleUrl: string;
  readonly exportName: string;
  readonly read: readonly string[];
  readonly write: readonly string[];
  readonly memoryMb: number;
  readonly timeoutMs: number;
  readonly args: readonly string[];
  readonly env: Readonly<Record<string, string>>;
}

function planSandbox(tool: AnyTool, spec: SandboxSpec, defaultTimeoutMs: number): SandboxPlan {
  const moduleUrl = spec.module.startsWith("file:") ? spec.module : pathToFileURL(spec.module).href;
  const modulePath = fileURLToPath(moduleUrl);
  const read = [...new Set([packageRoot(dirname(modulePath)), EFFECTGATE_ROOT, ...(spec.allowRead ?? [])])];
  const write = [...(spec.allowWrite ?? [])];
  const memoryMb = spec.memoryMb ?? DEFAULT_SANDBOX_MEMORY_MB;
  const args = [
    permissionFlag(),
    ...read.map((p) => `--allow-fs-read=${p}`),
    ...write.map((p) => `--allow-fs-write=${p}`),
    `--max-old-space-size=${memoryMb}`,
    // Node before 20.11 has no --disable-warning; the child's stderr then carries the warning, which is harmless.
    ...(process.allowedNodeEnvironmentFlags.has("--disable-warning") ? ["--disable-warning=ExperimentalWarning"] : []),
    "--input-type=module",
    "-e",
    RUNNER,
  ];
  const env: Record<string, string> = {};
  for (const name of spec.env ?? []) {
    const value = process.env[name];
    if (value !== undefined) env[name] = value;
  }
  return { moduleUrl, exportName: spec.export ?? tool.name, read, write, memoryMb, timeoutMs: spec.timeoutMs ?? defaultTimeoutMs, args, env };
}

/** The tool with its `execute` replaced by a run in a sandboxed child process. Other hooks are unchanged. */
export function sandboxed(tool: AnyTool, defaultTimeoutMs: number): AnyTool {
  if (!tool.sandbox) return tool;
  const plan = planSandbox(tool, tool.sandbox, defaultTimeoutMs);
  return Object.freeze({ ...tool, execute: (input: unknown, ctx: ToolContext) => runSandboxed(tool, plan, input, ctx) });
}

function runSandboxed(tool: AnyTool, plan: SandboxPlan, input: unknown, ctx: ToolContext): Promise<unknown> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [...plan.args], { stdio: ["ignore", "ignore", "pipe", "ipc"], env: plan.env });
    let stderr = "";
    let reply: Reply | undefined;
    let killedFor: string | undefined;
    const kill = (why: string) => {
      if (killedFor !== undefined || child.exitCode !== null) return;
      killedFor = why;
      child.kill("SIGKILL");
    };
    const timer = setTimeout(() => kill(`it was killed after ${plan.timeoutMs} ms (its sandbox timeout)`), plan.timeoutMs);
    const onAbort = () => kill("the gate gave up on the call and killed it");
    ctx.signal.addEventListener("abort", onAbort, { once: true });
    child.stderr?.setEncoding("utf8").on("data", (chunk: string) => {
      stderr = (stderr + chunk).slice(-4000);
    });
    child.on("message", (message: Reply) => {
      reply = message;
    });
    child.on("error", (err) => {
      clearTimeout(timer);
      ctx.signal.removeEventListener("abort", onAbort);
      reject(new EffectgateError("EG_TOOL_FAILED", `the sandbox process for ${tool.name} could not start: ${err.message}`, { cause: err }));
    });
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      ctx.signal.removeEventListener("abort", onAbort);
      if (reply?.ok === true) return resolve(reply.value);
      if (reply?.ok === false) return reject(rebuildError(tool, plan, reply.error));
      const heap = /heap out of memory|Reached heap limit|Allocation failed/i.test(stderr);
      const why = killedFor ??
        (heap ? `it ran out of its ${plan.memoryMb} MB memory cap` : `its process ended (${signal ?? `exit code ${code}`}) without answering${stderr.trim() ? `: ${lastLines(stderr)}` : ""}`);
      reject(new OutcomeUnknown(`sandboxed ${tool.name} did not finish: ${why}; whether it did anything first is unknown`));
    });
    child.send({
      module: plan.moduleUrl, exportName: plan.exportName, tool: tool.name, input,
      ctx: { idempotencyKey: ctx.idempotencyKey, toolUseId: ctx.toolUseId, scope: ctx.scope, attempt: ctx.attempt },
    });
  });
}

function rebuildError(tool: AnyTool, plan: SandboxPlan, shape: ErrorShape): Error {
  const denied = findDenied(shape);
  if (denied) {
    const fs = denied.permission === "FileSystemRead" || denied.permission === "FileSystemWrite";
    const write = denied.permission === "FileSystemWrite";
    const what = fs
      ? `tried to ${write ? "write" : "read"} ${denied.resource ?? "a file"} and was refused (${write ? `it may write ${plan.write.length ? plan.write.join(", ") : "nothing"}` : `it may read ${plan.read.join(", ")}`})`
      : `tried to ${denied.permission === "ChildProcess" ? "start a child process" : denied.permission === "WorkerThreads" ? "start a worker thread" : `use ${denied.permission ?? "a restricted API"}`} and was refused (sandboxed tools may start no processes or workers)`;
    return new EffectgateError(
      "EG_SANDBOX_DENIED",
      `sandboxed tool ${tool.name} ${what}. The call failed there${fs ? "; add the path to its sandbox grant if the access is intended" : ""}.`,
    );
  }
  const err = shape.name === "ToolRejected" ? new ToolRejected(shape.message) : shape.name === "OutcomeUnknown" ? new OutcomeUnknown(shape.message) : new Error(shape.message);
  if (err.name === "Error" && shape.name !== "Error") err.name = shape.name;
  const extra = err as Error & Record<string, unknown>;
  if (shape.code !== undefined) extra.code = shape.code;
  if (shape.status !== undefined) extra.status = shape.status;
  if (shape.statusCode !== undefined) extra.statusCode = shape.statusCode;
  if (shape.cause) extra.cause = rebuildError(tool, plan, shape.cause);
  return err;
}

function findDenied(shape: ErrorShape | undefined): ErrorShape | undefined {
  for (let e = shape, depth = 0; e && depth < 5; e = e.cause, depth++) if (e.code === "ERR_ACCESS_DENIED") return e;
  return undefined;
}

function lastLines(text: string): string {
  return text.trim().split("\n").slice(-3).join(" | ");
}
