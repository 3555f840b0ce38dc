// The layering rule, as lint: an import only points down the layers (docs/ARCHITECTURE.md)
//   core → contracts → {gate, stores} → {governance, saga, reconcile, http, checkpoint}
//   → root → adapters (src/adapters/: the agent SDK adapters) → entries (src/*.ts, src/testing/) → cli;
//   demo/ imports only the package's entries.
// eslint.config.js applies these; test/layers/lint.test.ts proves each forbidden import fails.
const FEATURES = ["governance", "saga", "reconcile", "http", "checkpoint", "mcp", "observability"];

/** What each folder of src/ may import besides itself (relative imports only; packages are free). */
const MAY_IMPORT = {
  core: [],
  contracts: ["core"],
  gate: ["core", "contracts"],
  stores: ["core", "contracts"],
  ...Object.fromEntries(FEATURES.map((f) => [f, ["core", "contracts", "gate"]])),
  root: ["core", "contracts", "gate", "stores", ...FEATURES],
  // The SDK adapters sit on the composed gate (root) and under their entries (src/ai-sdk.ts…).
  adapters: ["core", "contracts", "gate", "stores", ...FEATURES, "root"],
  testing: ["core", "contracts", "gate", "stores", ...FEATURES, "root"],
  cli: ["core", "contracts", "gate", "stores", ...FEATURES, "root", "testing"],
};
const FOLDERS = Object.keys(MAY_IMPORT);

/** Optional peer SDKs: only src/adapters/ and the adapter entries may import them (the core never loads an SDK). */
const OPTIONAL_SDKS = "^(@openai/agents|@langchain/|langchain($|/)|ai($|/)|@anthropic-ai/sdk)";

/** A relative import that climbs out of the folder into `folder` (at any depth below src/). */
const into = (folders) => `^(\\.\\./)+(${folders.join("|")})(/|\\.js$)`;

function layerRules(folder, { files = [`src/${folder}/**/*.ts`], sdks = folder === "adapters" } = {}) {
  const forbidden = FOLDERS.filter((f) => f !== folder && !MAY_IMPORT[folder].includes(f));
  return {
    files,
    rules: {
      "no-restricted-imports": ["error", {
        patterns: [
          {
            regex: into(forbidden),
            message: `src/${folder} may import only ${["itself", ...MAY_IMPORT[folder]].join(", ")} (imports point down the layers: docs/ARCHITECTURE.md).`,
          },
          // A package entry (src/*.ts) is above every folder but testing and cli.
          ...(folder === "testing" || folder === "cli" ? [] : [{
            regex: "^(\\.\\./)+(index|sqlite|postgres|server|operator|testing|mcp|ai-sdk|anthropic|openai-agents|langchain|console|prometheus|otel)\\.js$",
            message: `src/${folder} must not import a package entry: entries sit above it (docs/ARCHITECTURE.md).`,
          }]),
          ...(sdks ? [] : [{
            regex: OPTIONAL_SDKS,
            message: `src/${folder} must not import an agent SDK: SDKs are optional peers, imported only by src/adapters/ and the adapter entries.`,
          }]),
        ],
      }],
    },
  };
}

/** The no-restricted-imports configs, one per folder of src/, plus the entries' and the demo's. */
export const layerConfigs = [
  ...FOLDERS.map((folder) => layerRules(folder)),
  // The fault explorer's entry points drive the SDKs themselves; each is loaded only by a dynamic import
  // (src/testing/explorer/entries/load.ts), so effectgate/testing loads without them (test/explorer/entries.test.ts).
  layerRules("testing", { files: ["src/testing/explorer/entries/**/*.ts"], sdks: true }),
  {
    // The package entries: anything below them, never the CLI.
    files: ["src/*.ts"],
    rules: { "no-restricted-imports": ["error", { patterns: [{ regex: "^\\./cli/", message: "a package entry must not import the CLI" }] }] },
  },
  {
    // The demo is built on the public API only, so it proves that API is enough.
    files: ["demo/**/*.ts"],
    rules: {
      "no-restricted-imports": ["error", {
        patterns: [{ regex: "^(\\.\\./)+src/", message: "the demo imports only the package's entries (\"effectgate\", \"effectgate/sqlite\", …), never src/" }],
      }],
    },
  },
];
