/**
 * docs/openapi.json describes exactly the routes the server answers: every documented operation
 * exists, every route is documented, and what the server really returns for each GET has the
 * properties the file calls required.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { silentLogger } from "../../src/core/logger.js";
import { ROUTES } from "../../src/root/console/routes.js";
import { SERVER_ROUTES, startConsole, type ConsoleServer } from "../../src/root/console/server.js";
import { createGate, type Gate } from "../../src/root/create-gate.js";
import { sqliteLedger } from "../../src/stores/sqlite/index.js";
import type { Stores } from "../../src/contracts/stores.js";
import { deleteAccountTool, effects, emailTool, use } from "../governance/support.js";
import { tempDir } from "../support/tmp.js";
import { call } from "./support.js";

interface Schema { $ref?: string; type?: string | string[]; properties?: Record<string, Schema>; required?: string[]; items?: Schema; oneOf?: Schema[] }
interface Operation { parameters: { name: string; in: string }[]; responses: Record<string, { content?: Record<string, { schema: Schema }> }> }
const spec = JSON.parse(readFileSync(new URL("../../docs/openapi.json", import.meta.url), "utf8")) as {
  openapi: string; paths: Record<string, Record<string, Operation>>; components: { schemas: Record<string, Schema> };
};

const documented = Object.entries(spec.paths).flatMap(([path, ops]) => Object.keys(ops).map((m) => `${m.toUpperCase()} ${path}`)).sort();
const served = [...ROUTES, ...SERVER_ROUTES].map((r) => `${r.method} ${r.path}`).sort();

function resolveRef(schema: Schema): Schema {
  return schema.$ref ? resolveRef(spec.components.schemas[schema.$ref.replace("#/components/schemas/", "")] ?? {}) : schema;
}

/** Problems with `value` against the file's schema: required properties missing, wrong JSON types. */
function check(value: unknown, schema: Schema, at: string): string[] {
  const s = resolveRef(schema);
  if (s.oneOf) return s.oneOf.some((option) => check(value, option, at).length === 0) ? [] : [`${at}: matches none of its oneOf`];
  const types = s.type === undefined ? [] : Array.isArray(s.type) ? s.type : [s.type];
  const typeOf = value === null ? "null" : Array.isArray(value) ? "array" : Number.isInteger(value) ? "integer" : typeof value;
  if (types.length && !types.includes(typeOf) && !(typeOf === "integer" && types.includes("number"))) return [`${at}: is ${typeOf}, the file says ${types.join("|")}`];
  const problems: string[] = [];
  if (typeOf === "object" && s.properties) {
    const obj = value as Record<string, unknown>;
    for (const name of s.required ?? []) if (!(name in obj)) problems.push(`${at}.${name}: missing`);
    for (const [name, sub] of Object.entries(s.properties)) if (name in obj) problems.push(...check(obj[name], sub, `${at}.${name}`));
  }
  if (typeOf === "array" && s.items) (value as unknown[]).forEach((item, i) => problems.push(...check(item, s.items!, `${at}[${i}]`)));
  return problems;
}

describe("docs/openapi.json", () => {
  const TOKEN = "openapi-token-0123456789abcdefghij";
  let server: ConsoleServer;
  let gate: Gate;
  let ledger: Stores;

  beforeAll(async () => {
    ledger = sqliteLedger(join(tempDir(), "openapi.db"));
    const fx = effects();
    gate = createGate({ tools: [deleteAccountTool(fx), emailTool(fx)], ledger, onAlert: () => {} });
    await gate.runToolUses([use("m1", "send_email", { to: "a" }), use("d1", "delete_account", { account: "x" })], { tenant: "acme", task: "t1" });
    await ledger.governance?.setKillSwitch({ tenant: "acme" }, true, { by: "test" }, Date.now());
    server = await startConsole({ ledger, token: TOKEN, port: 0, logger: silentLogger });
  });
  afterAll(async () => {
    await server.close();
    await gate.close();
    await ledger.close();
  });

  it("is OpenAPI 3.1 and lists exactly the routes the server answers", () => {
    expect(spec.openapi).toBe("3.1.0");
    expect(documented).toEqual(served);
  });

  it("names every path parameter of every route, and documents 401 for each", () => {
    for (const [path, ops] of Object.entries(spec.paths)) {
      const names = [...path.matchAll(/\{(\w+)\}/g)].map((m) => m[1]);
      for (const op of Object.values(ops)) {
        expect(op.parameters.filter((p) => p.in === "path").map((p) => p.name), path).toEqual(names);
        expect(Object.keys(op.responses), path).toContain("401");
      }
    }
  });

  it("what each GET really returns has the properties the file requires", async () => {
    const approvals = (await call(server.url, TOKEN, "GET", "/api/approvals")).body as { approvals: { id: string }[] };
    const approvalId = approvals.approvals[0]?.id ?? "";
    const concrete: Record<string, string> = {
      "/api/calls/{tenant}/{key}": "/api/calls/acme/m1",
      "/api/approvals/{id}": `/api/approvals/${approvalId}`,
      "/api/queue/{id}": "/api/queue/m1?tenant=acme",
      "/api/sagas/{tenant}/{id}": "",
    };
    for (const [path, ops] of Object.entries(spec.paths)) {
      const op = ops.get;
      if (!op || path === "/api/events") continue;
      const url = concrete[path] ?? path;
      if (url === "") continue;
      const reply = await call(server.url, TOKEN, "GET", url);
      expect(reply.status, url).toBe(200);
      const schema = op.responses["200"]?.content?.["application/json"]?.schema;
      expect(schema, url).toBeDefined();
      expect(check(reply.body, schema!, url)).toEqual([]);
    }
  });

  it("is served at /api/openapi.json, behind the token", async () => {
    expect((await call(server.url, undefined, "GET", "/api/openapi.json")).status).toBe(401);
    expect((await call(server.url, TOKEN, "GET", "/api/openapi.json")).body).toEqual(spec);
  });
});
