/** The gateway's pure parts: classes from annotations, the config file, probe mapping, derived keys and their dedupe window. */
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { memoryLedger } from "../../src/stores/memory/index.js";
import { classifyTool } from "../../src/mcp/classify.js";
import { loadMcpConfig, parseMcpConfig } from "../../src/mcp/config.js";
import { derivedKey, toolUseIdFromMeta } from "../../src/mcp/keys.js";
import { probeAnswer, probeArguments } from "../../src/mcp/probe-map.js";
import { gateNameOf } from "../../src/mcp/gated-tools.js";
import { tempDir } from "../support/tmp.js";

describe("effect classes from annotations", () => {
  it("readOnlyHint → read, destructiveHint false → write, anything else (no annotations too) → destructive", () => {
    expect(classifyTool({ readOnlyHint: true }, undefined).effect).toBe("read");
    expect(classifyTool({ destructiveHint: false }, undefined).effect).toBe("write");
    expect(classifyTool({ destructiveHint: true }, undefined).effect).toBe("destructive");
    expect(classifyTool({}, undefined).effect).toBe("destructive");
    expect(classifyTool(undefined, undefined)).toEqual({ effect: "destructive", idempotent: false, from: "annotations" });
    expect(classifyTool({ destructiveHint: false, idempotentHint: true }, undefined).idempotent).toBe(true);
  });

  it("the config overrides the hints of an untrusted server", () => {
    expect(classifyTool({ readOnlyHint: true }, { effect: "destructive" })).toEqual({ effect: "destructive", idempotent: false, from: "config" });
    expect(classifyTool({ idempotentHint: true }, { idempotent: false }).idempotent).toBe(false);
  });
});

describe("the config file", () => {
  it("names every wrong field, and refuses a probe on a read tool", () => {
    const bad = () => parseMcpConfig({ tools: { a: { effect: "maybe" } }, keys: { dedupeWindowMs: -1 }, extra: 1 }, "test.json");
    expect(bad).toThrow(/^EG_BAD_OPTION: the MCP gateway config test\.json is not valid: .*Nothing was started\.$/);
    expect(bad).toThrow(/tools\.a\.effect: must be one of read, write, destructive/);
    expect(bad).toThrow(/keys\.dedupeWindowMs: must be 0 or more/);
    expect(bad).toThrow(/Unrecognized key: "extra"/);
    expect(() => parseMcpConfig({ tools: { a: { effect: "read", probe: { tool: "p", done: [1], absent: [2] } } } }, "t"))
      .toThrow(/tools\.a is a read tool and has a probe/);
  });

  it("resolves a policy path against the config file's folder, and says when the file is missing or not JSON", () => {
    const dir = tempDir();
    const file = join(dir, "effectgate.mcp.json");
    writeFileSync(file, JSON.stringify({ policy: "policy.json", task: "inbox" }));
    expect(loadMcpConfig(file)).toEqual({ policy: join(dir, "policy.json"), task: "inbox" });
    writeFileSync(file, "{ nope");
    expect(() => loadMcpConfig(file)).toThrow(/is not valid JSON/);
    expect(() => loadMcpConfig(join(dir, "missing.json"))).toThrow(/the file does not exist/);
  });
});

describe("probe mapping", () => {
  const probe = { tool: "find", arguments: { key: "${key}", n: "${arguments.order.id}", fixed: "x", fence: "${fence}" }, done: ["found"], absent: ["missing"], running: ["queued"] };

  it("fills the key, fence and argument placeholders, and sends anything else as written", () => {
    expect(probeArguments(probe, { key: "k1", fence: 3, arguments: { order: { id: 7 } } })).toEqual({ key: "k1", n: 7, fixed: "x", fence: 3 });
    expect(probeArguments({ ...probe, arguments: undefined }, { key: "k", fence: 1, arguments: {} })).toEqual({ key: "k" });
  });

  it("maps the status to done (with the probe tool's result), absent, running; anything else is an error of the probe", () => {
    const found = { content: [], structuredContent: { status: "found", id: "T-1" } };
    expect(probeAnswer(probe, found)).toEqual({ status: "done", result: found });
    expect(probeAnswer(probe, { structuredContent: { status: "missing" } })).toEqual({ status: "absent" });
    expect(probeAnswer(probe, { structuredContent: { status: "queued" } })).toEqual({ status: "running" });
    expect(() => probeAnswer(probe, { structuredContent: { status: "?" } })).toThrow(/answered "\?" at structuredContent\.status/);
    expect(() => probeAnswer(probe, { isError: true })).toThrow(/answered with an error/);
    expect(probeAnswer({ ...probe, status: "content.0.text", done: ["yes"] }, { content: [{ type: "text", text: "yes" }] }).status).toBe("done");
  });
});

describe("keys", () => {
  it("takes the first configured _meta field the host filled, never anything else", () => {
    expect(toolUseIdFromMeta({ progressToken: 1, toolUseId: "toolu_1" }, ["claudecode/toolUseId", "toolUseId"])).toBe("toolu_1");
    expect(toolUseIdFromMeta({ "claudecode/toolUseId": "a", toolUseId: "b" }, ["claudecode/toolUseId", "toolUseId"])).toBe("a");
    expect(toolUseIdFromMeta({ toolUseId: "" }, ["toolUseId"])).toBeUndefined();
    expect(toolUseIdFromMeta(undefined, ["toolUseId"])).toBeUndefined();
  });

  it("a derived key passes to a new generation only once the earlier one is settled at least the window ago, on the ledger's clock", async () => {
    let storeNow = 1_000_000;
    const ledger = memoryLedger({ clock: () => storeNow });
    const scope = { tenant: "t", task: "mcp" };
    const first = await derivedKey(ledger.calls, "up", scope, "send", { a: 1 }, 1000);
    expect(first).toMatch(/^mcp:up:t:mcp:send:[0-9a-f]{64}$/);
    const claim = (key: string) => ledger.calls.claim({
      tenant: "t", key, tool: "send", effect: "write", task: "mcp", toolUseId: key, fingerprint: "f", input: {}, inputRedacted: false, owner: "o", leaseMs: 60_000,
    });
    const { record } = await claim(first);
    // Unsettled: the same key, however old (a repeat must never start a second run beside the first).
    storeNow += 10_000;
    expect(await derivedKey(ledger.calls, "up", scope, "send", { a: 1 }, 0)).toBe(first);
    await ledger.calls.update("t", first, record.version, { state: "completed", result: "ok", owner: null });
    // Settled just now: within any window, however long ago it was created.
    expect(await derivedKey(ledger.calls, "up", scope, "send", { a: 1 }, 1000)).toBe(first);
    storeNow += 1000;
    expect(await derivedKey(ledger.calls, "up", scope, "send", { a: 1 }, 1000)).toBe(`${first}~1`);
    expect(await derivedKey(ledger.calls, "up", scope, "send", { a: 2 }, 0)).not.toMatch(/^.*~1$/);
  });

  it("an MCP tool name the gate does not accept gets a stable gate name", () => {
    expect(gateNameOf("create_ticket")).toBe("create_ticket");
    expect(gateNameOf("github.create_issue")).toMatch(/^github_create_issue_[0-9a-f]{8}$/);
    expect(gateNameOf("github.create_issue")).toBe(gateNameOf("github.create_issue"));
  });
});
