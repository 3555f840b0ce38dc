/**
 * Governance through the gateway, with real processes: approvals asked through the host's
 * elicitation (accepted, declined, cancelled), left pending for `effectgate approvals` when the
 * host cannot be asked (fail closed), quotas stopping a runaway loop, grants hiding tools.
 */
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { ElicitRequestSchema, type ElicitResult } from "@modelcontextprotocol/sdk/types.js";
import { describe, expect, it } from "vitest";
import { runCli } from "../cli/run-cli.js";
import { requireBuild } from "../support/processes.js";
import { startGateway, text, workspace } from "./support.js";

requireBuild();
// Real processes on a shared 2-core machine: a slow start is load, not a failure (no assertion is on time).
const PROCESS_TEST_TIMEOUT_MS = 120_000;

/** A host whose user answers every elicitation with `answer`; the requests it got are collected. */
function elicitingHost(answer: ElicitResult) {
  const asked: string[] = [];
  return {
    asked,
    options: {
      capabilities: { elicitation: { form: {} } },
      setup: (client: Client) =>
        client.setRequestHandler(ElicitRequestSchema, (request) => {
          asked.push(request.params.message);
          return answer;
        }),
    },
  };
}

describe("approvals of destructive calls", { timeout: PROCESS_TEST_TIMEOUT_MS }, () => {
  it("the host declares elicitation and its user accepts: the call runs once", async () => {
    const ws = workspace();
    const user = elicitingHost({ action: "accept", content: { approve: true } });
    const host = await startGateway(ws, user.options);
    try {
      const result = await host.call("delete_account", { account: "acc_9" }, { toolUseId: "toolu_del" });
      expect(result.isError).toBeFalsy();
      expect(text(result)).toBe("deleted acc_9 (#1)");
      expect(user.asked).toHaveLength(1);
      expect(user.asked[0]).toMatch(/delete_account \(destructive\).*would_call \{"tool":"delete_account","arguments":\{"account":"acc_9"\}\}.*Approval apr_/);
      // The repeat is answered from the ledger: no second question, no second deletion.
      expect(await host.call("delete_account", { account: "acc_9" }, { toolUseId: "toolu_del" })).toEqual(result);
      expect(user.asked).toHaveLength(1);
      expect(ws.effects("delete_account")).toHaveLength(1);
    } finally {
      await host.close();
    }
  });

  it("the host's user declines: refused, nothing run, and the repeat stays refused", async () => {
    const ws = workspace();
    const user = elicitingHost({ action: "decline" });
    const host = await startGateway(ws, user.options);
    try {
      const result = await host.call("delete_account", { account: "acc_1" }, { toolUseId: "toolu_no" });
      expect(result.isError).toBe(true);
      expect(text(result)).toMatch(/^EG_APPROVAL_DENIED: test-host user \(MCP elicitation\) denied this delete_account call .*declined in the host.*It was not executed/);
      expect(text(await host.call("delete_account", { account: "acc_1" }, { toolUseId: "toolu_no" }))).toMatch(/^EG_APPROVAL_DENIED: /);
      expect(ws.effects()).toEqual([]);
    } finally {
      await host.close();
    }
  });

  it("the host's user cancels the form: left pending, nothing run (fail closed)", async () => {
    const ws = workspace();
    const user = elicitingHost({ action: "cancel" });
    const host = await startGateway(ws, user.options);
    try {
      const result = await host.call("delete_account", { account: "acc_2" }, { toolUseId: "toolu_cancel" });
      expect(text(result)).toMatch(/^EG_AWAITING_APPROVAL: /);
      expect(ws.effects()).toEqual([]);
    } finally {
      await host.close();
    }
  });

  it("a host without elicitation: the call waits for `effectgate approvals approve` and runs once when repeated after it", async () => {
    const ws = workspace();
    const host = await startGateway(ws);
    try {
      const waiting = await host.call("delete_account", { account: "acc_3" }, { toolUseId: "toolu_wait" });
      expect(waiting.isError).toBe(true);
      expect(text(waiting)).toMatch(/^EG_AWAITING_APPROVAL: this delete_account call needs a person's approval .*Nothing was executed\. Repeat this same call/);
      expect(ws.effects()).toEqual([]);
      // Still pending: asked again, still nothing runs.
      expect(text(await host.call("delete_account", { account: "acc_3" }, { toolUseId: "toolu_wait" }))).toMatch(/^EG_AWAITING_APPROVAL: /);
      expect(ws.effects()).toEqual([]);

      const id = /\b(apr_[0-9a-f]+)\b/.exec(text(waiting))?.[1];
      expect(id).toBeDefined();
      const approved = await runCli(["approvals", "approve", id ?? "", "--db", ws.db, "--by", "ops"], { cwd: ws.dir });
      expect(approved.stderr).toBe("");
      expect(approved.code).toBe(0);

      const ran = await host.call("delete_account", { account: "acc_3" }, { toolUseId: "toolu_wait" });
      expect(text(ran)).toBe("deleted acc_3 (#1)");
      expect(await host.call("delete_account", { account: "acc_3" }, { toolUseId: "toolu_wait" })).toEqual(ran);
      expect(ws.effects()).toHaveLength(1);
    } finally {
      await host.close();
    }
  });

  it("the config overrides an annotation: a tool declared write runs without approval, one declared destructive needs it", async () => {
    const ws = workspace({ tools: { delete_account: { effect: "write" }, create_ticket: { effect: "destructive" } } });
    const host = await startGateway(ws);
    try {
      expect(text(await host.call("delete_account", { account: "acc_4" }, { toolUseId: "toolu_w" }))).toBe("deleted acc_4 (#1)");
      expect(text(await host.call("create_ticket", { title: "t" }, { toolUseId: "toolu_d" }))).toMatch(/^EG_AWAITING_APPROVAL: /);
      expect(ws.effects().map((e) => e.tool)).toEqual(["delete_account"]);
    } finally {
      await host.close();
    }
  });
});

describe("quotas and grants", { timeout: PROCESS_TEST_TIMEOUT_MS }, () => {
  it("a quota stops a runaway loop of 50 calls at its limit", async () => {
    const ws = workspace({ policy: { quotas: [{ per: "task", tool: "send_email", limit: 5 }] } });
    const host = await startGateway(ws);
    try {
      const results = [];
      for (let i = 0; i < 50; i++) results.push(await host.call("send_email", { to: "victim@example.com", subject: `spam ${i}` }, { toolUseId: `toolu_loop_${i}` }));
      expect(results.filter((r) => !r.isError)).toHaveLength(5);
      const refused = results.filter((r) => r.isError);
      expect(refused).toHaveLength(45);
      for (const r of refused) expect(text(r)).toMatch(/^EG_QUOTA_EXCEEDED: send_email would pass its quota .*used 5 of 5.*It was not executed/);
      expect(ws.effects("send_email")).toHaveLength(5);
    } finally {
      await host.close();
    }
  });

  it("a tool that is not granted is hidden from tools/list and refused if called anyway", async () => {
    const ws = workspace({ policy: { grants: [{ tools: ["create_ticket"] }] } });
    const host = await startGateway(ws);
    try {
      const { tools } = await host.client.listTools();
      expect(tools.map((t) => t.name).sort()).toEqual(["add_tool", "count_effects", "create_ticket", "find_ticket_by_key"]);
      const refused = await host.call("send_email", { to: "a@example.com", subject: "s" }, { toolUseId: "toolu_ng" });
      expect(refused.isError).toBe(true);
      expect(text(refused)).toMatch(/^EG_NOT_GRANTED: send_email \(a write tool\) is not granted in task mcp of tenant default .*It was not executed/);
      expect(ws.effects()).toEqual([]);
      expect((await host.call("create_ticket", { title: "fine" }, { toolUseId: "toolu_g" })).isError).toBeFalsy();
    } finally {
      await host.close();
    }
  });
});
