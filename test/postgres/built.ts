/** The multi-process tests run the BUILT package: refuse a missing or stale dist/ by name. */
import { existsSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { requireBuild } from "../support/processes.js";

const entry = join(fileURLToPath(new URL("../../", import.meta.url)), "dist", "postgres.js");

export function requireFreshBuild(): void {
  requireBuild();
  if (!existsSync(entry)) throw new Error(`${entry} is missing: run \`npm run build\` first (npm test does it)`);
}

export const WORKER = fileURLToPath(new URL("./fixtures/pg-worker.mjs", import.meta.url));
