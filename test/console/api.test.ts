/**
 * The console's JSON API on a real SQLite ledger, over real HTTP on 127.0.0.1, next to a real gate
 * whose tools count what they did. Each decision made through the API is checked where it
 * matters: in what the tools executed.
 */
import { request } from "node:http";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { createGate, type Gate } from "../../src/root/create-gate.js";
import { startConsole, type ConsoleServer } from "../../src/root/console/server.js";
import { silentLogger } from "../../src/core/logger.js";
import { sqliteLedger } from "../../src/stores/sqlite/index.js";
import type { Stores } from "../../src/contracts/stores.js";
import { deleteAccountTool, effects, emailTool, use, type Effects } from "../governance/support.js";
import { tempDir } from "../support/tmp.js";
import { call, needsHumanCall } from "./support.js";

const dir = tempDir();
const TOKEN = "test-token-0123456789abcdefghijklmnop";
const scope = { tenant: "acme", task: "t1", agent: "support-bot" };
let n = 0;
const open: { server: ConsoleServer; gate: Gate; ledger: Stores }[] = [];

afterEach(async () => {
  for (const o of open.splice(0)) {
    await o.server.close();
    await o.gate.close();
    await o.ledger.close();
  }
});

async function setup(): Promise<{ url: string; fx: Effects; gate: Gate; ledger: Stores; server: ConsoleServer }> {
  const ledger = sqliteLedger(join(dir, `api-${n++}.db`));
  const fx = effects();
  const gate = createGate({ tools: [deleteAccountTool(fx), emailTool(fx)], ledger, onAlert: () => {} });
  const server = await startConsole({ ledger, token: TOKEN, port: 0, pollMs: 20, logger: silentLogger });
  open.push({ server, gate, ledger });
  return { url: server.url, fx, gate, ledger, server };
}

/** fetch will not send another Host header; node:http will. */
function statusWithHost(url: string, host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request(new URL("/api/kill", url), { headers: { Host: host, Authorization: `Bearer ${TOKEN}` } }, (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.on("error", reject);
    req.end();
  });
}

interface Approval { id: string; state: string; tool: string; digest: string; preview: { effect: string; would_affect: unknown; reversible: boolean } | null; decidedBy: string | null; note: string | null }

async function pendingDelete(gate: Gate, id: string, account: string): Promise<string> {
  const [result] = await gate.runToolUses([use(id, "delete_account", { account })], scope);
  expect(result?.content).toMatch(/^EG_AWAITING_APPROVAL/);
  return /apr_\w+/.exec(result?.content ?? "")?.[0] ?? "";
}

