/**
 * The tool layer most agents ship with, in the variants levels 0–2 and the reference row use:
 * call the downstream directly, with a timeout, retrying by some rule, optionally sending the
 * tool_use id as Idempotency-Key and optionally remembering results in a JSON file written
 * after each call. No schema validation, no claim before the call, no probes.
 */
import { existsSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { messageOf } from "../../text.js";
import { classifyError, type ToolResultBlock } from "effectgate";
import { callDownstream, isToolName, TOOLS, type ToolInfo } from "../tools.js";
import { CALL_TIMEOUT_MS, scaled } from "../timing.js";
import type { Executor, LevelRuntime, WorkerContext } from "./types.js";

export interface HandRolledOptions {
  /** Total tries per call, including the first. */
  readonly attempts: number;
  /** Whether to try again after `error`. */
  retry(tool: ToolInfo, error: unknown): boolean;
  /** Send the tool_use id as Idempotency-Key on effect calls. */
  readonly sendKey: boolean;
  /** Remember every answer in a JSON file {tool_use_id: tool_result}, written after the call; replay from it. */
  readonly jsonLedger: boolean;
}

/** Backoff between tries: 20, 40, 80 ms (no jitter: the demo is seeded end to end). */
const backoffMs = (retry: number) => scaled(20 * 2 ** retry);
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

export function handRolled(ctx: WorkerContext, options: HandRolledOptions): LevelRuntime {
  // One file per worker process, as a tutorial's agent would keep it; twins in one process share it.
  const file = join(ctx.dir, `json-ledger.${ctx.role}.json`);
  const read = (): Record<string, ToolResultBlock> => (existsSync(file) ? (JSON.parse(readFileSync(file, "utf8")) as Record<string, ToolResultBlock>) : {});
  const remember = (block: ToolResultBlock) => {
    const all = read();
    all[block.tool_use_id] = block;
    const temp = `${file}.tmp`;
    writeFileSync(temp, JSON.stringify(all));
    renameSync(temp, file);
  };

  return {
    async executor(hooks): Promise<Executor> {
      return {
        async answer(block) {
          if (options.jsonLedger) {
            const known = read()[block.id];
            if (known) return known;
          }
          if (!isToolName(block.name)) return toolResult(block.id, `unknown tool ${block.name}`, true);
          const info = TOOLS[block.name];
          const input = block.input as Record<string, unknown>;
          hooks.kill("before_call", block.id);
          let answer: ToolResultBlock | undefined;
          for (let attempt = 1; answer === undefined; attempt++) {
            try {
              const result = await hooks.downstream(block.id, () => callDownstream(ctx.urls, info.name, input, {
                ...(options.sendKey && info.effect !== "read" ? { key: block.id } : {}),
                signal: AbortSignal.timeout(CALL_TIMEOUT_MS),
              }));
              hooks.kill("after_effect", block.id);
              answer = toolResult(block.id, JSON.stringify(result), false);
            } catch (err) {
              if (attempt < options.attempts && options.retry(info, err)) {
                await sleep(backoffMs(attempt - 1));
                continue;
              }
              answer = toolResult(block.id, `${info.name} failed${attempt > 1 ? ` after ${attempt} tries` : ""}: ${messageOf(err)}`, true);
            }
          }
          if (options.jsonLedger) remember(answer);
          hooks.kill("after_record", block.id);
          return answer;
        },
        async close() {},
      };
    },
    async recover() {},
    async close() {},
  };
}

/** The outcome may be retried without knowing more: it may not have happened (timeout, reset, 5xx) or surely did not (not sent). */
export function transient(error: unknown): boolean {
  const kind = classifyError(error);
  return kind === "unknown" || kind === "not_sent";
}

function toolResult(toolUseId: string, content: string, isError: boolean): ToolResultBlock {
  return { type: "tool_result", tool_use_id: toolUseId, content, is_error: isError };
}
