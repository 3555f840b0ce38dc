/** `effectgate mcp` as a command: its help, and the usage errors it refuses before starting anything. */
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { runCli } from "../cli/run-cli.js";
import { requireBuild } from "../support/processes.js";
import { tempDir } from "../support/tmp.js";

requireBuild();
// Real processes on a shared 2-core machine: a slow start is load, not a failure (no assertion is on time).
const PROCESS_TEST_TIMEOUT_MS = 120_000;

describe("effectgate mcp (the command)", { timeout: PROCESS_TEST_TIMEOUT_MS }, () => {
  it("--help explains the gateway, the host configuration and where the reference is", async () => {
    const run = await runCli(["mcp", "--help"]);
    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(/Usage: effectgate mcp \[options\] -- <upstream command> \[args\.\.\.\]/);
    for (const part of ["--config <path>", "--listen <host:port>", "--upstream-url <url>", "--upstream-id <id>", "--session-idle-ms <ms>", "--max-sessions <n>", "--headers-timeout-ms <ms>", "--max-connections <n>", "--pg <url>", "mcpServers", "io.effectgate/idempotency-key", "docs/mcp.md"]) {
      expect(run.stdout).toContain(part);
    }
    expect((await runCli(["--help"])).stdout).toMatch(/\n {2}mcp \[options\] +an MCP gateway/);
  });

  it("refuses, before starting anything, a missing upstream, two upstreams, a bad --listen and a wrong config", async () => {
    const dir = tempDir();
    const db = join(dir, "ledger.db");
    const none = await runCli(["mcp", "--db", db], { cwd: dir });
    expect([none.code, none.stderr]).toEqual([2, expect.stringMatching(/^effectgate: no upstream MCP server: effectgate mcp -- <command>/)]);
    const both = await runCli(["mcp", "--db", db, "--upstream-url", "http://127.0.0.1:1/mcp", "--", "node", "x.js"], { cwd: dir });
    expect([both.code, both.stderr]).toEqual([2, expect.stringMatching(/not both/)]);
    const listen = await runCli(["mcp", "--db", db, "--listen", "localhost", "--", "node", "x.js"], { cwd: dir });
    expect([listen.code, listen.stderr]).toEqual([2, expect.stringMatching(/--listen "localhost" must be host:port/)]);
    const config = join(dir, "effectgate.mcp.json");
    writeFileSync(config, JSON.stringify({ tools: { send_email: { effect: "sometimes" } } }));
    const bad = await runCli(["mcp", "--db", db, "--config", config, "--", "node", "x.js"], { cwd: dir });
    expect([bad.code, bad.stderr]).toEqual([1, expect.stringMatching(/^effectgate: EG_BAD_OPTION: the MCP gateway config .* tools\.send_email\.effect: must be one of read, write, destructive/)]);
  });
});
