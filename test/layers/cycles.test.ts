/**
 * No import cycle in src/, type-only imports included (import-x/no-cycle, in lint, passes over
 * `import type`): the graph is read from every module's import and export declarations.
 */
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import ts from "typescript";
import { describe, expect, it } from "vitest";

const SRC = fileURLToPath(new URL("../../src/", import.meta.url));

function modules(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? modules(join(dir, e.name)) : e.name.endsWith(".ts") ? [join(dir, e.name)] : []);
}

function importsOf(file: string): string[] {
  const source = ts.createSourceFile(file, readFileSync(file, "utf8"), ts.ScriptTarget.Latest);
  const out: string[] = [];
  for (const statement of source.statements) {
    const spec = (ts.isImportDeclaration(statement) || ts.isExportDeclaration(statement)) ? statement.moduleSpecifier : undefined;
    if (spec && ts.isStringLiteral(spec) && spec.text.startsWith(".")) out.push(resolve(dirname(file), spec.text).replace(/\.js$/, ".ts"));
  }
  return out;
}

/** Every cycle's files, found by depth-first search over the graph. */
function cycles(graph: Map<string, string[]>): string[][] {
  const found: string[][] = [];
  const state = new Map<string, "open" | "done">();
  const path: string[] = [];
  const visit = (node: string) => {
    state.set(node, "open");
    path.push(node);
    for (const next of graph.get(node) ?? []) {
      if (state.get(next) === "open") found.push(path.slice(path.indexOf(next)));
      else if (!state.has(next)) visit(next);
    }
    path.pop();
    state.set(node, "done");
  };
  for (const node of graph.keys()) if (!state.has(node)) visit(node);
  return found;
}

describe("no import cycles", () => {
  it("src/ has none, counting type-only imports", () => {
    const graph = new Map(modules(SRC).map((file) => [file, importsOf(file)]));
    expect(cycles(graph).map((c) => c.map((f) => f.slice(SRC.length)).join(" → "))).toEqual([]);
  });

  it("the search finds a cycle when there is one", () => {
    expect(cycles(new Map([["a", ["b"]], ["b", ["c"]], ["c", ["a"]], ["d", ["a"]]]))).toEqual([["a", "b", "c"]]);
  });
});
