/**
 * The web console in a real browser (Debian's Chromium driven by playwright-core), served by the
 * built `effectgate serve`, with agent workers in other processes on the same SQLite ledger.
 * Effects are counted in the workers' effects file: what the tools really did.
 * Set EFFECTGATE_SCREENSHOTS=1 to (re)write the screenshots in docs/.
 */
import { existsSync, mkdirSync, readFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { chromium, type BrowserContext, type Page } from "playwright-core";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { ToolRejected } from "../../src/core/outcome.js";
import { defineTool } from "../../src/core/tool.js";
import { createGate } from "../../src/root/create-gate.js";
import { SagaError } from "../../src/saga/errors.js";
import { sqliteLedger } from "../../src/stores/sqlite/index.js";
import { runCli } from "../cli/run-cli.js";
import { requireBuild, startWorker, type Worker } from "../support/processes.js";
import { tempDir } from "../support/tmp.js";
import { serve, type Served } from "./served.js";
import { call, needsHumanCall } from "./support.js";

const CHROMIUM = "/usr/bin/chromium";
const WORKER = fileURLToPath(new URL("../governance/fixtures/governed-worker.mjs", import.meta.url));
const DOCS = fileURLToPath(new URL("../../docs/", import.meta.url));
const SCREENSHOTS = process.env.EFFECTGATE_SCREENSHOTS === "1";
// Made on first use: without Chromium the suite is skipped, and vitest then runs no afterAll to remove a folder made up front.
let made: string | undefined;
const workDir = () => (made ??= tempDir());
let n = 0;

interface Answer { readonly result: { content: string; is_error: boolean }; readonly approval: string | null }
interface Agent { call(id: string, name: string, input: unknown): Promise<Answer>; stop(): Promise<void> }

const workers: Worker[] = [];
async function agent(ledger: string, effects: string): Promise<Agent> {
  const w = startWorker(WORKER, [ledger, effects, "0", "{}"]);
  workers.push(w);
  await w.line((l) => l === "ready");
  return {
    async call(id, name, input) {
      const answer = w.line((l) => l.startsWith("{"));
      w.child.stdin.write(`${JSON.stringify({ id, name, input })}\n`);
      return JSON.parse(await answer) as Answer;
    },
    async stop() {
      workers.splice(workers.indexOf(w), 1);
      w.child.stdin.end();
      expect((await w.exited).code).toBe(0);
    },
  };
}
const effectsIn = (file: string) => (existsSync(file) ? readFileSync(file, "utf8").trim().split("\n").filter((l) => l !== "") : []);

async function newLedger(): Promise<{ db: string; effects: string }> {
  const base = join(workDir(), `case-${n++}`);
  mkdirSync(base);
  const db = join(base, "ledger.db");
  expect((await runCli(["migrate", "--db", db])).code).toBe(0);
  return { db, effects: join(base, "effects.log") };
}

const haveChromium = existsSync(CHROMIUM);
// Each test drives a browser, a server and agents in three processes: generous time on a loaded machine.
describe.skipIf(!haveChromium)(`the web console in Chromium${haveChromium ? "" : ` (skipped: ${CHROMIUM} is missing; apt-get install chromium)`}`, { timeout: 120_000 }, () => {
  let browser: BrowserContext;
  const servers: Served[] = [];

  beforeAll(async () => {
    requireBuild();
    browser = await chromium.launchPersistentContext(tempDir("effectgate-chromium-"), {
      executablePath: CHROMIUM, headless: true, viewport: { width: 1200, height: 900 },
      args: ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run"],
    });
  });
  afterEach(async () => {
    for (const w of workers.splice(0)) {
      w.child.stdin.end();
      await w.exited;
    }
    for (const s of servers.splice(0)) await s.stop();
    for (const p of browser.pages()) await p.close();
  });
  afterAll(async () => {
    await browser?.close();
  });

  async function console(db: string): Promise<{ page: Page; served: Served; token: string }> {
    const served = await serve(["--db", db, "--poll-ms", "50"]);
    servers.push(served);
    const token = served.token!;
    const page = await browser.newPage();
    const problems: string[] = [];
    page.on("pageerror", (err) => problems.push(err.message));
    page.on("console", (m) => { if (m.type() === "error" && !/401|403/.test(m.text())) problems.push(m.text()); });
    await page.goto(`${served.url}#token=${encodeURIComponent(token)}`);
    await page.waitForSelector("body[data-live=on]");
    expect(problems).toEqual([]);
    return { page, served, token };
  }

  const shot = async (page: Page, name: string) => {
    if (SCREENSHOTS) await page.screenshot({ path: join(DOCS, `console-${name}.png`), fullPage: true });
  };

  it("approve in the browser: the dry run is shown; the agent in another process then executes the call once", async () => {
    const { db, effects } = await newLedger();
    const worker = await agent(db, effects);
    const asked = await worker.call("toolu_del", "delete_account", { account: "acc_42" });
    const id = asked.approval!;
    const { page } = await console(db);
    const card = page.locator(`[data-approval="${id}"]`);
    await card.waitFor();
    await expect.poll(() => card.locator(".preview").innerText()).toMatch(/would_delete · irreversible[\s\S]*"account": "acc_42"/);
    await shot(page, "approvals");
    await card.locator("input[data-note]").fill("customer asked twice");
    await card.locator("button[data-action=approve]").click();
    await page.locator("#flash", { hasText: `Approved ${id}` }).waitFor();
    expect(effectsIn(effects)).toEqual([]);
    for (let i = 0; i < 2; i++) {
      expect((await worker.call("toolu_del", "delete_account", { account: "acc_42" })).result).toMatchObject({ is_error: false, content: '{"deleted":"acc_42"}' });
    }
    await worker.stop();
    expect(effectsIn(effects)).toEqual(["delete_account toolu_del acc_42"]);
  });

  it("deny in the browser: the call never runs", async () => {
    const { db, effects } = await newLedger();
    const worker = await agent(db, effects);
    const { approval } = await worker.call("toolu_no", "delete_account", { account: "acc_7" });
    const { page } = await console(db);
    const card = page.locator(`[data-approval="${approval!}"]`);
    await card.locator("button[data-action=deny]").click();
    await page.locator("#flash", { hasText: "will never run" }).waitFor();
    expect((await worker.call("toolu_no", "delete_account", { account: "acc_7" })).result.content).toMatch(/^EG_APPROVAL_DENIED/);
    await worker.stop();
    expect(effectsIn(effects)).toEqual([]);
  });

  it("resolve a queue item in the browser: the agent's replay gets the recorded result and nothing runs", async () => {
    const { db, effects } = await newLedger();
    const ledger = sqliteLedger(db);
    await needsHumanCall(ledger, { tenant: "acme", key: "toolu_mail", tool: "send_email", input: { to: "bob" }, why: "the mail server's reply was lost" });
    await ledger.close();
    const { page } = await console(db);
    await page.goto(page.url().replace(/#.*$/, "#queue"));
    const item = page.locator('[data-queue="toolu_mail"]');
    await item.locator(".details[data-loaded=true]").waitFor();
    await expect.poll(() => item.innerText()).toMatch(/needs_human[\s\S]*the mail server's reply was lost[\s\S]*"to": "bob"/);
    await shot(page, "queue");
    await item.locator("select[data-field=how]").selectOption("completed");
    await item.locator("textarea[data-field=value]").fill('{"sent":"bob","id":"m_1"}');
    await item.locator("input[data-field=note]").fill("found in the mail log");
    await item.locator("button[data-action=resolve]").click();
    await page.locator("#flash", { hasText: "Settled toolu_mail" }).waitFor();
    await page.getByText("Nothing waits for a person.").waitFor();
    const worker = await agent(db, effects);
    expect((await worker.call("toolu_mail", "send_email", { to: "bob" })).result).toMatchObject({ is_error: false, content: '{"sent":"bob","id":"m_1"}' });
    await worker.stop();
    expect(effectsIn(effects)).toEqual([]);
  });

  it("a tool name and input carrying <script> and \"><img onerror> payloads are shown as text, never run", async () => {
    const { db, effects } = await newLedger();
    const payload = `"><img src=x onerror="window.__xss=1"><script>window.__xss=2</script>`;
    const worker = await agent(db, effects);
    const { approval } = await worker.call("toolu_x", "delete_account", { account: payload });
    await worker.stop();
    const ledger = sqliteLedger(db);
    const tool = `<script>window.__xss=3</script><img src=x onerror="window.__xss=4">`;
    await needsHumanCall(ledger, { tenant: "acme", key: `k"><img src=x onerror="window.__xss=5">`, tool, input: { note: payload }, why: `<b onmouseover="window.__xss=6">why</b>` });
    await ledger.close();
    const { page } = await console(db);
    const base = page.url().replace(/#.*$/, "");
    for (const where of ["#queue", "#ledger", "#overview", "#approvals"]) {
      const before = await page.locator("main").getAttribute("data-rendered");
      await page.goto(`${base}${where}`);
      await expect.poll(() => page.locator("main").getAttribute("data-rendered")).not.toBe(before);
      if (where === "#queue") await page.locator(".details[data-loaded=true]").waitFor();
      expect(await page.locator("main img, main script, main b").count(), where).toBe(0);
      expect(await page.evaluate(() => (globalThis as unknown as { __xss?: number }).__xss), where).toBeUndefined();
    }
    await expect.poll(() => page.locator(`[data-approval="${approval!}"] .input`).innerText()).toContain(JSON.stringify(payload));
    await page.goto(`${base}#queue`);
    await expect.poll(() => page.locator(".queue-item .tool").first().innerText()).toBe(tool);
    expect(await page.locator("script").count()).toBe(1); // console.js only
  });

  it("a request without the token gets 401; a cross-origin POST with the token is refused and changes nothing", async () => {
    const { db } = await newLedger();
    const { page, served, token } = await console(db);
    expect(await page.evaluate(async () => (await fetch("/api/approvals")).status)).toBe(401);
    // Another site (another origin on this machine) that somehow holds the token tries to turn the kill switch on.
    const evil: Server = createServer((_req, res) => {
      res.setHeader("Content-Type", "text/html");
      res.end("<!doctype html><p>evil</p>");
    });
    await new Promise<void>((r) => evil.listen(0, "127.0.0.1", r));
    try {
      const other = await browser.newPage();
      await other.goto(`http://127.0.0.1:${(evil.address() as AddressInfo).port}/`);
      const outcomes = await other.evaluate(async ({ url, token }) => {
        const tries = [
          fetch(`${url}api/kill`, { method: "POST", headers: { Authorization: `Bearer ${token}`, "Content-Type": "application/json" }, body: '{"on":true}' }),
          fetch(`${url}api/kill`, { method: "POST", mode: "no-cors", headers: { "Content-Type": "text/plain" }, body: '{"on":true}' }),
        ];
        return Promise.all(tries.map((t) => t.then((r) => `status ${r.status}`, (e: Error) => `refused: ${e.name}`)));
      }, { url: served.url, token });
      expect(outcomes[0]).toMatch(/^refused/);
      // A no-cors POST is sent all the same (the browser only hides the answer): the server's refusal is what keeps the ledger unchanged.
      expect(outcomes[1]).toMatch(/^refused|^status 0$/);
      await other.close();
    } finally {
      evil.closeAllConnections();
      await new Promise<void>((r) => evil.close(() => r()));
    }
    expect(((await call(served.url, token, "GET", "/api/kill")).body as { killSwitches: unknown[] }).killSwitches).toEqual([]);
  });

  it("live update: a new approval request from an agent appears without a reload", async () => {
    const { db, effects } = await newLedger();
    const { page } = await console(db);
    await page.getByText("No pending approval requests.").waitFor();
    await page.evaluate(() => ((globalThis as unknown as { __sameDocument: boolean }).__sameDocument = true));
    const worker = await agent(db, effects);
    const { approval } = await worker.call("toolu_live", "delete_account", { account: "acc_live" });
    await page.locator(`[data-approval="${approval!}"]`).waitFor();
    expect(await page.evaluate(() => (globalThis as unknown as { __sameDocument?: boolean }).__sameDocument)).toBe(true);
    await expect.poll(() => page.locator("#badge-approvals").innerText()).toBe("1");
    await worker.stop();
  });

  it("live ledger search: a call an agent in another process makes after the page is open appears in the results without a reload", async () => {
    const { db, effects } = await newLedger();
    const worker = await agent(db, effects);
    await worker.call("toolu_early", "send_email", { to: "early@example.com" });
    const { page } = await console(db);
    await page.goto(`${page.url().replace(/#.*$/, "")}#ledger/tool=send_email`);
    await page.locator("#calls tbody tr", { hasText: "toolu_early" }).waitFor();
    expect(await page.locator("#calls tbody tr").count()).toBe(1);
    await page.evaluate(() => ((globalThis as unknown as { __sameDocument: boolean }).__sameDocument = true));
    // Made, executed and completed between two looks of the server: it was never "in flight" when the server looked.
    expect((await worker.call("toolu_late", "send_email", { to: "late@example.com" })).result.is_error).toBe(false);
    const late = page.locator("#calls tbody tr", { hasText: "toolu_late" });
    await late.waitFor();
    await expect.poll(() => late.locator(".pill.completed").count()).toBe(1);
    expect(await page.locator("#calls tbody tr").count()).toBe(2);
    expect(await page.evaluate(() => (globalThis as unknown as { __sameDocument?: boolean }).__sameDocument)).toBe(true);
    await worker.stop();
    expect(effectsIn(effects)).toEqual(["send_email toolu_early early@example.com", "send_email toolu_late late@example.com"]);
  });

  it("a saga's timeline: a declined charge undoes the order's earlier steps in reverse, each once, and the page shows every event", async () => {
    const { db } = await newLedger();
    const done: string[] = [];
    const write = <T extends z.ZodRawShape>(name: string, shape: T, run: (input: z.infer<z.ZodObject<T>>) => unknown) =>
      defineTool({ name, effect: "write", input: z.object(shape), execute: (input, ctx) => {
        done.push(`${name} ${ctx.idempotencyKey}`);
        return run(input);
      } });
    const createOrder = write("create_order", { sku: z.string(), qty: z.number() }, () => ({ order: "ord_42" }));
    const cancelOrder = write("cancel_order", { order: z.string() }, (i) => ({ cancelled: i.order }));
    const reserveStock = write("reserve_stock", { sku: z.string(), qty: z.number() }, () => ({ reservation: "res_7" }));
    const releaseStock = write("release_stock", { reservation: z.string() }, (i) => ({ released: i.reservation }));
    const chargeCard = write("charge_card", { customer: z.string(), amount: z.number() }, () => {
      throw new ToolRejected("card declined (insufficient funds)");
    });
    const refundCard = write("refund_card", { charge: z.string() }, (i) => ({ refunded: i.charge }));
    const ledger = sqliteLedger(db);
    const gate = createGate({ tools: [createOrder, cancelOrder, reserveStock, releaseStock, chargeCard, refundCard], ledger, onAlert: () => {} });
    const saga = gate.saga("order-42", { tenant: "acme", task: "checkout-42" });
    await saga.step("order", createOrder, { sku: "sku-1", qty: 2 }, { compensate: { tool: cancelOrder, input: (r) => ({ order: (r as { order: string }).order }) } });
    await saga.step("reserve", reserveStock, { sku: "sku-1", qty: 2 }, { compensate: { tool: releaseStock, input: (r) => ({ reservation: (r as { reservation: string }).reservation }) } });
    const failed = await saga.step("charge", chargeCard, { customer: "cus_1", amount: 40 }, { compensate: { tool: refundCard, input: (r) => ({ charge: (r as { charge: string }).charge }) } })
      .catch((err: unknown) => err);
    expect(failed).toBeInstanceOf(SagaError);
    expect((failed as SagaError).status.state).toBe("compensated");
    await gate.close();
    await ledger.close();
    expect(done).toEqual([
      "create_order saga:order-42:order", "reserve_stock saga:order-42:reserve", "charge_card saga:order-42:charge",
      "release_stock saga:order-42:reserve:compensate", "cancel_order saga:order-42:order:compensate",
    ]);

    const { page } = await console(db);
    await page.goto(`${page.url().replace(/#.*$/, "")}#saga/acme/order-42`);
    await page.locator("#timeline li").first().waitFor();
    const steps = await page.locator("#steps tbody tr").allInnerTexts();
    expect(steps.map((row) => row.split("\t")).map((cells) => [cells[1], cells[4]])).toEqual([["order", "compensated"], ["reserve", "compensated"], ["charge", "failed"]]);
    const timeline = (await page.locator("#timeline li").allInnerTexts()).join("\n");
    expect(timeline).toMatch(/step_failed · charge[\s\S]*card declined/);
    // Undone newest first: the reservation, then the order.
    expect(timeline).toMatch(/step_compensated · reserve[\s\S]*step_compensated · order/);
    expect(await page.locator("h2 .pill.compensated").count()).toBe(1);
    await shot(page, "saga");
  });

  it("the other pages: ledger search and a call, sagas, kill switch and breakers, blast radius", async () => {
    const { db, effects } = await newLedger();
    const worker = await agent(db, effects);
    for (let i = 0; i < 3; i++) await worker.call(`toolu_m${i}`, "send_email", { to: `user${i}@example.com` });
    await worker.call("toolu_del2", "delete_account", { account: "acc_9" });
    await worker.stop();
    const { page } = await console(db);
    const base = page.url().replace(/#.*$/, "");
    await page.goto(`${base}#ledger`);
    await page.locator("#calls tbody tr").first().waitFor();
    expect(await page.locator("#calls tbody tr").count()).toBe(3);
    await page.locator("input[name=key]").fill("toolu_m1");
    await page.locator("form button[type=submit]").click();
    await expect.poll(() => page.locator("#calls tbody tr").count()).toBe(1);
    await shot(page, "ledger");
    await page.locator("#calls tbody tr").first().click();
    await page.getByText("user1@example.com").first().waitFor();

    await page.goto(`${base}#controls`);
    await page.locator("input[data-field=tenant]").fill("acme");
    await page.locator("input[data-field=reason]").fill("runaway refunds");
    await page.locator("button[data-action=kill-on]").click();
    await page.locator("#kill", { hasText: "tenant acme" }).waitFor();
    await shot(page, "controls");
    const w2 = await agent(db, effects);
    expect((await w2.call("toolu_m9", "send_email", { to: "x" })).result.content).toMatch(/^EG_KILL_SWITCH/);
    await page.locator("button[data-action=kill-off]").click();
    await page.getByText("No kill switch is on.").waitFor();
    expect((await w2.call("toolu_m9", "send_email", { to: "x" })).result.is_error).toBe(false);
    await w2.stop();

    await page.goto(`${base}#overview`);
    await page.locator("#blast-chart rect").first().waitFor();
    await shot(page, "blast-radius");
    await page.goto(`${base}#sagas`);
    await page.getByText("No sagas.").waitFor();
    expect(effectsIn(effects)).toHaveLength(4);
  });
});
