/**
 * vitest globalSetup: the run's temporary files go to one fresh folder, and whatever is left in it
 * at the end fails the run, by name. Every worker and every child process a test starts inherits
 * TMPDIR (os.tmpdir() reads it), so a test that forgets to remove what it made is caught here
 * instead of filling the system temp folder, and other test runs on the machine never count.
 */
import { chmodSync, mkdtempSync, readdirSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

export default function setup(): () => void {
  const root = mkdtempSync(join(tmpdir(), "effectgate-test-run-"));
  // Embedded PostgreSQL (test/support/pg.ts) runs as the `postgres` user when started by root: it must reach its folder.
  chmodSync(root, 0o755);
  const previous = process.env.TMPDIR;
  process.env.TMPDIR = root;
  return () => {
    // Each leftover with a few of the names inside it: they usually tell which test made it.
    const left = readdirSync(root).map((name) => {
      const path = join(root, name);
      if (!statSync(path).isDirectory()) return name;
      const inside = readdirSync(path);
      return `${name}/${inside.length === 0 ? "" : ` (${inside.slice(0, 5).join(", ")}${inside.length > 5 ? ", …" : ""})`}`;
    });
    rmSync(root, { recursive: true, force: true });
    if (previous === undefined) delete process.env.TMPDIR;
    else process.env.TMPDIR = previous;
    if (left.length > 0) {
      process.stderr.write(
        `\nThe tests left ${left.length} temporary file${left.length === 1 ? "" : "s"} behind (now removed): ${left.join(", ")}\n` +
          `Each test must remove what it makes (test/support/tmp.ts tempDir() does it); this run fails.\n`,
      );
      // A throw here is only logged by vitest; the exit code is what fails the run.
      process.exitCode = 1;
    }
  };
}
