import { mkdirSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { tempDir } from "../support/tmp.js";
import { runCli } from "./run-cli.js";

interface Scenario {
  name: string;
  ticketsCreated: number;
  duplicates: number;
  resultTicketId: string | null;
}

describe("effectgate demo crash", () => {
  const dir = tempDir("effectgate-cli-demo-");

  it("--json: the naive ways create a duplicate ticket, effectgate creates exactly one and hands its id to the agent", async () => {
    // The demo's temp files go to os.tmpdir(): point it at a directory of our own to check they are removed.
    const tmp = join(dir, "tmp-json");
    mkdirSync(tmp);
    const { code, stdout, stderr } = await runCli(["demo", "crash", "--json"], { env: { TMPDIR: tmp } });
    expect(stderr).toBe("");
    expect(code).toBe(0);
    const { scenarios } = JSON.parse(stdout) as { scenarios: Scenario[] };
    expect(scenarios.map((s) => s.name)).toEqual(["no-ledger", "ledger-after-execution", "effectgate"]);
    const [noLedger, afterExecution, gated] = scenarios;
    // Each way's service started empty; the crashed run made T-1, the resumed run made T-2.
    expect(noLedger).toEqual({ name: "no-ledger", ticketsCreated: 2, duplicates: 1, resultTicketId: "T-2" });
    expect(afterExecution).toEqual({ name: "ledger-after-execution", ticketsCreated: 2, duplicates: 1, resultTicketId: "T-2" });
    // The crashed run's ticket is the only one, and the resumed agent got it.
    expect(gated).toEqual({ name: "effectgate", ticketsCreated: 1, duplicates: 0, resultTicketId: "T-1" });
    expect(readdirSync(tmp)).toEqual([]);
  });

  it("prints a table of way | tickets created | duplicates | agent got", async () => {
    const tmp = join(dir, "tmp-table");
    mkdirSync(tmp);
    const { code, stdout } = await runCli(["demo", "crash"], { env: { TMPDIR: tmp } });
    expect(code).toBe(0);
    expect(stdout).toMatch(/^way\s+tickets created\s+duplicates\s+agent got$/m);
    expect(stdout).toMatch(/^no ledger \(checkpoint only\)\s+2\s+1\s+T-2$/m);
    expect(stdout).toMatch(/^ledger written after execution\s+2\s+1\s+T-2$/m);
    expect(stdout).toMatch(/^effectgate\s+1\s+0\s+T-1$/m);
    expect(readdirSync(tmp)).toEqual([]);
  });
});
