/** Policy files and objects: a valid file works end to end; every malformed one is refused naming the field (and line). */
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { createGate } from "../../src/root/create-gate.js";
import { memoryLedger } from "../../src/stores/memory/index.js";
import { isEffectgateError } from "../../src/core/errors.js";
import { tempDir } from "../support/tmp.js";
import { chargeTool, deleteAccountTool, effects, emailTool, lookupTool, use } from "./support.js";

const dir = tempDir();
let n = 0;
const fx = effects();
const tools = [chargeTool(fx), deleteAccountTool(fx), emailTool(fx), lookupTool(fx)];

function file(text: string): string {
  const path = join(dir, `policy-${n++}.json`);
  writeFileSync(path, text);
  return path;
}

/** The EG_BAD_POLICY message createGate throws for this policy (a path or an object). */
function refusal(policy: unknown): string {
  try {
    createGate({ ledger: memoryLedger(), tools, policy: policy as string });
  } catch (err) {
    if (isEffectgateError(err, "EG_BAD_POLICY")) return err.message;
    throw err;
  }
  throw new Error("the policy was accepted");
}

export const EXAMPLE_POLICY = `{
  "version": "2026-11-30",
  "grants": [
    { "agent": "support-bot", "tools": ["send_email", "charge_card"] },
    { "agent": "admin-*", "classes": ["write", "destructive"] }
  ],
  "quotas": [
    { "per": "task", "tool": "send_email", "limit": 3 },
    { "per": "session", "tool": "charge_card", "sum": "amount", "limit": 500 }
  ],
  "rateLimits": [
    { "per": "task", "class": "destructive", "limit": 10, "windowMs": 60000 },
    { "per": "agent", "limit": 100, "windowMs": 60000 }
  ],
  "approvals": {
    "ttlMs": 86400000,
    "rules": [{ "tool": "charge_card", "when": { "field": "amount", "gt": 100 } }]
  },
  "nonCompensable": ["send_email"]
}
`;

