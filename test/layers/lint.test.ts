/**
 * The layering rule is lint (eslint.layers.js, applied by `npm run lint`): each import below runs
 * against a layer it must not reach, and must be refused; the allowed ones must pass. And a
 * cycle between two modules fails import-x/no-cycle, as configured in eslint.config.js.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { ESLint, type Linter } from "eslint";
import { createTypeScriptImportResolver } from "eslint-import-resolver-typescript";
import importX from "eslint-plugin-import-x";
import tseslint from "typescript-eslint";
import { describe, expect, it } from "vitest";
// eslint-disable-next-line @typescript-eslint/ban-ts-comment
// @ts-ignore -- a plain JS module of the repository's own, typed loosely here
import { layerConfigs } from "../../eslint.layers.js";

const root = fileURLToPath(new URL("../../", import.meta.url));

async function problems(file: string, code: string): Promise<string[]> {
  const eslint = new ESLint({
    cwd: root,
    overrideConfigFile: true,
    overrideConfig: [{ files: ["**/*.ts"], languageOptions: { parser: tseslint.parser } }, ...(layerConfigs as Linter.Config[])],
  });
  const [result] = await eslint.lintText(code, { filePath: join(root, file) });
  return (result?.messages ?? []).map((m) => `${m.ruleId ?? "parse"}: ${m.message}`);
}

const use = (from: string) => `import { thing } from "${from}";\nexport const x = thing;\n`;

describe("imports point one way", () => {
  it.each([
    ["src/core/probe.ts", "../gate/pipeline.js", /src\/core may import only itself/],
    ["src/core/probe.ts", "../contracts/calls.js", /src\/core may import only itself/],
    ["src/contracts/probe.ts", "../stores/sqlite/index.js", /src\/contracts may import only itself, core/],
    ["src/gate/probe.ts", "../stores/sqlite/index.js", /src\/gate may import only itself, core, contracts/],
    ["src/gate/probe.ts", "../governance/govern.js", /src\/gate may import only/],
    ["src/gate/probe.ts", "../root/create-gate.js", /src\/gate may import only/],
    ["src/stores/sqlite/probe.ts", "../../gate/kernel.js", /src\/stores may import only itself, core, contracts/],
    ["src/stores/memory/probe.ts", "../../governance/approvals.js", /src\/stores may import only/],
    ["src/saga/probe.ts", "../reconcile/scan.js", /src\/saga may import only itself, core, contracts, gate/],
    ["src/saga/probe.ts", "../stores/memory/index.js", /src\/saga may import only/],
    ["src/http/probe.ts", "../reconcile/receipt.js", /src\/http may import only/],
    ["src/governance/probe.ts", "../index.js", /must not import a package entry/],
    ["src/root/probe.ts", "../cli/main.js", /src\/root may import only/],
    ["src/index.ts", "./cli/format.js", /a package entry must not import the CLI/],
    ["demo/probe.ts", "../src/root/create-gate.js", /the demo imports only the package's entries/],
    ["demo/blast/probe.ts", "../../src/core/tool.js", /the demo imports only the package's entries/],
    ["src/core/probe.ts", "@openai/agents", /must not import an agent SDK/],
    ["src/root/probe.ts", "@langchain/core/tools", /must not import an agent SDK/],
    ["src/gate/probe.ts", "langchain", /must not import an agent SDK/],
    ["src/adapters/probe.ts", "../cli/main.js", /src\/adapters may import only/],
  ])("%s importing %s is refused", async (file, from, message) => {
    const found = await problems(file, use(from));
    expect(found.join("\n")).toMatch(message);
  });

  it.each([
    ["src/adapters/probe.ts", "@openai/agents"],
    ["src/adapters/probe.ts", "../root/create-gate.js"],
    ["src/contracts/probe.ts", "../core/json.js"],
    ["src/gate/probe.ts", "../contracts/calls.js"],
    ["src/stores/postgres/probe.ts", "../../contracts/stores.js"],
    ["src/saga/probe.ts", "../gate/kernel.js"],
    ["src/root/probe.ts", "../stores/sqlite/index.js"],
    ["src/root/probe.ts", "../saga/engine.js"],
    ["src/cli/probe.ts", "../root/create-gate.js"],
    ["src/testing/probe.ts", "../root/create-gate.js"],
    ["demo/probe.ts", "effectgate/sqlite"],
  ])("%s importing %s is allowed", async (file, from) => {
    expect(await problems(file, use(from))).toEqual([]);
  });

  it("a cycle between two modules fails import-x/no-cycle", async () => {
    const dir = mkdtempSync(join(tmpdir(), "effectgate-cycle-"));
    try {
      writeFileSync(join(dir, "tsconfig.json"), JSON.stringify({ compilerOptions: { module: "NodeNext", moduleResolution: "NodeNext", strict: true }, include: ["*.ts"] }));
      writeFileSync(join(dir, "a.ts"), `import { b } from "./b.js";\nexport const a = () => b;\n`);
      writeFileSync(join(dir, "b.ts"), `import { a } from "./a.js";\nexport const b = () => a;\n`);
      const eslint = new ESLint({
        cwd: dir,
        overrideConfigFile: true,
        overrideConfig: [{
          files: ["**/*.ts"],
          languageOptions: { parser: tseslint.parser },
          plugins: { "import-x": importX },
          settings: {
            "import-x/resolver-next": [createTypeScriptImportResolver({ project: join(dir, "tsconfig.json") })],
            "import-x/extensions": [".ts"],
            "import-x/parsers": { "@typescript-eslint/parser": [".ts"] },
          },
          rules: { "import-x/no-cycle": ["error", { ignoreExternal: true }] },
        }],
      });
      const [result] = await eslint.lintFiles([join(dir, "a.ts")]);
      expect(result?.messages.map((m) => m.ruleId)).toContain("import-x/no-cycle");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
