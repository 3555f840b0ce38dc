/**
 * Governance across processes: agent workers (child processes importing dist/) on one SQLite
 * ledger, an operator using the built `effectgate` command in other processes. No sleeps:
 * each step waits for the previous process's answer; expiry uses the worker's clock offset.
 */
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { requireBuild, startWorker, type Worker } from "../support/processes.js";
import { runCli } from "../cli/run-cli.js";
import { tempDir } from "../support/tmp.js";

const WORKER = fileURLToPath(new URL("./fixtures/governed-worker.mjs", import.meta.url));
const HOUR = 3_600_000;
const dir = tempDir();
let n = 0;

interface Answer {
  readonly result: { tool_use_id: string; content: string; is_error: boolean };
  readonly approval: string | null;
}

interface Agent {
  call(id: string, name: string, input: unknown, extra?: Record<string, unknown>): Promise<Answer>;
  send(request: Record<string, unknown>): Promise<Answer>;
  stop(): Promise<void>;
}

const running: Worker[] = [];
afterEach(async () => {
  for (const w of running.splice(0)) {
    w.child.stdin.end();
    await w.exited;
  }
});

async function agent(ledger: string, effectsFile: string, options: { clockOffsetMs?: number; policy?: unknown } = {}): Promise<Agent> {
  const w = startWorker(WORKER, [ledger, effectsFile, String(options.clockOffsetMs ?? 0), JSON.stringify(options.policy ?? {})]);
  running.push(w);
  await w.line((l) => l === "ready");
  const send = async (request: Record<string, unknown>) => {
    const answer = w.line((l) => l.startsWith("{"));
    w.child.stdin.write(`${JSON.stringify(request)}\n`);
    return JSON.parse(await answer) as Answer;
  };
  return {
    send,
    call: (id, name, input, extra = {}) => send({ id, name, input, ...extra }),
    async stop() {
      running.splice(running.indexOf(w), 1);
      w.child.stdin.end();
      const exit = await w.exited;
      expect(exit.code, exit.stderr).toBe(0);
    },
  };
}

function setup() {
  const base = join(dir, `case-${n++}`);
  return { ledger: `${base}.db`, effects: `${base}.effects` };
}

const effectsIn = (file: string) => (existsSync(file) ? readFileSync(file, "utf8").trim().split("\n").filter((l) => l !== "") : []);

