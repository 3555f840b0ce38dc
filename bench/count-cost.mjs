/**
 * What the console's blast radius (CallStore.countByStateAndEffect: one grouped COUNT) costs on
 * SQLite as the ledger grows: N calls written straight into a migrated ledger file in one
 * transaction (10 tenants, every state, the three effect classes), then the median of 5 counts of
 * every call and of one tenant's (a tenth). Also the approvals-pending count beside 10,000 requests.
 *
 *   npm run build && nice node bench/count-cost.mjs [--calls=100000,1000000]
 *
 * Never part of the tests.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import os from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const Database = createRequire(import.meta.url)(join(root, "node_modules/better-sqlite3"));
const { sqliteLedger } = await import(join(root, "dist/sqlite.js"));
const { CALL_STATES } = await import(join(root, "dist/core/states.js"));
const arg = (name) => process.argv.slice(2).find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
const SIZES = (arg("calls") ?? "100000,1000000").split(",").map(Number);
const EFFECTS = ["read", "write", "destructive"];
const dir = mkdtempSync(join(os.tmpdir(), "effectgate-count-cost-"));

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
async function timed(run) {
  const times = [];
  let answer;
  for (let i = 0; i < 5; i++) {
    const t0 = performance.now();
    answer = await run();
    times.push(performance.now() - t0);
  }
  return { ms: median(times), answer };
}

try {
  for (const n of SIZES) {
    const file = join(dir, `ledger-${n}.db`);
    const ledger = sqliteLedger(file, { durability: "process" });
    await ledger.calls.list({ limit: 1 }); // creates and migrates the file
    await ledger.close();
    const db = new Database(file);
    const insert = db.prepare(`INSERT INTO calls (tenant, key, tool, effect, task, tool_use_id, fingerprint, input, input_redacted, state, result,
        error, owner, lease_expires_at, attempts, version, created_at, updated_at, fence, started_at, claim_token)
      VALUES (@tenant, @key, 'send_email', @effect, @task, @key, 'fp', '{"to":"someone@example.com"}', 0, @state, 'null', NULL, NULL, NULL, 1, 2, @at, @at, 1, @at, 'x')`);
    const approval = db.prepare(`INSERT INTO approvals (id, tenant, key, tool, effect, task, agent, tool_use_id, input, preview, reasons, digest, policy_version,
        state, requested_by, requested_at, expires_at) VALUES (@id, 't0', @id, 'delete_account', 'destructive', 't', NULL, @id, '{}', NULL, '[]', 'd', 'v1', @state, 'bot', @at, @at)`);
    const t0 = performance.now();
    db.transaction(() => {
      for (let i = 0; i < n; i++) {
        insert.run({ tenant: `t${i % 10}`, key: `k${i}`, effect: EFFECTS[i % 3], task: `task${Math.floor(i / 10)}`, state: CALL_STATES[i % 7], at: i });
      }
      for (let i = 0; i < 10_000; i++) approval.run({ id: `apr_${i}`, state: i % 4 === 0 ? "pending" : "consumed", at: i });
    })();
    db.close();
    const wrote = performance.now() - t0;
    const opened = sqliteLedger(file, { durability: "process" });
    const all = await timed(() => opened.calls.countByStateAndEffect());
    const tenant = await timed(() => opened.calls.countByStateAndEffect({ tenant: "t3" }));
    const pending = await timed(() => opened.governance.countApprovals({ state: "pending" }));
    const total = all.answer.reduce((sum, c) => sum + c.count, 0);
    await opened.close();
    if (total !== n) throw new Error(`counted ${total} calls, wrote ${n}`);
    console.log(`${n.toLocaleString("en")} calls (written in ${(wrote / 1000).toFixed(1)} s): every call ${all.ms.toFixed(1)} ms, one tenant's (${(n / 10).toLocaleString("en")}) ${tenant.ms.toFixed(1)} ms; approvals pending (2,500 of 10,000) ${pending.ms.toFixed(2)} ms`);
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}
