/**
 * The MCP SDK is an optional peer: only the effectgate/mcp entry may load it. Walks the static
 * imports (dynamic import() is how the CLI loads it on demand) from every other entry and from
 * the CLI's main module, and fails on any path that reaches @modelcontextprotocol/sdk.
 */
import { readFileSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const SRC = fileURLToPath(new URL("../../src/", import.meta.url));
const STATIC_IMPORT = /^\s*(?:import|export)\s[^;]*?\sfrom\s+["']([^"']+)["']/gm;

/** The chain of modules from `entry` to the first one that imports the SDK, or undefined. */
function pathToSdk(entry: string): string[] | undefined {
  const seen = new Set<string>();
  const walk = (file: string, chain: string[]): string[] | undefined => {
    if (seen.has(file)) return undefined;
    seen.add(file);
    const text = readFileSync(file, "utf8");
    for (const m of text.matchAll(STATIC_IMPORT)) {
      const spec = m[1] ?? "";
      if (spec.startsWith("@modelcontextprotocol/")) return [...chain, file, spec];
      if (!spec.startsWith(".")) continue;
      const found = walk(resolve(dirname(file), spec.replace(/\.js$/, ".ts")), [...chain, file]);
      if (found) return found;
    }
    return undefined;
  };
  return walk(entry, []);
}

describe("the MCP SDK is loaded only by effectgate/mcp", () => {
  for (const entry of ["index.ts", "sqlite.ts", "postgres.ts", "operator.ts", "server.ts", "testing.ts", "cli/main.ts"]) {
    it(`src/${entry} does not import it`, () => {
      expect(pathToSdk(`${SRC}${entry}`)).toBeUndefined();
    });
  }

  it("the walk finds it from src/mcp.ts (so the check above can fail)", () => {
    expect(pathToSdk(`${SRC}mcp.ts`)?.at(-1)).toMatch(/^@modelcontextprotocol\/sdk\//);
  });
});