describe("governance across processes", () => {
  beforeAll(() => requireBuild());

  it("kill switch: set from the CLI in one process, it stops the next call in another; off lets it run", async () => {
    const { ledger, effects } = setup();
    const worker = await agent(ledger, effects);
    expect((await worker.call("e1", "send_email", { to: "a" })).result.is_error).toBe(false);

    const on = await runCli(["kill", "on", "--db", ledger, "--tenant", "acme", "--by", "alice", "--reason", "runaway refunds"]);
    expect(on.code, on.stderr).toBe(0);
    expect(on.stdout).toMatch(/^Kill switch ON for tenant acme \(every agent\) in .*: every write and destructive call there is refused/);
    const stopped = await worker.call("e2", "send_email", { to: "b" });
    expect(stopped.result.content).toMatch(/^EG_KILL_SWITCH: an operator has stopped every write and destructive call for tenant acme with the kill switch \(since .*Z, by alice: runaway refunds\)/);

    const ls = await runCli(["kill", "ls", "--db", ledger]);
    expect(ls.stdout).toMatch(/STOPS\s+SINCE\s+BY\s+REASON\n-+.*\ntenant acme \(every agent\)\s+\S+Z \(.* ago\)\s+alice\s+runaway refunds/);
    expect((await runCli(["kill", "on", "--db", ledger, "--tenant", "acme"])).stdout).toMatch(/was already on/);
    const wrongOff = await runCli(["kill", "off", "--db", ledger, "--tenant", "acmee"]);
    expect(wrongOff.code).toBe(1);
    expect(wrongOff.stderr).toMatch(/no kill switch was on for tenant acmee \(every agent\).*Switches that are on: tenant acme \(every agent\)/);
    expect((await worker.call("e2", "send_email", { to: "b" })).result.content).toMatch(/^EG_KILL_SWITCH/);

    const off = await runCli(["kill", "off", "--db", ledger, "--tenant", "acme"]);
    expect(off.code, off.stderr).toBe(0);
    expect((await worker.call("e2", "send_email", { to: "b" })).result.is_error).toBe(false);

    // A global switch for one agent name stops it in every tenant.
    expect((await runCli(["kill", "on", "--db", ledger, "--agent", "support-bot"])).code).toBe(0);
    expect((await worker.call("e3", "send_email", { to: "c" })).result.content).toMatch(/^EG_KILL_SWITCH: .*for agent support-bot/);
    await worker.stop();
    expect(effectsIn(effects)).toEqual(["send_email e1 a", "send_email e2 b"]);
  });

  it("approval end to end: request → pending → approved with the CLI → executed once; replays neither run nor ask again; the run suspends and resumes in a new process", async () => {
    const { ledger, effects } = setup();
    const checkpoint = join(dir, `run-${n}.json`);
    const first = await agent(ledger, effects);
    const asked = await first.call("toolu_del", "delete_account", { account: "acc_42" }, { checkpoint });
    expect(asked.result.content).toMatch(/^EG_AWAITING_APPROVAL: this delete_account call needs a person's approval/);
    const id = asked.approval!;
    expect(id).toMatch(/^apr_/);
    await first.stop(); // the run suspends: its checkpoint holds the pending tool_use

    const ls = await runCli(["approvals", "ls", "--db", ledger]);
    expect(ls.code, ls.stderr).toBe(0);
    expect(ls.stdout).toMatch(new RegExp(`${id}\\s+pending\\s+acme\\s+delete_account\\s+.* ago\\s+in \\S+\\s+would_delete \\{"account":"acc_42"\\} \\(irreversible\\)`));
    const show = await runCli(["approvals", "show", id, "--db", ledger]);
    expect(show.stdout).toMatch(/state\s+pending[\s\S]*requested\s+\S+Z \(.*\) by support-bot \(worker [\s\S]*Why it needs approval:\n\s+- destructive tool: every call needs approval[\s\S]*Dry run \(what it would do\):\n\s+would_delete, irreversible/);

    const approve = await runCli(["approvals", "approve", id, "--db", ledger, "--by", "alice", "--note", "customer asked twice"]);
    expect(approve.code, approve.stderr).toBe(0);
    expect(approve.stdout).toMatch(new RegExp(`^Approved ${id} \\(delete_account in tenant acme, task t1\\) by alice\\. The call runs once`));
    const twice = await runCli(["approvals", "deny", id, "--db", ledger]);
    expect(twice.code).toBe(1);
    expect(twice.stderr).toMatch(/is already approved \(by alice at .*Z\); a decision is made once/);

    // A new process resumes the run from its checkpoint: the pending call runs now, once.
    const second = await agent(ledger, effects);
    const resumed = await second.send({ resume: checkpoint });
    expect(resumed.result).toEqual({ type: "tool_result", tool_use_id: "toolu_del", content: '{"deleted":"acc_42"}', is_error: false });
    for (let i = 0; i < 2; i++) expect((await second.call("toolu_del", "delete_account", { account: "acc_42" })).result).toEqual(resumed.result);
    await second.stop();
    expect(effectsIn(effects)).toEqual(["delete_account toolu_del acc_42"]);

    const all = JSON.parse((await runCli(["approvals", "ls", "--all", "--json", "--db", ledger])).stdout) as { id: string; state: string; decidedBy: string; note: string }[];
    expect(all.map((a) => [a.id, a.state, a.decidedBy, a.note])).toEqual([[id, "consumed", "alice", "customer asked twice"]]);
  });

  it("denied with the CLI: never executed, and the agent is told", async () => {
    const { ledger, effects } = setup();
    const worker = await agent(ledger, effects);
    const { approval } = await worker.call("toolu_del", "delete_account", { account: "acc_1" });
    const deny = await runCli(["approvals", "deny", approval!, "--db", ledger, "--by", "bob", "--note", "wrong account"]);
    expect(deny.code, deny.stderr).toBe(0);
    expect(deny.stdout).toMatch(/^Denied apr_\w+ \(delete_account in tenant acme, task t1\) by bob\. The call will never run/);
    expect((await worker.call("toolu_del", "delete_account", { account: "acc_1" })).result.content)
      .toBe(`EG_APPROVAL_DENIED: bob denied this delete_account call (approval ${approval!}: wrong account). It was not executed and will not be. Do not retry it; tell the user.`);
    await worker.stop();
    expect(effectsIn(effects)).toEqual([]);
  });

  it("expired: a request past its time can no longer be approved and never executes", async () => {
    const { ledger, effects } = setup();
    const policy = { approvals: { ttlMs: HOUR } };
    // Filed by a worker whose clock runs two hours behind: by the operator's clock it expired an hour ago.
    const behind = await agent(ledger, effects, { clockOffsetMs: -2 * HOUR, policy });
    const { approval } = await behind.call("toolu_del", "delete_account", { account: "acc_1" });
    await behind.stop();
    const approve = await runCli(["approvals", "approve", approval!, "--db", ledger]);
    expect(approve.code).toBe(1);
    expect(approve.stderr).toMatch(new RegExp(`approval request ${approval!} expired at .*Z before anyone decided; it is now expired and its call will never run under it`));
    const worker = await agent(ledger, effects, { policy });
    expect((await worker.call("toolu_del", "delete_account", { account: "acc_1" })).result.content).toMatch(/^EG_APPROVAL_EXPIRED: this delete_account call was not executed: nobody decided/);
    await worker.stop();
    expect(effectsIn(effects)).toEqual([]);
    expect((await runCli(["approvals", "ls", "--state", "expired", "--db", ledger])).stdout).toMatch(new RegExp(`${approval!}\\s+expired`));
  });

  it("approving one request with the CLI cannot release a call with different arguments", async () => {
    const { ledger, effects } = setup();
    const worker = await agent(ledger, effects);
    const small = await worker.call("toolu_a", "delete_account", { account: "acc_test" });
    const big = await worker.call("toolu_b", "delete_account", { account: "acc_everything" });
    expect((await runCli(["approvals", "approve", small.approval!, "--db", ledger])).code).toBe(0);
    // The other call, and the approved call's id with other arguments, still wait.
    expect((await worker.call("toolu_b", "delete_account", { account: "acc_everything" })).approval).toBe(big.approval);
    const swapped = await worker.call("toolu_a", "delete_account", { account: "acc_everything" });
    expect(swapped.result.content).toMatch(/^EG_AWAITING_APPROVAL/);
    expect(swapped.approval).not.toBe(small.approval);
    expect((await worker.call("toolu_a", "delete_account", { account: "acc_test" })).result.content).toBe('{"deleted":"acc_test"}');
    await worker.stop();
    expect(effectsIn(effects)).toEqual(["delete_account toolu_a acc_test"]);
  });

  it("rate breaker: the CLI lists the open breaker and closing it lets the worker's calls run again", async () => {
    const { ledger, effects } = setup();
    const worker = await agent(ledger, effects, { policy: { rateLimits: [{ per: "task", class: "write", limit: 2, windowMs: HOUR }] } });
    expect((await worker.call("e1", "send_email", { to: "a" })).result.is_error).toBe(false);
    expect((await worker.call("e2", "send_email", { to: "b" })).result.is_error).toBe(false);
    expect((await worker.call("e3", "send_email", { to: "c" })).result.content).toMatch(/^EG_BREAKER_OPEN/);
    const ls = await runCli(["breaker", "ls", "--db", ledger]);
    expect(ls.stdout).toMatch(/task\/write\/3600000ms@task:acme\/t1\s+open\s+\S+Z \(.* ago\)\s+more than 2 calls within 3600000 ms\s+-/);
    const close = await runCli(["breaker", "close", "task/write/3600000ms@task:acme/t1", "--db", ledger, "--by", "alice"]);
    expect(close.code, close.stderr).toBe(0);
    expect(close.stdout).toMatch(/^Closed rate breaker task\/write\/3600000ms@task:acme\/t1 \(by alice\); its window was reset/);
    expect((await runCli(["breaker", "close", "task/write/3600000ms@task:acme/t1", "--db", ledger])).code).toBe(1);
    expect((await worker.call("e3", "send_email", { to: "c" })).result.is_error).toBe(false);
    await worker.stop();
    expect(effectsIn(effects)).toHaveLength(3);
    expect((await runCli(["breaker", "ls", "--all", "--json", "--db", ledger])).stdout).toMatch(/"closedBy": "alice"/);
  });

  it("operator commands never create a ledger for a mistyped path, and --help explains each command", async () => {
    const missing = join(dir, "no-such.db");
    for (const args of [["kill", "on"], ["kill", "ls"], ["approvals", "approve", "apr_x"], ["breaker", "ls"]]) {
      const run = await runCli([...args, "--db", missing]);
      expect(run.code).toBe(2);
      expect(run.stderr).toMatch(/there is no ledger at .*no-such\.db .*nothing was created/);
    }
    expect(existsSync(missing)).toBe(false);
    expect((await runCli(["kill", "--help"])).stdout).toMatch(/Every worker checks it before each write or\ndestructive call/);
    expect((await runCli(["approvals", "--help"])).stdout).toMatch(/States: pending \(waiting for a decision\)/);
    expect((await runCli(["breaker", "--help"])).stdout).toMatch(/Breaker ids are RULE@SCOPE/);
    expect((await runCli(["--help"])).stdout).toMatch(/\n  kill\s+the kill switch: stop every write and destructive call/);
  });
});
