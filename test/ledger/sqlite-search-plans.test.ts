/**
 * What ledger search costs on SQLite, as SQLite plans it on a file of 50,000 records (the store's
 * own schema): a task's calls and the list as a whole walk an index in the list order and stop
 * after a page; few-record states and a key sort only what their small indexes hold; a tenant is
 * found by the primary key and sorted; a tool or task alone walks the list order. A call's approval
 * requests and the pending count walk their indexes too.
 */
import { join } from "node:path";
import Database from "better-sqlite3";
import { describe, expect, it } from "vitest";
import type { ListQuery } from "../../src/contracts/calls.js";
import { sqliteLedger } from "../../src/stores/sqlite/index.js";
import { callStatements } from "../../src/stores/sql/call-statements.js";
import { approvalsSql } from "../../src/stores/sqlite/governance.js";
import { tempDir } from "../support/tmp.js";

const DIALECT = { name: "sqlite", table: (name: string) => name, now: "@now", fromClock: "", joinClock: "", usingClock: "", param: (name: string) => `@${name}` } as const;

describe("sqlite ledger search plans", () => {
  it("a task walks its index in the list order, other filters the list order or the primary key; few-record states walk their partial index", async () => {
    const file = join(tempDir(), "plans.db");
    const ledger = sqliteLedger(file);
    await ledger.calls.list({ limit: 1 }); // creates and migrates the file
    await ledger.close();
    const db = new Database(file);
    try {
      const insert = db.prepare(`INSERT INTO calls (tenant, key, tool, effect, task, tool_use_id, fingerprint, input, input_redacted, state, result,
          error, owner, lease_expires_at, attempts, version, created_at, updated_at, fence, started_at, claim_token)
        VALUES (@tenant, @key, @tool, 'write', @task, @key, 'fp', '{}', 0, @state, 'null', NULL, NULL, NULL, 1, 2, @at, @at, 1, @at, 'x')`);
      db.transaction(() => {
        for (let i = 0; i < 50_000; i++) {
          insert.run({ tenant: `t${i % 50}`, key: `k${i}`, tool: i % 1000 === 0 ? "delete_account" : "send_email", task: `task${Math.floor(i / 10)}`, state: i % 1000 === 0 ? "needs_human" : "completed", at: i });
        }
      })();
      const sql = callStatements(DIALECT);
      const plan = (query: ListQuery) => {
        const list = sql.list({ ...query, limit: 50 });
        return (db.prepare(`EXPLAIN QUERY PLAN ${list.sql.text}`).all(list.values) as { detail: string }[]).map((r) => r.detail).join(" | ");
      };
      const after = { createdAt: 40_000, tenant: "t0", key: "k40000" };
      const inOrder: Record<string, [ListQuery, string]> = {
        everything: [{}, "SCAN calls USING INDEX calls_by_created"],
        // A task's calls (with its tenant) are indexed in the list order: the intent window reads them on every repeatable write.
        "tenant and task": [{ tenant: "t7", task: "task7" }, "SEARCH calls USING INDEX calls_by_task (tenant=? AND task=?)"],
        // No index per filter (each would be one more page written by every claim): a tenant is found by the primary key and sorted,
        tenant: [{ tenant: "t7" }, "SEARCH calls USING INDEX sqlite_autoindex_calls_1 (tenant=?) | USE TEMP B-TREE FOR ORDER BY"],
        "tenant, after a cursor": [{ tenant: "t7", after }, "SEARCH calls USING INDEX sqlite_autoindex_calls_1 (tenant=?) | USE TEMP B-TREE FOR ORDER BY"],
        // a tool or a task alone walks the list order and stops after a page (a scan for a rare one).
        tool: [{ tool: "delete_account" }, "SCAN calls USING INDEX calls_by_created"],
        task: [{ task: "task7" }, "SCAN calls USING INDEX calls_by_created"],
        "tool, after a cursor": [{ tool: "delete_account", after }, "SEARCH calls USING INDEX calls_by_created (created_at>?)"],
        "a time range": [{ createdFrom: 10_000, createdTo: 20_000 }, "SEARCH calls USING INDEX calls_by_created (created_at>? AND created_at<?)"],
      };
      for (const [name, [query, expected]] of Object.entries(inOrder)) expect(plan(query), name).toBe(expected);
      // States kept in partial indexes: only their few records are sorted.
      expect(plan({ state: "needs_human" })).toBe("SEARCH calls USING INDEX calls_attention (state=?) | USE TEMP B-TREE FOR ORDER BY");
      expect(plan({ state: "uncertain" })).toBe("SEARCH calls USING INDEX calls_unsettled (state=?) | USE TEMP B-TREE FOR ORDER BY");
      expect(plan({ key: "k7" })).toBe("SEARCH calls USING INDEX calls_by_key (key=?) | USE TEMP B-TREE FOR ORDER BY");
      // And the answers are the records themselves, in the list order.
      const needsHuman = sql.list({ state: "needs_human", limit: 3 });
      expect((db.prepare(needsHuman.sql.text).all(needsHuman.values) as { key: string }[]).map((r) => r.key)).toEqual(["k0", "k1000", "k2000"]);
    } finally {
      db.close();
    }
  }, 60_000);

  it("approvals: a call's requests walk approvals_by_key, the pending count approvals_by_state; neither reads every request", async () => {
    const file = join(tempDir(), "approval-plans.db");
    const ledger = sqliteLedger(file);
    await ledger.governance!.listApprovals({ limit: 1 }); // creates and migrates the file
    await ledger.close();
    const db = new Database(file);
    try {
      const plan = (query: Parameters<typeof approvalsSql>[0], what: "list" | "count") => {
        const { text, values } = approvalsSql(query, what);
        return (db.prepare(`EXPLAIN QUERY PLAN ${text}`).all({ ...values, ...(what === "list" ? { limit: 50 } : {}) }) as { detail: string }[]).map((r) => r.detail).join(" | ");
      };
      expect(plan({ tenant: "acme", key: "k1" }, "list")).toMatch(/^SEARCH approvals USING INDEX approvals_by_key \(key=\?\)/);
      expect(plan({ key: "k1" }, "list")).toMatch(/^SEARCH approvals USING INDEX approvals_by_key \(key=\?\)/);
      expect(plan({ state: "pending" }, "count")).toBe("SEARCH approvals USING COVERING INDEX approvals_by_state (state=?)");
      // A WITHOUT ROWID table's index ends with its primary key: (state, requested_at, id) is the listing order itself.
      expect(plan({ state: "pending" }, "list")).toBe("SEARCH approvals USING INDEX approvals_by_state (state=?)");
    } finally {
      db.close();
    }
  });
});
