/** Alerts go to an injected pino-compatible logger (logger.error(obj, msg)) when the gate is given one and no onAlert. */
import { describe, expect, it } from "vitest";
import type { Logger } from "../../src/core/logger.js";
import { createGate } from "../../src/root/create-gate.js";
import { memoryLedger } from "../../src/stores/memory/index.js";
import { deleteAccountTool, effects, use } from "../governance/support.js";

function recordingLogger() {
  const lines: { level: string; obj: object; msg: string | undefined }[] = [];
  const at = (level: string) => (obj: object, msg?: string) => void lines.push({ level, obj, msg });
  const logger: Logger = { error: at("error"), warn: at("warn"), info: at("info") };
  return { logger, lines };
}

describe("the gate's logger", () => {
  it("gets each alert at error level, with the alert's fields and its message, and without its cause", async () => {
    const { logger, lines } = recordingLogger();
    const gate = createGate({ tools: [deleteAccountTool(effects())], ledger: memoryLedger(), logger });
    await gate.runToolUses([use("toolu_d", "delete_account", { account: "a1" })], { tenant: "acme", task: "t1" });
    await gate.close();
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ level: "error", obj: { source: "effectgate", alert: { code: "approval_requested", tenant: "acme", key: "toolu_d", tool: "delete_account" } } });
    expect(lines[0]?.msg).toMatch(/^delete_account call toolu_d waits for approval apr_/);
    expect(JSON.stringify(lines[0]?.obj)).not.toContain("cause");
  });
});