describe("console API", () => {
  it("needs the token: none or a wrong one gets 401 and changes nothing; the page itself needs none and carries a strict CSP", async () => {
    const { url, ledger } = await setup();
    expect((await call(url, undefined, "GET", "/api/approvals")).status).toBe(401);
    const wrong = await call(url, "not-the-token", "POST", "/api/kill", { on: true });
    expect(wrong.status).toBe(401);
    expect(wrong.headers.get("www-authenticate")).toMatch(/^Bearer/);
    expect(await ledger.governance?.listKillSwitches()).toEqual([]);
    const page = await call(url, undefined, "GET", "/");
    expect(page.status).toBe(200);
    expect(page.headers.get("content-security-policy")).toBe(
      "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'");
    expect(String(page.body)).not.toMatch(/<script>|https?:\/\//);
  });

  it("refuses a cross-origin request, a foreign Host name and a change that is not JSON, even with the token", async () => {
    const { url, ledger } = await setup();
    const cross = await call(url, TOKEN, "POST", "/api/kill", { on: true }, { Origin: "http://evil.example" });
    expect(cross.status).toBe(403);
    const site = await call(url, TOKEN, "POST", "/api/kill", { on: true }, { "Sec-Fetch-Site": "cross-site" });
    expect(site.status).toBe(403);
    // A page on another name that resolves to 127.0.0.1 (DNS rebinding) sends its own name as Host.
    expect(await statusWithHost(url, "attacker.example:4820")).toBe(403);
    expect(await statusWithHost(url, `localhost:${new URL(url).port}`)).toBe(200);
    const form = await fetch(new URL("/api/kill", url), { method: "POST", headers: { Authorization: `Bearer ${TOKEN}`, "Content-Type": "application/x-www-form-urlencoded" }, body: "on=true" });
    expect(form.status).toBe(415);
    expect(await ledger.governance?.listKillSwitches()).toEqual([]);
    const same = await call(url, TOKEN, "POST", "/api/kill", { on: true, reason: "test" }, { Origin: url.replace(/\/$/, "") });
    expect(same.status).toBe(200);
  });

  it("binds loopback only unless allowRemote", async () => {
    const ledger = sqliteLedger(join(dir, `remote-${n++}.db`));
    try {
      await expect(startConsole({ ledger, token: TOKEN, host: "0.0.0.0", port: 0, logger: silentLogger })).rejects.toThrow(/EG_BAD_OPTION: refusing to serve the console on 0\.0\.0\.0.*--allow-remote/);
    } finally {
      await ledger.close();
    }
  });

  it("approve through the API: the digest and dry-run preview are shown; the repeated call runs once; a second decision is refused (409)", async () => {
    const { url, gate, fx } = await setup();
    const id = await pendingDelete(gate, "toolu_d1", "acc_42");
    const listed = (await call(url, TOKEN, "GET", "/api/approvals")).body as { approvals: Approval[] };
    expect(listed.approvals.map((a) => [a.id, a.state, a.tool])).toEqual([[id, "pending", "delete_account"]]);
    expect(listed.approvals[0]?.preview).toEqual({ effect: "would_delete", would_affect: { account: "acc_42" }, reversible: false });
    expect(listed.approvals[0]?.digest).toMatch(/^[0-9a-f]{64}$/);

    const approved = await call(url, TOKEN, "POST", `/api/approvals/${id}/approve`, { note: "customer asked", by: "alice" });
    expect(approved.status).toBe(200);
    expect((approved.body as { approval: Approval }).approval).toMatchObject({ state: "approved", decidedBy: "alice", note: "customer asked" });
    expect((await call(url, TOKEN, "POST", `/api/approvals/${id}/deny`, {})).status).toBe(409);
    expect(fx.count("delete_account")).toBe(0);

    for (let i = 0; i < 2; i++) {
      const [r] = await gate.runToolUses([use("toolu_d1", "delete_account", { account: "acc_42" })], scope);
      expect(r).toMatchObject({ is_error: false, content: '{"deleted":"acc_42"}' });
    }
    expect(fx.log).toEqual(["delete_account:toolu_d1"]);
    expect((await call(url, TOKEN, "GET", "/api/approvals/apr_nope")).status).toBe(404);
  });

  it("deny through the API: the call never runs", async () => {
    const { url, gate, fx } = await setup();
    const id = await pendingDelete(gate, "toolu_d2", "acc_7");
    expect((await call(url, TOKEN, "POST", `/api/approvals/${id}/deny`, { note: "wrong account" })).status).toBe(200);
    const [r] = await gate.runToolUses([use("toolu_d2", "delete_account", { account: "acc_7" })], scope);
    expect(r?.content).toMatch(/^EG_APPROVAL_DENIED/);
    expect(fx.count()).toBe(0);
  });

  it("kill switch through the API stops the gate's next write; off lets it run", async () => {
    const { url, gate, fx } = await setup();
    expect((await call(url, TOKEN, "POST", "/api/kill", { on: true, tenant: "acme", reason: "runaway" })).body).toMatchObject({ changed: true });
    const [stopped] = await gate.runToolUses([use("e1", "send_email", { to: "a" })], scope);
    expect(stopped?.content).toMatch(/^EG_KILL_SWITCH/);
    expect((await call(url, TOKEN, "POST", "/api/kill", { on: false, tenant: "acme" })).body).toMatchObject({ changed: true, killSwitches: [] });
    const [ran] = await gate.runToolUses([use("e1", "send_email", { to: "a" })], scope);
    expect(ran?.is_error).toBe(false);
    expect(fx.log).toEqual(["send_email:e1"]);
    expect((await call(url, TOKEN, "POST", "/api/kill", { tenant: "acme" })).status).toBe(400);
    expect((await call(url, TOKEN, "POST", "/api/breakers/brk_nope/close", {})).status).toBe(404);
  });

  it("the human queue: a needs_human call resolved through the API answers the agent's replay without running the tool", async () => {
    const { url, gate, fx, ledger } = await setup();
    await needsHumanCall(ledger, { tenant: "acme", key: "toolu_q1", tool: "send_email", input: { to: "bob" }, why: "the reply was lost" });
    const queue = (await call(url, TOKEN, "GET", "/api/queue")).body as { items: { id: string; kind: string; summary: string }[] };
    expect(queue.items.map((i) => [i.id, i.kind, i.summary])).toEqual([["toolu_q1", "needs_human", "the reply was lost"]]);
    expect((await call(url, TOKEN, "POST", "/api/queue/toolu_q1/resolve", { note: "no move" })).status).toBe(400);
    const done = await call(url, TOKEN, "POST", "/api/queue/toolu_q1/resolve", { completedWith: { sent: "bob", id: "m_1" }, note: "found it in the mail log" });
    expect(done.status).toBe(200);
    expect(done.body).toMatchObject({ kind: "call", record: { state: "completed", result: { sent: "bob", id: "m_1" } } });
    expect(((await call(url, TOKEN, "GET", "/api/queue")).body as { items: unknown[] }).items).toEqual([]);
    const [replay] = await gate.runToolUses([use("toolu_q1", "send_email", { to: "bob" })], scope);
    expect(replay).toMatchObject({ is_error: false, content: '{"sent":"bob","id":"m_1"}' });
    expect(fx.count()).toBe(0);
    expect((await call(url, TOKEN, "POST", "/api/queue/toolu_q1/resolve", { failed: "again" })).status).toBe(409);
  });

  it("ledger search: filters by state, tool, tenant, task and time, pages with a cursor; one call shows its history", async () => {
    const { url, gate } = await setup();
    for (let i = 0; i < 5; i++) await gate.runToolUses([use(`m${i}`, "send_email", { to: `u${i}` })], { ...scope, task: i < 3 ? "t1" : "t2" });
    await gate.runToolUses([use("m9", "send_email", { to: "x" })], { tenant: "globex", task: "t1" });
    const id = await pendingDelete(gate, "toolu_d3", "acc_1");
    const ids = (body: unknown) => (body as { calls: { key: string }[] }).calls.map((c) => c.key);

    expect(ids((await call(url, TOKEN, "GET", "/api/calls?tenant=acme&task=t1")).body)).toEqual(["m0", "m1", "m2"]);
    expect(ids((await call(url, TOKEN, "GET", "/api/calls?tool=send_email&tenant=globex")).body)).toEqual(["m9"]);
    expect(ids((await call(url, TOKEN, "GET", "/api/calls?state=needs_human")).body)).toEqual([]);
    expect(ids((await call(url, TOKEN, "GET", `/api/calls?until=${encodeURIComponent("2000-01-01T00:00:00Z")}`)).body)).toEqual([]);
    expect(ids((await call(url, TOKEN, "GET", "/api/calls?since=0&tenant=acme")).body)).toHaveLength(5);

    const seen: string[] = [];
    let cursor: string | null = "";
    while (cursor !== null) {
      const page: { calls: { key: string }[]; next: string | null } = (await call(url, TOKEN, "GET", `/api/calls?tenant=acme&limit=2${cursor ? `&cursor=${cursor}` : ""}`)).body as never;
      expect(page.calls.length).toBeLessThanOrEqual(2);
      seen.push(...page.calls.map((c) => c.key));
      cursor = page.next;
    }
    expect(seen).toEqual(["m0", "m1", "m2", "m3", "m4"]);
    expect((await call(url, TOKEN, "GET", "/api/calls?state=bogus")).status).toBe(400);
    expect((await call(url, TOKEN, "GET", "/api/calls?cursor=garbage")).status).toBe(400);

    const one = (await call(url, TOKEN, "GET", "/api/calls/acme/m1")).body as { call: { state: string; input: unknown }; approvals: unknown[] };
    expect(one.call).toMatchObject({ state: "completed", input: { to: "u1" } });
    expect((await call(url, TOKEN, "GET", "/api/calls/acme/nope")).status).toBe(404);
    // The destructive call has not been claimed (it waits for approval), so it is not in the ledger yet.
    expect((await call(url, TOKEN, "GET", "/api/calls/acme/toolu_d3")).status).toBe(404);
    expect(((await call(url, TOKEN, "GET", "/api/overview")).body as { approvalsPending: number }).approvalsPending).toBe(1);
    expect(id).toMatch(/^apr_/);
  });

  it("live updates: a change made by an agent elsewhere arrives on the event stream, after `ready`", async () => {
    const { url, gate } = await setup();
    const controller = new AbortController();
    const res = await fetch(new URL("/api/events", url), { headers: { Authorization: `Bearer ${TOKEN}` }, signal: controller.signal });
    expect(res.headers.get("content-type")).toMatch(/^text\/event-stream/);
    const reader = res.body!.getReader();
    const decoder = new TextDecoder();
    let text = "";
    const until = async (pattern: RegExp) => {
      while (!pattern.test(text)) {
        const { value, done } = await reader.read();
        if (done) throw new Error(`the stream ended before ${String(pattern)}: ${text}`);
        text += decoder.decode(value, { stream: true });
      }
    };
    await until(/event: ready\n/);
    await pendingDelete(gate, "toolu_live", "acc_9");
    await until(/event: change\ndata: \{"what":\[[^\]]*"approvals"/);
    controller.abort();
    expect((await call(url, undefined, "GET", "/api/events")).status).toBe(401);
  });

  it("live updates: a call made and completed between two looks is still announced, so a ledger search refreshes", async () => {
    const { url, gate, fx } = await setup();
    const controller = new AbortController();
    const res = await fetch(new URL("/api/events", url), { headers: { Authorization: `Bearer ${TOKEN}` }, signal: controller.signal });
    const reader = res.body!.getReader();
    const decoder = new TextDecoder();
    let text = "";
    const until = async (pattern: RegExp) => {
      while (!pattern.test(text)) {
        const { value, done } = await reader.read();
        if (done) throw new Error(`the stream ended before ${String(pattern)}: ${text}`);
        text += decoder.decode(value, { stream: true });
      }
    };
    await until(/event: ready\n/);
    // Claimed, executed and completed in about a millisecond: never in flight when the server looks (every 20 ms).
    const [sent] = await gate.runToolUses([use("toolu_quick", "send_email", { to: "quick@example.com" })], scope);
    expect(sent?.is_error).toBe(false);
    await until(/event: change\ndata: \{"what":\[[^\]]*"calls"/);
    expect(fx.count("send_email")).toBe(1);
    const found = (await call(url, TOKEN, "GET", "/api/calls?tool=send_email")).body as { calls: { key: string; state: string }[] };
    expect(found.calls.map((c) => [c.key, c.state])).toEqual([["toolu_quick", "completed"]]);
    controller.abort();
  });
});
