/** Dry-run + durable approvals in the pipeline, in one process (memory ledger, manual clock). */
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { defineTool } from "../../src/core/tool.js";
import { createGate } from "../../src/root/create-gate.js";
import { memoryLedger } from "../../src/stores/memory/index.js";
import { decideApproval } from "../../src/governance/approvals.js";
import { awaitingApproval } from "../../src/governance/awaiting.js";
import type { Policy } from "../../src/governance/policy.js";
import type { Approver } from "../../src/governance/govern.js";
import { alerts, chargeTool, deleteAccountTool, effects, emailTool, lookupTool, manualClock, use } from "./support.js";

const scope = { tenant: "acme", task: "t1", agent: "support-bot" };
const HOUR = 3_600_000;

function setup(options: { policy?: Policy; approver?: Approver } = {}) {
  const fx = effects();
  const clock = manualClock();
  const seen = alerts();
  const ledger = memoryLedger();
  const tools = [deleteAccountTool(fx), chargeTool(fx), emailTool(fx), lookupTool(fx)];
  const gate = createGate({ ledger, tools, clock: clock.now, onAlert: seen.onAlert, ...options });
  const store = ledger.governance!;
  const run = async (id: string, name: string, input: unknown) => (await gate.runToolUses([use(id, name, input)], scope))[0]!;
  return { fx, clock, seen, ledger, gate, store, run };
}

