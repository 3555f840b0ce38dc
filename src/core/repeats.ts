/**
 * Intent windows: the most common duplicate in the field is not a replay but a re-plan. After a
 * timeout or an error the model asks for the same payment again as a new tool call with a new id,
 * which no id-keyed ledger recognises. A tool's `repeats` policy says what the gate does with a
 * write or destructive call whose canonical input matches an earlier call of the same task (same
 * tenant, same tool) that completed within the window, or whose outcome is not settled yet.
 */
import type { EffectClass } from "./effect-class.js";
import { toJson } from "./json.js";
import { fingerprint } from "./keys.js";

export type RepeatAction =
  /** Answer with the earlier call's result (and say so); the tool does not run. */
  | "collapse"
  /** Answer with an error naming the earlier call and saying that it already happened; the tool does not run. */
  | "refuse"
  /** A person decides: the call waits for a durable approval that names the earlier call. */
  | "approve";

export const REPEAT_ACTIONS: readonly RepeatAction[] = ["collapse", "refuse", "approve"];

export interface RepeatPolicy {
  readonly action: RepeatAction;
  /**
   * How long after it completed an earlier call still counts as the same intent (default 10
   * minutes, on the ledger's clock). An earlier call still in progress, uncertain or waiting for a
   * person counts whatever its age; a failed or compensated one never does (nothing stands).
   */
  readonly windowMs?: number;
}

export const DEFAULT_REPEAT_WINDOW_MS = 10 * 60_000;

/** Destructive tools refuse a repeat unless they say otherwise; writes and reads have no policy unless they ask for one. */
export const DEFAULT_REPEATS: Readonly<Record<EffectClass, RepeatPolicy | undefined>> = {
  read: undefined,
  write: undefined,
  destructive: { action: "refuse" },
};

/** The policy a tool declares, or its class's default; `false` turns it off. */
export function repeatPolicyOf(tool: { readonly effect: EffectClass; readonly repeats?: RepeatPolicy | false }): Required<RepeatPolicy> | undefined {
  const policy = tool.repeats === undefined ? DEFAULT_REPEATS[tool.effect] : tool.repeats || undefined;
  return policy && { action: policy.action, windowMs: policy.windowMs ?? DEFAULT_REPEAT_WINDOW_MS };
}

/** What is wrong with a `repeats` option, or undefined when it is fine. */
export function repeatsProblem(effect: EffectClass, repeats: unknown): string | undefined {
  if (repeats === undefined || repeats === false) return undefined;
  if (effect === "read") return "repeats applies to write and destructive tools (a read has no effect to repeat); remove it";
  if (typeof repeats !== "object" || repeats === null) return 'repeats must be false or { action: "collapse" | "refuse" | "approve", windowMs? }';
  const { action, windowMs } = repeats as { action?: unknown; windowMs?: unknown };
  if (!REPEAT_ACTIONS.includes(action as RepeatAction)) return `repeats.action must be one of ${REPEAT_ACTIONS.join(", ")} (got ${JSON.stringify(action)})`;
  if (windowMs !== undefined && !(typeof windowMs === "number" && Number.isFinite(windowMs) && windowMs >= 0)) {
    return "repeats.windowMs must be a number of milliseconds, 0 or more: how long after it completed an earlier call with the same input still counts";
  }
  return undefined;
}

/** The line put before a collapsed call's result wherever the model reads text: it says the call was answered, not run. */
export function collapsedPreamble(said: string): string {
  return `[effectgate: ${said}. That call's result:]\n`;
}

/**
 * A call's intent: the fingerprint of the input its tool runs with (as the schema parsed it: fields
 * it strips dropped, defaults spelt out), so a re-plan that differs from the first call only in
 * what the schema throws away or fills in is the same intent. The key-mismatch check keeps the
 * fingerprint of what was sent.
 */
export function intentOf(tool: string, validated: unknown): string {
  return fingerprint(tool, toJson(validated));
}
