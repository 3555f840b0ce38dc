/**
 * An upstream tool's effect class, from its MCP annotations read as hints (the spec says they
 * are untrusted), overridden by the config:
 *   readOnlyHint: true → read;  destructiveHint: false → write;  anything else → destructive
 * (the spec's default for destructiveHint is true, so a tool with no annotations is destructive).
 * idempotentHint: true → the upstream applies a repeated call once.
 */
import type { EffectClass } from "../core/effect-class.js";
import type { ToolConfig } from "./config.js";

export interface ToolAnnotations {
  readonly readOnlyHint?: boolean | undefined;
  readonly destructiveHint?: boolean | undefined;
  readonly idempotentHint?: boolean | undefined;
}

export interface ToolClass {
  readonly effect: EffectClass;
  readonly idempotent: boolean;
  /** Where the class came from, for docs and messages. */
  readonly from: "config" | "annotations";
}

export function classifyTool(annotations: ToolAnnotations | undefined, config: ToolConfig | undefined): ToolClass {
  const hinted: EffectClass = annotations?.readOnlyHint === true ? "read" : annotations?.destructiveHint === false ? "write" : "destructive";
  return {
    effect: config?.effect ?? hinted,
    idempotent: config?.idempotent ?? annotations?.idempotentHint === true,
    from: config?.effect === undefined ? "annotations" : "config",
  };
}
