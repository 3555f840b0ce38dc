/**
 * A configured probe: an upstream tool (e.g. find_ticket_by_key) asked with the call's key,
 * whose result is mapped to done / absent / running. "done" answers the call with the probe
 * tool's own result, so the probe tool should return what the original call would have.
 */
import { canonicalJson } from "../core/keys.js";
import type { ProbeResult } from "../core/hooks.js";
import type { ProbeConfig } from "./config.js";

export interface ProbeContext {
  readonly key: string;
  readonly fence: number;
  readonly arguments: unknown;
}

const PLACEHOLDER = /^\$\{(key|fence|arguments(?:\.[^}]+)?)\}$/;

/** The probe tool's arguments: "${key}", "${fence}", "${arguments.<path>}" replaced, any other value as written. */
export function probeArguments(probe: ProbeConfig, ctx: ProbeContext): Record<string, unknown> {
  const fill = (value: unknown): unknown => {
    if (typeof value === "string") {
      const m = PLACEHOLDER.exec(value);
      if (!m) return value;
      const what = m[1] as string;
      if (what === "key") return ctx.key;
      if (what === "fence") return ctx.fence;
      return what === "arguments" ? ctx.arguments : at(ctx.arguments, what.slice("arguments.".length));
    }
    if (Array.isArray(value)) return value.map(fill);
    if (typeof value === "object" && value !== null) return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, fill(v)]));
    return value;
  };
  return fill(probe.arguments ?? { key: "${key}" }) as Record<string, unknown>;
}

/** Maps the probe tool's result to an answer; a result that matches none of the lists is an error (the probe is asked again, or a person decides). */
export function probeAnswer(probe: ProbeConfig, result: { readonly isError?: unknown; readonly [field: string]: unknown }): ProbeResult<unknown> {
  if (result.isError === true) throw new Error(`the probe tool ${probe.tool} answered with an error: ${JSON.stringify(result).slice(0, 300)}`);
  const path = probe.status ?? "structuredContent.status";
  const value = at(result, path);
  const same = (list: readonly unknown[] | undefined) => (list ?? []).some((v) => value !== undefined && canonicalJson(v) === canonicalJson(value));
  if (same(probe.done)) return { status: "done", result };
  if (same(probe.absent)) return { status: "absent" };
  if (same(probe.running)) return { status: "running" };
  throw new Error(`the probe tool ${probe.tool} answered ${JSON.stringify(value) ?? "nothing"} at ${path}, which is none of the configured done/absent/running values`);
}

/** The value at a dot path; numeric parts index arrays ("content.0.text"). */
export function at(value: unknown, path: string): unknown {
  let node: unknown = value;
  for (const part of path.split(".")) {
    if (typeof node !== "object" || node === null) return undefined;
    node = (node as Record<string, unknown>)[part];
  }
  return node;
}
