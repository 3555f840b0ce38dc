import { fileURLToPath } from "node:url";
import { defineConfig } from "vitest/config";

const src = fileURLToPath(new URL("./src/", import.meta.url));

export default defineConfig({
  // The demo imports the package by name; in tests that name is the source, as in tsconfig.json's paths.
  resolve: {
    alias: [
      { find: /^effectgate$/, replacement: `${src}index.ts` },
      { find: /^effectgate\/(.*)$/, replacement: `${src}$1.ts` },
    ],
  },
  test: {
    include: ["test/**/*.test.ts"],
    // Every temporary file of the run goes to one folder; anything left there at the end fails the run.
    globalSetup: ["test/support/temp-check.ts"],
    testTimeout: 30_000,
    hookTimeout: 60_000,
  },
});
