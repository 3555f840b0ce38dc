/** `read`: no side effect. `write`: each call adds an effect. `destructive`: irreversible. */
export type EffectClass = "read" | "write" | "destructive";
export const EFFECT_CLASSES: readonly EffectClass[] = ["read", "write", "destructive"];

export function isEffectClass(value: unknown): value is EffectClass {
  return typeof value === "string" && (EFFECT_CLASSES as readonly string[]).includes(value);
}
