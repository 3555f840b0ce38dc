/** `effectgate serve`: loopback by default, a token made once with mode 0600 and printed once, refusals by name. */
import { chmodSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { runCli } from "../cli/run-cli.js";
import { createGate } from "../../src/root/create-gate.js";
import { sqliteLedger } from "../../src/stores/sqlite/index.js";
import { deleteAccountTool, effects, use } from "../governance/support.js";
import { requireBuild } from "../support/processes.js";
import { tempDir } from "../support/tmp.js";
import { DEFAULT_SERVER_LIMITS } from "../../src/core/local-server.js";
import { DEFAULT_MAX_EVENT_STREAMS } from "../../src/root/console/server.js";
import { once, rawRequest, RawConnection } from "../server/raw-http.js";
import { serve } from "./served.js";
import { call } from "./support.js";

const dir = tempDir();
let n = 0;

async function newLedger(): Promise<string> {
  const db = join(dir, `serve-${n++}`, "ledger.db");
  const made = await runCli(["migrate", "--db", db]);
  expect(made.code, made.stderr).toBe(0);
  return db;
}

describe("effectgate serve", () => {
  beforeAll(() => requireBuild());

  it("first start: makes a token beside the ledger with mode 0600 and prints it once, in the link; later starts do not print it", async () => {
    const db = await newLedger();
    const first = await serve(["--db", db]);
    expect(first.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/$/);
    const file = join(db, "..", "console-token");
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(first.token).toBe(readFileSync(file, "utf8").trim());
    expect((await call(first.url, first.token, "GET", "/api/overview")).status).toBe(200);
    expect((await call(first.url, undefined, "GET", "/api/overview")).status).toBe(401);
    // prom-client is installed here, so /metrics serves the ledger's gauges, behind the same token.
    expect((await call(first.url, undefined, "GET", "/metrics")).status).toBe(401);
    const metrics = await call(first.url, first.token, "GET", "/metrics");
    expect(metrics.headers.get("content-type")).toMatch(/^text\/plain/);
    expect(String(metrics.body)).toMatch(/^effectgate_approvals_pending 0$/m);
    expect(String(metrics.body)).toMatch(/^effectgate_queue_size 0$/m);
    const firstExit = await first.stop();
    expect(firstExit.code, firstExit.stderr).toBe(0);
    expect(firstExit.stdout.split(first.token!).length - 1).toBe(1);

    const second = await serve(["--db", db]);
    expect(second.token).toBeUndefined();
    const secondExit = await second.stop();
    expect(secondExit.code).toBe(0);
    expect(secondExit.stdout).toMatch(/Token: the one in .*console-token/);
    expect(secondExit.stdout).not.toContain(first.token);
  });

  it("refuses an address other machines can reach without --allow-remote (usage error, exit 2)", async () => {
    const db = await newLedger();
    const refused = await runCli(["serve", "--db", db, "--host", "0.0.0.0", "--port", "0"]);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toMatch(/refusing to serve the console on 0\.0\.0\.0: it would be reachable from other machines.*--allow-remote/);
  });

  it("refuses a token file other users can read, and a missing ledger", async () => {
    const db = await newLedger();
    const tokenFile = join(dir, `open-token-${n}`);
    const first = await serve(["--db", db, "--token-file", tokenFile]);
    await first.stop();
    chmodSync(tokenFile, 0o644);
    const refused = await runCli(["serve", "--db", db, "--token-file", tokenFile, "--port", "0"]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/can be read by other users \(mode 644\).*chmod 600/);
    const missing = await runCli(["serve", "--db", join(dir, "nope.db"), "--port", "0"]);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(/there is no ledger at .*nope\.db/);
  });

  it("the CLI and the API show the same records: an approval decided through the API is what `approvals show --json` prints", async () => {
    const db = await newLedger();
    const ledger = sqliteLedger(db);
    const gate = createGate({ tools: [deleteAccountTool(effects())], ledger, onAlert: () => {} });
    const [asked] = await gate.runToolUses([use("toolu_d", "delete_account", { account: "acc_3" })], { tenant: "acme", task: "t1" });
    await gate.close();
    await ledger.close();
    const id = /apr_\w+/.exec(asked!.content)![0];
    const served = await serve(["--db", db]);
    try {
      const decided = await call(served.url, served.token, "POST", `/api/approvals/${id}/approve`, { note: "ok by phone", by: "alice" });
      expect(decided.status).toBe(200);
      const shown = await runCli(["approvals", "show", id, "--json", "--db", db]);
      expect(shown.code, shown.stderr).toBe(0);
      expect(JSON.parse(shown.stdout)).toEqual((decided.body as { approval: unknown }).approval);
      const listed = await runCli(["approvals", "ls", "--all", "--json", "--db", db]);
      expect(JSON.parse(listed.stdout)).toEqual(((await call(served.url, served.token, "GET", "/api/approvals?state=all")).body as { approvals: unknown }).approvals);
    } finally {
      await served.stop();
    }
  });

  it("--help says how it is secured, and names each limit with its default", async () => {
    const help = await runCli(["serve", "--help"]);
    expect(help.code).toBe(0);
    expect(help.stdout).toMatch(/binds 127\.0\.0\.1[\s\S]*--allow-remote[\s\S]*mode 0600/);
    const flat = help.stdout.replace(/\s+/g, " ");
    for (const [flag, fallback] of [
      ["--headers-timeout-ms <ms>", DEFAULT_SERVER_LIMITS.headersTimeoutMs], ["--request-timeout-ms <ms>", DEFAULT_SERVER_LIMITS.requestTimeoutMs],
      ["--keep-alive-timeout-ms <ms>", DEFAULT_SERVER_LIMITS.keepAliveTimeoutMs], ["--max-connections <n>", DEFAULT_SERVER_LIMITS.maxConnections],
      ["--max-event-streams <n>", DEFAULT_MAX_EVENT_STREAMS],
    ] as const) {
      // The flags hold no regular-expression characters but the escaped parentheses.
      expect(flat).toMatch(new RegExp(`${flag} [^(]*\\(default: ${fallback}\\)`));
    }
  });

  it("takes its limits from the flags: a client slower than --headers-timeout-ms gets 408, a stream past --max-event-streams 503", async () => {
    const db = await newLedger();
    const served = await serve(["--db", db, "--headers-timeout-ms", "150", "--request-timeout-ms", "300", "--max-event-streams", "1"]);
    try {
      const slow = await RawConnection.open(served.url);
      await slow.send("GET /api/overview HTTP/1.1\r\nHost: 127.0.0.1\r\n");
      const timedOut = await slow.next();
      expect(timedOut !== "closed" && timedOut.status).toBe(408);
      await slow.closedWithin(1_000);

      const auth = `Authorization: Bearer ${served.token}`;
      const first = await RawConnection.open(served.url);
      await first.send(rawRequest("GET", "/api/events", ["Host: 127.0.0.1", auth]));
      await new Promise<void>((resolve) => first.socket.on("data", (chunk: Buffer) => chunk.toString().includes("event: ready") && resolve()));
      const second = await once(served.url, rawRequest("GET", "/api/events", ["Host: 127.0.0.1", auth]));
      expect(second !== "closed" && [second.status, second.headers["retry-after"]]).toEqual([503, "5"]);
      first.destroy();
    } finally {
      const exit = await served.stop();
      expect(exit.code, exit.stderr).toBe(0);
    }
  });
});
