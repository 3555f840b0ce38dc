/** Runs the BUILT command (dist/cli/main.js) in a child process, as a user would. Build first: `npm run build`. */
import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";

export const CLI = fileURLToPath(new URL("../../dist/cli/main.js", import.meta.url));

export interface CliRun {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

export function runCli(args: readonly string[], options: { cwd?: string; env?: Record<string, string | undefined> } = {}): Promise<CliRun> {
  if (!existsSync(CLI)) throw new Error(`${CLI} does not exist: build first (npm run build, or npx tsc -p tsconfig.build.json)`);
  const env: NodeJS.ProcessEnv = { ...process.env };
  delete env.EFFECTGATE_DB; // a developer's own settings must not leak into the tests
  delete env.EFFECTGATE_PG_URL;
  for (const [name, value] of Object.entries(options.env ?? {})) {
    if (value === undefined) delete env[name];
    else env[name] = value;
  }
  return new Promise((resolve, reject) => {
    execFile(process.execPath, [CLI, ...args], { cwd: options.cwd, env, timeout: 25_000 }, (err, stdout, stderr) => {
      if (err && typeof err.code !== "number") {
        reject(new Error(`could not run the CLI (${String(err.code ?? err.signal)}): ${err.message}\n${stderr}`));
        return;
      }
      resolve({ code: err ? (err.code as number) : 0, stdout, stderr });
    });
  });
}
