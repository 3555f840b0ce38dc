/** Sandboxed tools: execute runs in a child process under Node's permission model (fixture tools import dist/). */
import { mkdirSync, rmSync, writeFileSync, existsSync, readFileSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { defineTool } from "../../src/core/tool.js";
import { createGate } from "../../src/root/create-gate.js";
import { memoryLedger } from "../../src/stores/memory/index.js";
import { requireBuild } from "../support/processes.js";

const scope = { tenant: "acme", task: "t1" };
const use = (id: string, name: string, input: unknown) => ({ type: "tool_use", id, name, input });
const FIXTURE = new URL("./fixtures/sandboxed-tools.mjs", import.meta.url).href;
type FixtureTool = object;
interface Fixture {
  SANDBOX_BASE: string;
  ALLOWED: string;
  readFileTool: FixtureTool; writeFileTool: FixtureTool; runCommandTool: FixtureTool; spinTool: FixtureTool;
  hogTool: FixtureTool; envTool: FixtureTool; declineTool: FixtureTool; misnamedTool: FixtureTool;
}
let fixture: Fixture;

describe("sandboxed tools", () => {
  beforeAll(async () => {
    requireBuild();
    fixture = (await import(FIXTURE)) as Fixture;
    rmSync(fixture.SANDBOX_BASE, { recursive: true, force: true });
    mkdirSync(fixture.ALLOWED, { recursive: true });
    writeFileSync(`${fixture.ALLOWED}/report.txt`, "quarterly numbers");
    writeFileSync(`${fixture.SANDBOX_BASE}/secret.txt`, "the root password");
  });
  afterAll(() => rmSync(fixture.SANDBOX_BASE, { recursive: true, force: true }));

  const gateWith = (...tools: unknown[]) =>
    createGate({ ledger: memoryLedger(), tools: tools as never[], onAlert: () => {}, probe: { attempts: 1, initialDelayMs: 1, maxDelayMs: 1 } });

  it("reads inside its grant; reading a file outside it fails with a clear error naming the file and the grant", async () => {
    const gate = gateWith(fixture.readFileTool);
    const [inside, outside] = await gate.runToolUses([
      use("r1", "read_file", { path: `${fixture.ALLOWED}/report.txt` }),
      use("r2", "read_file", { path: `${fixture.SANDBOX_BASE}/secret.txt` }),
    ], scope);
    expect(inside).toMatchObject({ is_error: false, content: '{"text":"quarterly numbers"}' });
    expect(outside!.is_error).toBe(true);
    expect(outside!.content).toMatch(/^EG_TOOL_FAILED: read_file failed: EG_SANDBOX_DENIED: sandboxed tool read_file tried to read /);
    expect(outside!.content).toContain("/tmp/effectgate-sandbox-fixture/secret.txt and was refused");
    expect(outside!.content).toMatch(/\(it may read .*, \/tmp\/effectgate-sandbox-fixture\/allowed\)\. The call failed there; add the path to its sandbox grant if the access is intended\.$/);
    expect(outside!.content).not.toContain("the root password");
  });

  it("writes only inside allowWrite: a write elsewhere is refused and recorded as failed", async () => {
    const gate = gateWith(fixture.writeFileTool);
    const [ok, denied] = await gate.runToolUses([
      use("w1", "write_file", { path: `${fixture.ALLOWED}/out.txt`, text: "hello" }),
      use("w2", "write_file", { path: `${fixture.SANDBOX_BASE}/escape.txt`, text: "pwned" }),
    ], scope);
    expect(ok!.is_error).toBe(false);
    expect(readFileSync(`${fixture.ALLOWED}/out.txt`, "utf8")).toBe("hello");
    expect(denied!.content).toMatch(/EG_SANDBOX_DENIED: sandboxed tool write_file tried to write \/tmp\/effectgate-sandbox-fixture\/escape\.txt and was refused \(it may write \/tmp\/effectgate-sandbox-fixture\/allowed\)\./);
    expect(existsSync(`${fixture.SANDBOX_BASE}/escape.txt`)).toBe(false);
    expect((await gate.ledger.calls.get("acme", "w2"))?.state).toBe("failed");
  });

  it("cannot start child processes", async () => {
    const [r] = await gateWith(fixture.runCommandTool).runToolUses([use("c1", "run_command", { command: "id" })], scope);
    expect(r!.content).toBe("EG_SANDBOX_DENIED: sandboxed tool run_command tried to start a child process and was refused (sandboxed tools may start no processes or workers). The call failed there.");
  });

  it("a tool that runs past its sandbox timeout is killed; its outcome is unknown, so it goes to a person (no probe)", async () => {
    const [r] = await gateWith(fixture.spinTool).runToolUses([use("s1", "spin", {})], scope);
    expect(r!.content).toMatch(/^EG_NEEDS_HUMAN: the outcome of this spin call is unknown \(sandboxed spin did not finish: it was killed after 1000 ms \(its sandbox timeout\); whether it did anything first is unknown/);
  });

  it("a tool that passes its memory cap is stopped, with the cap named", async () => {
    const [r] = await gateWith(fixture.hogTool).runToolUses([use("h1", "hog", {})], scope);
    expect(r!.content).toMatch(/^EG_NEEDS_HUMAN: .*sandboxed hog did not finish: it ran out of its 32 MB memory cap/);
  });

  it("sees only the environment variables it lists, and gets the call's context", async () => {
    process.env.EG_SANDBOX_VISIBLE = "yes";
    process.env.EG_SANDBOX_SECRET = "no";
    try {
      const [r] = await gateWith(fixture.envTool).runToolUses([use("toolu_env", "show_env", {})], scope);
      const out = JSON.parse(r!.content) as { env: string[]; key: string; tenant: string; attempt: number; pid: number };
      expect(out.env).not.toContain("EG_SANDBOX_SECRET");
      expect(out.env).toContain("EG_SANDBOX_VISIBLE");
      expect(out).toMatchObject({ key: "toolu_env", tenant: "acme", attempt: 1 });
      expect(out.pid).not.toBe(process.pid);
    } finally {
      delete process.env.EG_SANDBOX_VISIBLE;
      delete process.env.EG_SANDBOX_SECRET;
    }
  });

  it("the tool's own errors keep their meaning (a rejection is a definite failure); a wrong export is named", async () => {
    const gate = gateWith(fixture.declineTool, fixture.misnamedTool);
    const [declined, misnamed] = await gate.runToolUses([use("d1", "charge_declined", {}), use("m1", "misnamed", {})], scope);
    expect(declined!.content).toBe("EG_TOOL_FAILED: charge_declined failed: card declined");
    expect(misnamed!.content).toMatch(/EG_TOOL_FAILED: misnamed failed: the module file:.*sandboxed-tools\.mjs has no export "noSuchExport" holding the tool misnamed/);
  });

  it("defineTool checks the sandbox spec", () => {
    const base = { name: "x", effect: "write" as const, input: z.object({}), execute: () => 1 };
    expect(() => defineTool({ ...base, sandbox: { module: "./relative.js" } })).toThrow(/sandbox\.module must be the file URL \(import\.meta\.url\) or absolute path/);
    expect(() => defineTool({ ...base, sandbox: { module: import.meta.url, allowRead: ["relative/dir"] } })).toThrow(/sandbox\.allowRead must be a list of absolute paths/);
    expect(() => defineTool({ ...base, sandbox: { module: import.meta.url, memoryMb: 4 } })).toThrow(/sandbox\.memoryMb must be a whole number of megabytes, at least 16/);
  });
});
