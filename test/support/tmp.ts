import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll } from "vitest";

/** Every directory tempDir made in this test file. */
const made: string[] = [];

// Registered when a test file imports this module, so it runs after the file's tests wherever
// tempDir was called: a hook registered inside a test body never ran, and its folder stayed behind.
afterAll(() => {
  for (const dir of made.splice(0)) rmSync(dir, { recursive: true, force: true });
});

/** A fresh temporary directory, removed after the file's tests (call it at the top level, in a hook or in a test). */
export function tempDir(prefix = "effectgate-"): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  made.push(dir);
  return dir;
}