describe("durable approvals", () => {
  it("a destructive call is stored as a pending request with its dry-run preview; the agent is told to wait; nothing runs", async () => {
    const { fx, clock, seen, ledger, store, run } = setup();
    const r = await run("toolu_d1", "delete_account", { account: "acc_1" });
    const [request] = await store.listApprovals();
    expect(request).toMatchObject({
      state: "pending", tenant: "acme", key: "toolu_d1", tool: "delete_account", effect: "destructive", task: "t1", agent: "support-bot",
      toolUseId: "toolu_d1", input: { account: "acc_1" },
      preview: { effect: "would_delete", would_affect: { account: "acc_1" }, reversible: false },
      reasons: ["destructive tool: every call needs approval"], policyVersion: "none",
      requestedAt: clock.now(), expiresAt: clock.now() + 24 * HOUR,
    });
    expect(request!.requestedBy).toMatch(/^support-bot \(worker .+\)$/);
    expect(request!.id).toMatch(/^apr_[0-9a-f]{24}$/);
    expect(r.is_error).toBe(true);
    expect(r.content).toBe(
      `EG_AWAITING_APPROVAL: this delete_account call needs a person's approval before it runs (destructive tool: every call needs approval). ` +
        `Approval request ${request!.id} is pending until ${new Date(request!.expiresAt).toISOString()}. ` +
        `Preview: would_delete {"account":"acc_1"} (irreversible). Nothing was executed. ` +
        `Repeat this same call (same tool_use id and input) later to run it once approved; do not make it under a new id or with other input, which would need a new approval.`,
    );
    expect(awaitingApproval(r)).toBe(request!.id);
    expect(fx.count()).toBe(0);
    expect(await ledger.calls.get("acme", "toolu_d1")).toBeUndefined();
    expect(seen.list.map((a) => a.code)).toEqual(["approval_requested"]);
    expect(seen.list[0]!.message).toContain(`effectgate approvals approve ${request!.id}`);
  });

  it("repeating it while pending files no second request; once approved it runs exactly once; replays get the stored result and are never sent for approval again", async () => {
    const { fx, clock, seen, store, run } = setup();
    await run("toolu_d1", "delete_account", { account: "acc_1" });
    const again = await run("toolu_d1", "delete_account", { account: "acc_1" });
    expect(again.content).toMatch(/^EG_AWAITING_APPROVAL: .*Its approval request apr_/);
    expect(await store.listApprovals({ state: "pending" })).toHaveLength(1);
    expect(seen.list).toHaveLength(1);

    const [request] = await store.listApprovals();
    clock.advance(HOUR);
    const decided = await decideApproval(store, request!.id, { approve: true, by: "alice", note: "checked" }, clock.now());
    expect(decided).toMatchObject({ ok: true, approval: { state: "approved", decidedBy: "alice", decidedAt: clock.now(), note: "checked" } });
    clock.advance(HOUR);
    const ran = await run("toolu_d1", "delete_account", { account: "acc_1" });
    expect(ran).toMatchObject({ is_error: false, content: '{"deleted":"acc_1"}' });
    expect((await store.getApproval(request!.id))).toMatchObject({ state: "consumed", consumedAt: clock.now() });
    for (let i = 0; i < 3; i++) expect(await run("toolu_d1", "delete_account", { account: "acc_1" })).toEqual(ran);
    expect(fx.log).toEqual(["delete_account:toolu_d1"]);
    expect(await store.listApprovals({ limit: 10 })).toHaveLength(1);
  });

  it("denied: never executed, and the agent is told who denied it and why", async () => {
    const { fx, clock, store, run } = setup();
    await run("toolu_d1", "delete_account", { account: "acc_1" });
    const [request] = await store.listApprovals();
    await decideApproval(store, request!.id, { approve: false, by: "bob", note: "wrong account" }, clock.now());
    for (let i = 0; i < 2; i++) {
      expect((await run("toolu_d1", "delete_account", { account: "acc_1" })).content).toBe(
        `EG_APPROVAL_DENIED: bob denied this delete_account call (approval ${request!.id}: wrong account). It was not executed and will not be. Do not retry it; tell the user.`,
      );
    }
    expect(fx.count()).toBe(0);
    expect(await decideApproval(store, request!.id, { approve: true, by: "mallory" }, clock.now())).toMatchObject({ ok: false, reason: "already_decided" });
  });

  it("expired (injected clock): a request nobody decided in time, or an approval not used in time, never executes", async () => {
    const { fx, clock, store, run } = setup({ policy: { approvals: { ttlMs: HOUR } } });
    await run("toolu_d1", "delete_account", { account: "acc_1" });
    const [first] = await store.listApprovals();
    clock.advance(HOUR);
    expect((await run("toolu_d1", "delete_account", { account: "acc_1" })).content).toMatch(/^EG_APPROVAL_EXPIRED: this delete_account call was not executed: nobody decided on its approval request \(apr_/);
    expect((await store.getApproval(first!.id))?.state).toBe("expired");
    expect(await decideApproval(store, first!.id, { approve: true, by: "late" }, clock.now())).toMatchObject({ ok: false, reason: "already_decided" });

    await run("toolu_d2", "delete_account", { account: "acc_2" });
    const second = (await store.listApprovals({ state: "pending" }))[0]!;
    clock.advance(HOUR - 1);
    expect(await decideApproval(store, second.id, { approve: true, by: "alice" }, clock.now())).toMatchObject({ ok: true });
    clock.advance(HOUR); // approved, but valid for one TTL only
    expect((await run("toolu_d2", "delete_account", { account: "acc_2" })).content).toMatch(/^EG_APPROVAL_EXPIRED: .*it was approved but not run in time/);

    await run("toolu_d3", "delete_account", { account: "acc_3" });
    const third = (await store.listApprovals({ state: "pending" }))[0]!;
    clock.advance(HOUR);
    expect(await decideApproval(store, third.id, { approve: true, by: "alice" }, clock.now())).toMatchObject({ ok: false, reason: "expired", approval: { state: "expired" } });
    expect(fx.count()).toBe(0);
  });

  it("approving one call can never release another with different arguments", async () => {
    const { fx, clock, store, run } = setup();
    await run("toolu_a", "delete_account", { account: "acc_small" });
    await run("toolu_b", "delete_account", { account: "acc_everything" });
    const requests = await store.listApprovals();
    expect(requests).toHaveLength(2);
    const small = requests.find((r) => r.key === "toolu_a")!;
    await decideApproval(store, small.id, { approve: true, by: "alice" }, clock.now());
    expect((await run("toolu_b", "delete_account", { account: "acc_everything" })).content).toMatch(/^EG_AWAITING_APPROVAL/);
    // The approved call's own id with other input: a different digest, so a new request, not a release.
    const swapped = await run("toolu_a", "delete_account", { account: "acc_everything" });
    expect(swapped.content).toMatch(/^EG_AWAITING_APPROVAL: .*Approval request apr_/);
    expect(await store.listApprovals({ state: "pending" })).toHaveLength(2);
    expect((await store.getApproval(small.id))?.state).toBe("approved");
    expect(fx.count()).toBe(0);
    // The approved call itself runs, once.
    expect((await run("toolu_a", "delete_account", { account: "acc_small" })).content).toBe('{"deleted":"acc_small"}');
    // Now the ledger holds toolu_a: the swapped input is a key mismatch, never a run.
    expect((await run("toolu_a", "delete_account", { account: "acc_everything" })).content).toMatch(/^EG_KEY_MISMATCH/);
    expect(fx.log).toEqual(["delete_account:toolu_a"]);
  });

  it("an approval is bound to the policy version: a changed policy needs a new approval", async () => {
    const fx = effects();
    const ledger = memoryLedger();
    const v1 = createGate({ ledger, tools: [deleteAccountTool(fx)], policy: { version: "v1" }, onAlert: () => {} });
    await v1.runToolUses([use("toolu_d", "delete_account", { account: "a" })], scope);
    const [request] = await ledger.governance!.listApprovals();
    await decideApproval(ledger.governance!, request!.id, { approve: true, by: "alice" }, Date.now());
    const v2 = createGate({ ledger, tools: [deleteAccountTool(fx)], policy: { version: "v2" }, onAlert: () => {} });
    expect((await v2.runToolUses([use("toolu_d", "delete_account", { account: "a" })], scope))[0]!.content).toMatch(/^EG_AWAITING_APPROVAL/);
    expect(fx.count()).toBe(0);
    expect((await v1.runToolUses([use("toolu_d", "delete_account", { account: "a" })], scope))[0]!.is_error).toBe(false);
  });

  it("in a parallel batch, the waiting call says so and the others get their results", async () => {
    const { fx, run: _run, gate } = setup();
    const results = await gate.runToolUses([
      use("w1", "send_email", { to: "a@x" }),
      use("d1", "delete_account", { account: "acc_1" }),
      use("r1", "lookup_customer", { customer: "c1" }),
      use("w2", "charge_card", { customer: "c1", amount: 5 }),
    ], scope);
    expect(results.map((r) => [r.tool_use_id, r.is_error])).toEqual([["w1", false], ["d1", true], ["r1", false], ["w2", false]]);
    expect(results[1]!.content).toMatch(/^EG_AWAITING_APPROVAL/);
    expect(fx.log.sort()).toEqual(["charge_card:w2", "lookup_customer:-", "send_email:w1"]);
  });

  it("approval rules by predicate, declarative or in code: only matching calls wait", async () => {
    const { fx, store, run } = setup({
      policy: {
        approvals: {
          rules: [
            { tool: "charge_card", when: { field: "amount", gt: 100 } },
            { tool: "send_email", when: (input) => String((input as { to: string }).to).endsWith("@external.example"), reason: "mail leaves the company" },
          ],
        },
      },
    });
    expect((await run("c1", "charge_card", { customer: "x", amount: 100 })).is_error).toBe(false);
    const big = await run("c2", "charge_card", { customer: "x", amount: 100.5 });
    expect(big.content).toMatch(/^EG_AWAITING_APPROVAL: this charge_card call needs a person's approval before it runs \(approval rule approvals\.rules\[0\]: amount > 100\)\. .*Preview: would_charge \{"customer":"x","amount":100\.5\} \(reversible\)/);
    expect((await run("e1", "send_email", { to: "a@corp.example" })).is_error).toBe(false);
    expect((await run("e2", "send_email", { to: "a@external.example" })).content).toMatch(/\(mail leaves the company\)\. Approval request apr_\w+ is pending until [^.]+\.\d+Z\. Nothing was executed\./);
    expect(fx.log).toEqual(["charge_card:c1", "send_email:e1"]);
    expect((await store.listApprovals()).map((a) => a.tool)).toEqual(["charge_card", "send_email"]);
  });

  it("non-compensable tools always need approval", async () => {
    const { fx, run } = setup({ policy: { nonCompensable: ["send_email"] } });
    expect((await run("e1", "send_email", { to: "a" })).content).toMatch(/^EG_AWAITING_APPROVAL: .*\(non-compensable: its effect cannot be undone\)/);
    expect(fx.count()).toBe(0);
  });

  it("quotas are checked again when an approved call finally runs", async () => {
    const { fx, clock, store, run } = setup({
      policy: { quotas: [{ per: "task", tool: "charge_card", sum: "amount", limit: 250 }], approvals: { rules: [{ tool: "charge_card", when: { field: "amount", gte: 200 } }] } },
    });
    expect((await run("big", "charge_card", { customer: "x", amount: 200 })).content).toMatch(/^EG_AWAITING_APPROVAL/);
    expect((await run("small", "charge_card", { customer: "x", amount: 60 })).is_error).toBe(false);
    const [request] = await store.listApprovals();
    await decideApproval(store, request!.id, { approve: true, by: "alice" }, clock.now());
    expect((await run("big", "charge_card", { customer: "x", amount: 200 })).content).toMatch(/^EG_QUOTA_EXCEEDED: .*has used 60 of 250, and this call asks 200 more amount/);
    expect(fx.log).toEqual(["charge_card:small"]);
    // A call already over its quota is refused before anyone is asked.
    expect((await run("huge", "charge_card", { customer: "x", amount: 900 })).content).toMatch(/^EG_QUOTA_EXCEEDED/);
    expect(await store.listApprovals()).toHaveLength(1);
  });

  it("an approver callback decides in code, recorded with its name; undefined leaves the request to a person", async () => {
    const decisions: string[] = [];
    const { fx, store, seen, gate } = setup({
      approver: (request) => {
        decisions.push(request.tool);
        const account = (request.input as { account?: string }).account;
        if (account === "acc_test") return { approve: true, by: "auto-approver", note: "test account" };
        if (account === "acc_prod") return { approve: false, by: "auto-approver", note: "production" };
        return undefined;
      },
    });
    const results = await gate.runToolUses([
      use("d1", "delete_account", { account: "acc_test" }), use("d2", "delete_account", { account: "acc_prod" }), use("d3", "delete_account", { account: "acc_other" }),
    ], scope);
    expect(results.map((r) => r.content.slice(0, 22))).toEqual(['{"deleted":"acc_test"}', "EG_APPROVAL_DENIED: au", "EG_AWAITING_APPROVAL: "]);
    expect(fx.log).toEqual(["delete_account:d1"]);
    expect((await store.listApprovals({ state: "consumed" }))[0]).toMatchObject({ decidedBy: "auto-approver", note: "test account" });
    // Only the request left for a person raised an alert.
    expect(seen.list.map((a) => a.key)).toEqual(["d3"]);
    expect(decisions).toHaveLength(3);
  });
});

describe("dry runs", () => {
  it("defineTool refuses a destructive tool without dryRun", () => {
    expect(() => defineTool({ name: "drop_table", effect: "destructive", input: z.object({}), execute: () => 1 }))
      .toThrow(/EG_BAD_TOOL_DEFINITION: tool "drop_table": destructive tools must implement dryRun\(input\)/);
  });

  it("a malformed or failing dry run refuses the call: no request, nothing executed", async () => {
    let runs = 0;
    const make = (name: string, dryRun: () => unknown) => defineTool({
      name, effect: "destructive", input: z.object({}), execute: () => ++runs,
      dryRun: dryRun as () => { effect: string; would_affect: Record<string, never>; reversible: boolean },
    });
    const ledger = memoryLedger();
    const gate = createGate({
      ledger, onAlert: () => {}, approver: () => ({ approve: true, by: "x" }),
      tools: [
        make("no_effect", () => ({ would_affect: {}, reversible: false })),
        make("bad_effect", () => ({ effect: "delete", would_affect: {}, reversible: false })),
        make("no_affect", () => ({ effect: "would_delete", reversible: true })),
        make("no_reversible", () => ({ effect: "would_delete", would_affect: { a: 1 } })),
        make("throws", () => Promise.reject(new Error("cannot reach inventory"))),
        make("nothing", () => undefined),
      ],
    });
    const results = await gate.runToolUses(["no_effect", "bad_effect", "no_affect", "no_reversible", "throws", "nothing"].map((n) => use(`t_${n}`, n, {})), scope);
    expect(results.map((r) => r.content)).toEqual([
      'EG_DRY_RUN_FAILED: the dry run of no_effect, needed to ask a person for approval, failed: its preview is malformed: effect must be a string such as "would_delete" or "would_charge" (would_ + lower-case words), got undefined. Nothing was executed and no approval was requested.',
      'EG_DRY_RUN_FAILED: the dry run of bad_effect, needed to ask a person for approval, failed: its preview is malformed: effect must be a string such as "would_delete" or "would_charge" (would_ + lower-case words), got "delete". Nothing was executed and no approval was requested.',
      'EG_DRY_RUN_FAILED: the dry run of no_affect, needed to ask a person for approval, failed: its preview is malformed: would_affect must be an object describing what the call would touch (e.g. { "account": "acc_1" }). Nothing was executed and no approval was requested.',
      "EG_DRY_RUN_FAILED: the dry run of no_reversible, needed to ask a person for approval, failed: its preview is malformed: reversible must be true or false. Nothing was executed and no approval was requested.",
      "EG_DRY_RUN_FAILED: the dry run of throws, needed to ask a person for approval, failed: it threw: cannot reach inventory. Nothing was executed and no approval was requested.",
      "EG_DRY_RUN_FAILED: the dry run of nothing, needed to ask a person for approval, failed: its preview is malformed: it returned undefined, not { effect, would_affect, reversible }. Nothing was executed and no approval was requested.",
    ]);
    expect(runs).toBe(0);
    expect(await ledger.governance!.listApprovals()).toEqual([]);
  });
});
