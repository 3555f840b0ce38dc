// Type-aware lint for the bug class a ledger cannot afford (a missing `await` on a commit), no
// import cycles, and the layering rule of eslint.layers.js (docs/ARCHITECTURE.md).
import { createTypeScriptImportResolver } from "eslint-import-resolver-typescript";
import importX from "eslint-plugin-import-x";
import tseslint from "typescript-eslint";
import { layerConfigs } from "./eslint.layers.js";

export default tseslint.config(
  { ignores: ["dist/", "dist-bench/", "node_modules/", "coverage/", ".refactor/", "**/*.mjs", "**/*.cjs", "**/*.js"] },
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
    rules: {
      "@typescript-eslint/no-floating-promises": "error",
      "@typescript-eslint/no-misused-promises": "error",
      "@typescript-eslint/consistent-type-imports": "error",
      "@typescript-eslint/require-await": "off",
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_" }],
    },
  },
  {
    files: ["src/**/*.ts"],
    plugins: { "import-x": importX },
    // Without the parsers and extensions it reads no .ts dependency and finds no cycle at all (test/layers proves it does).
    settings: {
      "import-x/resolver-next": [createTypeScriptImportResolver({ project: "./tsconfig.json" })],
      "import-x/extensions": [".ts"],
      "import-x/parsers": { "@typescript-eslint/parser": [".ts"] },
    },
    rules: { "import-x/no-cycle": ["error", { ignoreExternal: true }] },
  },
  ...layerConfigs,
  {
    files: ["src/**/*.ts"],
    ignores: ["src/cli/**"],
    rules: { "no-console": "error" },
  },
  {
    files: ["test/**/*.ts", "bench/**/*.ts"],
    rules: {
      "@typescript-eslint/no-non-null-assertion": "off",
      "@typescript-eslint/no-unsafe-assignment": "off",
      "@typescript-eslint/no-unsafe-member-access": "off",
      "@typescript-eslint/no-unsafe-argument": "off",
      "@typescript-eslint/no-unsafe-call": "off",
      "@typescript-eslint/no-unsafe-return": "off",
    },
  },
);
