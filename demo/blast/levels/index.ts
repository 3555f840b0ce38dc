/**
 * The protection levels, in the order the table prints them. Adding a level is adding its
 * module and one line here.
 */
import { effectClasses } from "./effect-classes.js";
import { governance } from "./governance.js";
import { idempotencyKeys } from "./idempotency-keys.js";
import { jsonFileLedger } from "./json-file-ledger.js";
import { naiveRetry } from "./naive-retry.js";
import { probes } from "./probes.js";
import { reconciliation } from "./reconciliation.js";
import { sagas } from "./sagas.js";
import type { Level } from "./types.js";

export type { Level } from "./types.js";

export const LEVELS: readonly Level[] = [naiveRetry, effectClasses, idempotencyKeys, probes, sagas, reconciliation, governance, jsonFileLedger];

export function levelByKey(key: string): Level | undefined {
  return LEVELS.find((level) => level.key === key);
}