describe("policy files", () => {
  it("the documented example file loads and governs calls", async () => {
    const gate = createGate({ ledger: memoryLedger(), tools, policy: file(EXAMPLE_POLICY), onAlert: () => {} });
    const scope = { tenant: "acme", task: "t1", agent: "support-bot" };
    const results = await gate.runToolUses([
      use("c1", "charge_card", { customer: "x", amount: 50 }),
      use("c2", "charge_card", { customer: "x", amount: 150 }),
      use("d1", "delete_account", { account: "a" }),
      use("e1", "send_email", { to: "a" }),
    ], scope);
    expect(results.map((r) => r.content.split(":")[0])).toEqual(['{"charged"', "EG_AWAITING_APPROVAL", "EG_NOT_GRANTED", "EG_AWAITING_APPROVAL"]);
  });

  const cases: [string, string, RegExp][] = [
    ["JSON syntax", `{\n  "grants": [\n    { "tools": ["send_email"] }\n  ,\n}`, /\(JSON syntax\) \(line 5, column 1\): not valid JSON: expected a value \(object, list, string, number, true, false or null\), found "}"/],
    ["trailing comma", `{\n  "version": "1",\n}`, /\(JSON syntax\) \(line 3, column 1\): not valid JSON: expected another field after "," \(JSON allows no trailing comma\), found "}"/],
    ["not an object", `["send_email"]`, /\(the policy itself\) \(line 1, column 1\): a policy must be a JSON object/],
    ["unknown top-level field", `{\n  "version": "1",\n  "grant": []\n}`, /  - grant \(line 3, column 12\): is not a known field/],
    ["grants not a list", `{ "grants": { "tools": ["x"] } }`, /grants \(line 1, column 13\): must be a list of grants/],
    ["grant without tools or classes", `{ "grants": [ { "agent": "bot" } ] }`, /grants\[0\] \(line 1, column 15\): a grant needs tools or classes/],
    ["grant of class read", `{ "grants": [ { "classes": ["read"] } ] }`, /grants\[0\]\.classes\[0\] \(line 1, column 29\): must be one of write, destructive \(read tools are never governed\)/],
    ["unknown field in a grant", `{ "grants": [ { "tools": ["send_email"], "tenants": ["acme"] } ] }`, /grants\[0\]\.tenants \(line 1, column \d+\): is not a known field/],
    ["negative quota limit", `{\n  "quotas": [\n    { "per": "task", "limit": 3 },\n    { "per": "task", "limit": -1 }\n  ]\n}`, /quotas\[1\]\.limit \(line 4, column 31\): must be greater than 0/],
    ["quota limit as a string", `{ "quotas": [ { "per": "task", "limit": "5" } ] }`, /quotas\[0\]\.limit \(line 1, column \d+\): must be a number/],
    ["quota without limit", `{ "quotas": [ { "per": "task" } ] }`, /quotas\[0\]\.limit \(line 1, column 15\): must be a number/],
    ["quota per week", `{ "quotas": [ { "per": "week", "limit": 1 } ] }`, /quotas\[0\]\.per \(line 1, column 24\): must be one of task, session, agent, tenant/],
    ["quota sum not a path", `{ "quotas": [ { "per": "task", "limit": 1, "sum": "a..b" } ] }`, /quotas\[0\]\.sum \(line 1, column \d+\): must be a dot path/],
    ["rate window not whole", `{ "rateLimits": [ { "per": "task", "limit": 5, "windowMs": 1.5 } ] }`, /rateLimits\[0\]\.windowMs \(line 1, column \d+\): must be a whole number/],
    ["rate without limit", `{ "rateLimits": [ { "per": "task", "windowMs": 1000 } ] }`, /rateLimits\[0\]\.limit \(line 1, column 19\): must be a number/],
    ["rate per session", `{ "rateLimits": [ { "per": "session", "limit": 1, "windowMs": 1000 } ] }`, /rateLimits\[0\]\.per .*must be one of task, agent, tenant/],
    ["condition operand not a number", `{ "approvals": { "rules": [ { "tool": "charge_card", "when": { "field": "amount", "gt": "100" } } ] } }`, /approvals\.rules\[0\]\.when\.gt \(line 1, column \d+\): must be a finite number/],
    ["condition with two operators", `{ "approvals": { "rules": [ { "when": { "field": "amount", "gt": 1, "lt": 5 } } ] } }`, /approvals\.rules\[0\]\.when \(line 1, column \d+\): a condition needs exactly one operator .*found gt, lt/],
    ["unknown operator", `{ "approvals": { "rules": [ { "when": { "field": "amount", "greater": 1 } } ] } }`, /approvals\.rules\[0\]\.when\.greater .*is not a known operator/],
    ["empty all", `{ "approvals": { "rules": [ { "when": { "all": [] } } ] } }`, /approvals\.rules\[0\]\.when\.all .*must be a non-empty list of conditions/],
    ["nested condition without field", `{ "approvals": { "rules": [ { "when": { "any": [ { "field": "a", "eq": 1 }, { "gt": 3 } ] } } ] } }`, /approvals\.rules\[0\]\.when\.any\[1\]\.field .*must be a dot path into the input/],
    ["ttl zero", `{ "approvals": { "ttlMs": 0 } }`, /approvals\.ttlMs \(line 1, column 27\): must be at least 1/],
    ["nonCompensable not a list", `{ "nonCompensable": "send_email" }`, /nonCompensable \(line 1, column 21\): must be a list of tool names/],
    ["empty version", `{ "version": "" }`, /version \(line 1, column 14\): must not be empty/],
    ["misspelt tool in an approval rule", `{ "approvals": { "rules": [ { "tool": "charge_crad" } ] } }`, /approvals\.rules\[0\]\.tool: there is no tool named "charge_crad" in this gate \(tools: charge_card, delete_account, send_email, lookup_customer\)/],
    ["read tool in a quota", `{ "quotas": [ { "per": "task", "tool": "lookup_customer", "limit": 1 } ] }`, /quotas\[0\]\.tool: lookup_customer is a read tool; reads are never governed/],
    ["unknown tool in a grant", `{ "grants": [ { "tools": ["send_mail"] } ] }`, /grants\[0\]\.tools\[0\]: there is no tool named "send_mail"/],
    ["two quotas with one id", `{ "quotas": [ { "per": "task", "limit": 1 }, { "per": "task", "limit": 2 } ] }`, /quotas\[1\]\.id: two quotas share the id "task\/all\/count"; give one of them its own "id"/],
  ];

  for (const [title, text, expected] of cases) {
    it(`names the field: ${title}`, () => {
      const path = file(text);
      const message = refusal(path);
      expect(message).toMatch(/^EG_BAD_POLICY: the policy \/.*policy-\d+\.json is not valid \(\d+ problems?\); no call was run under it:\n/);
      expect(message).toMatch(expected);
    });
  }

  it("lists every problem of a file at once", () => {
    const message = refusal(file(`{\n  "quotas": [{ "per": "day", "limit": 0 }],\n  "bogus": true\n}`));
    expect(message).toMatch(/\(3 problems\)/);
    expect(message).toMatch(/quotas\[0\]\.per \(line 2, column 23\)/);
    expect(message).toMatch(/quotas\[0\]\.limit \(line 2, column 39\)/);
    expect(message).toMatch(/bogus \(line 3, column 12\): is not a known field/);
  });

  it("a missing file is refused by name", () => {
    expect(refusal(join(dir, "nope.json"))).toMatch(/the policy .*nope\.json is not valid .*\n  - \(file\): cannot read it: the file does not exist/);
  });

  it("a policy object is checked the same way, naming the field", () => {
    expect(refusal({ quotas: [{ per: "task", limit: Number.NaN }] })).toMatch(/the policy policy object is not valid .*\n  - quotas\[0\]\.limit: must be a number/);
    expect(refusal({ approvals: { rules: [{ when: "amount > 100" }] } })).toMatch(/approvals\.rules\[0\]\.when: must be a condition such as/);
  });
});
