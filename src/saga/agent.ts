/**
 * Tool calls tagged with a saga id (`scope.saga`) form a saga: each write or destructive call
 * is a step named by its tool_use id (key `saga:<id>:<tool_use id>`). When one fails, is not
 * approved, or has an unknown outcome, the saga's completed steps are compensated in reverse
 * order and the model is told so; later calls tagged with that saga are not executed. Reads run
 * as usual and are not steps. A replayed tool_use (resume, duplicate delivery) is answered from
 * the saga log and the ledger: nothing runs twice.
 */
import { errorMessage, isEffectgateError, messageOf } from "../core/errors.js";
import type { Scope } from "../core/keys.js";
import { validate } from "../core/standard-schema.js";
import { errorResult, renderResult, resultBlock, type ToolResultBlock, type ToolUseBlock } from "../core/blocks.js";
import { runStep, sagaLogOf, type SagaContext, type SagaRuntime } from "./engine.js";
import { checkName } from "./keys.js";
import { ending } from "./saga.js";

export async function runSagaToolUse(rt: SagaRuntime, block: ToolUseBlock, scope: Scope & { readonly saga: string }): Promise<ToolResultBlock> {
  const { saga: id, ...callScope } = scope;
  const tool = rt.kernel.tools.get(block.name);
  // Unknown tools, reads and invalid input are answered as usual: they are not steps.
  if (!tool || tool.effect === "read" || !(await validate(tool.input, block.input)).ok) return rt.kernel.runCall(block, callScope);
  const bad = checkName("saga id", id);
  if (bad) return errorResult(block.id, "EG_BAD_CONTENT", `scope.saga: ${bad}. Nothing was executed.`);
  try {
    const ctx: SagaContext = {
      rt, log: sagaLogOf(rt), tenant: scope.tenant, id, task: scope.task, scope: callScope,
      approve: undefined, onAbandon: "hold", compensationInputs: new Map(),
    };
    const outcome = await runStep(ctx, { name: block.id, tool, input: block.input, toolUseId: block.id });
    switch (outcome.kind) {
      case "completed":
        return resultBlock(block.id, renderResult(outcome.result), false);
      case "failed":
        return errorResult(block.id, "EG_SAGA_FAILED",
          `${tool.name} ${outcome.reason}. ${ending(outcome.saga)} Nothing more runs in saga ${id}; do not retry these calls under new ids.`);
      case "closed":
        return errorResult(block.id, "EG_SAGA_CLOSED",
          `saga ${id} is ${outcome.saga.state}${outcome.saga.reason ? ` (${outcome.saga.reason})` : ""}, so this ${tool.name} call was not executed. ` +
            `Start a new saga (another scope.saga id) for new work.`);
      case "pending":
        return resultBlock(block.id, outcome.message, true);
      case "rejected":
        return errorResult(block.id, outcome.code, outcome.message);
    }
  } catch (err) {
    const message = isEffectgateError(err) ? err.message : errorMessage("EG_LEDGER_UNAVAILABLE", messageOf(err));
    return resultBlock(block.id,
      `${message}. Saga ${id} could not be brought up to date; repeat this same call once the ledger is reachable to settle it, and do not retry it under a new id.`, true);
  }
}
