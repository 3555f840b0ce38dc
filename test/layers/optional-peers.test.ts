/**
 * The optional peers of the observability entries are loaded only by those entries: `import
 * "effectgate"` (and the operator, console and CLI modules) never import prom-client or
 * @opentelemetry/api. A child process refuses every import of them through a resolve hook, then
 * imports the BUILT entries; as the control, effectgate/prometheus and effectgate/otel are refused.
 */
import { spawnSync } from "node:child_process";
import { describe, expect, it } from "vitest";
import { DIST_INDEX, requireBuild } from "../support/processes.js";

const PROBE = `
import { register } from "node:module";
register("data:text/javascript," + encodeURIComponent(
  "export async function resolve(specifier, context, next) {" +
  "  if (/^(prom-client|@opentelemetry\\\\/)/.test(specifier)) throw new Error('optional peer imported: ' + specifier);" +
  "  return next(specifier, context);" +
  "}"));
const dist = process.env.DIST_INDEX.replace(/index\\.js$/, "");
const outcome = {};
for (const entry of ["index.js", "operator.js", "console.js", "server.js", "cli/serve.js", "prometheus.js", "otel.js"]) {
  try {
    await import(dist + entry);
    outcome[entry] = "loaded";
  } catch (err) {
    outcome[entry] = err.message.includes("optional peer imported") ? "refused" : "error: " + err.message;
  }
}
console.log(JSON.stringify(outcome));
`;

describe("optional peers", () => {
  it("only effectgate/prometheus and effectgate/otel import prom-client and @opentelemetry/api", () => {
    requireBuild();
    const run = spawnSync(process.execPath, ["--input-type=module", "-e", PROBE], { encoding: "utf8", env: { ...process.env, DIST_INDEX } });
    expect(run.stderr).toBe("");
    expect(JSON.parse(run.stdout)).toEqual({
      "index.js": "loaded", "operator.js": "loaded", "console.js": "loaded", "server.js": "loaded", "cli/serve.js": "loaded",
      "prometheus.js": "refused", "otel.js": "refused",
    });
  });
});
