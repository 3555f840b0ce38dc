/** The multi-process tests run the BUILT package: refuse a missing or stale dist/ by name. */
import { existsSync, readdirSync, statSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const root = fileURLToPath(new URL("../../", import.meta.url));
const entry = join(root, "dist", "postgres.js");

function sourceFiles(at: string): string[] {
  return readdirSync(at, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? sourceFiles(join(at, e.name)) : e.name.endsWith(".ts") ? [join(at, e.name)] : []);
}

export function requireFreshBuild(): void {
  if (!existsSync(entry)) throw new Error(`${entry} is missing: run \`npm run build\` first (npm test does it)`);
  // A stale dist would test yesterday's code and pass.
  const built = statSync(entry).mtimeMs;
  const newer = sourceFiles(join(root, "src", "ledger")).find((f) => statSync(f).mtimeMs > built);
  if (newer) throw new Error(`dist/ is older than ${newer}: run \`npm run build\` before these tests (\`npm test\` does it)`);
}

export const WORKER = fileURLToPath(new URL("./fixtures/pg-worker.mjs", import.meta.url));
