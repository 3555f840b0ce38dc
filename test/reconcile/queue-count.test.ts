/**
 * countQueue: exactly how many items listQueue lists with no limit (calls waiting for a person,
 * less those settled with a resolved saga, plus open findings not about a waiting call), on the
 * memory ledger and the SQLite one, past a page of the count's reads.
 */
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import type { CallState } from "../../src/core/states.js";
import type { Stores } from "../../src/contracts/stores.js";
import type { FindingReport } from "../../src/contracts/findings.js";
import { countQueue, listQueue } from "../../src/reconcile/queue.js";
import { memoryLedger } from "../../src/stores/memory/index.js";
import { sqliteLedger } from "../../src/stores/sqlite/index.js";
import { claimRequest } from "../../src/testing/contract-suites/calls.js";
import { beginRequest, stepRequest } from "../../src/testing/contract-suites/sagas.js";
import { tempDir } from "../support/tmp.js";

const dir = tempDir();
let n = 0;

/** A call moved from its claim to needs_human, or through completed to compensation_failed. */
async function waiting(ledger: Stores, tenant: string, key: string, state: "needs_human" | "compensation_failed" | "completed" = "needs_human"): Promise<void> {
  await ledger.calls.claim(claimRequest({ tenant, key, toolUseId: key }));
  const path: CallState[] = state === "needs_human" ? ["needs_human"] : state === "completed" ? ["completed"] : ["completed", "compensation_failed"];
  let version = 1;
  for (const to of path) if (!(await ledger.calls.update(tenant, key, version++, { state: to, owner: null, error: "lost" }))) throw new Error(`${key} did not move to ${to}`);
}

function finding(id: string, tenant: string | null, key: string, kind: FindingReport["kind"] = "unresolved"): FindingReport {
  return { id, kind, tool: "create_ticket", tenant, key, summary: "differs", ledger: null, downstream: [], differences: [], source: "scan" };
}

/** A saga a person resolved, whose step's call is `saga:order-1:charge`. */
async function resolvedSaga(ledger: Stores): Promise<void> {
  const sagas = ledger.sagas!;
  const event = { kind: "saga_started", message: "x" } as const;
  await sagas.begin(beginRequest(), event);
  await sagas.addStep(stepRequest());
  let version = 1;
  for (const state of ["compensating", "compensation_failed", "resolved"] as const) {
    if (!(await sagas.update("acme", "order-1", version++, { state, ...(state === "resolved" ? { resolution: "undone by hand" } : {}) }))) throw new Error(`saga did not move to ${state}`);
  }
}

const stores: { name: string; open: () => Stores }[] = [
  { name: "memory", open: () => memoryLedger() },
  { name: "SQLite", open: () => sqliteLedger(join(dir, `queue-${n++}.db`), { durability: "process" }) },
];

for (const store of stores) {
  describe(`countQueue on ${store.name}`, () => {
    it("counts what listQueue lists: waiting calls not settled with a saga, and open findings not about a waiting call", async () => {
      const ledger = store.open();
      try {
        expect(await countQueue(ledger)).toBe(0);
        for (const key of ["h1", "h2", "h3"]) await waiting(ledger, "acme", key);
        await waiting(ledger, "acme", "c1", "compensation_failed");
        await waiting(ledger, "globex", "h1");
        await waiting(ledger, "acme", "done", "completed");
        // Settled with the saga a person resolved: neither the step's call nor its compensation waits.
        await resolvedSaga(ledger);
        await waiting(ledger, "acme", "saga:order-1:charge", "compensation_failed");
        await waiting(ledger, "acme", "saga:order-1:charge:compensate");
        // A saga-shaped key that is no step of that saga still waits.
        await waiting(ledger, "acme", "saga:order-1:other");
        const r = ledger.reconcile!;
        await r.recordFinding(finding("f_h1a", "acme", "h1"));
        await r.recordFinding(finding("f_h1b", "acme", "h1", "mismatch"));
        await r.recordFinding(finding("f_g", "globex", "h1"));
        await r.recordFinding(finding("f_done", "acme", "done", "missing_downstream"));
        await r.recordFinding(finding("f_orphan", null, "h2", "orphan_downstream"));
        await r.recordFinding(finding("f_saga", "acme", "saga:order-1:charge"));
        await r.recordFinding(finding("f_fixed", "acme", "h3"));
        await r.resolveFinding("f_fixed", { note: "checked" });
        const listed = await listQueue(ledger, { limit: 10_000 });
        // Calls h1 h2 h3 c1 saga:order-1:other (acme), h1 (globex); findings f_done, f_orphan, f_saga (its call is settled with the saga).
        expect(listed.map((i) => i.id).sort()).toEqual(["c1", "f_done", "f_orphan", "f_saga", "h1", "h1", "h2", "h3", "saga:order-1:other"]);
        expect(await countQueue(ledger)).toBe(9);
        expect(await countQueue(ledger, { tenant: "acme" })).toBe((await listQueue(ledger, { tenant: "acme", limit: 10_000 })).length);
        expect(await countQueue(ledger, { tenant: "acme" })).toBe(7);
        expect(await countQueue(ledger, { tenant: "globex" })).toBe(1);
        expect(await countQueue(ledger, { tenant: "__proto__" })).toBe(0);
        // Without a reconcile store there are no findings: the waiting calls alone.
        const { location, calls, checkpoints, sagas } = ledger;
        expect(await countQueue({ location, calls, checkpoints, ...(sagas ? { sagas } : {}), close: () => ledger.close() })).toBe(6);
      } finally {
        await ledger.close();
      }
    });

    it("past a page of its reads: every waiting call and every open finding, once", async () => {
      const ledger = store.open();
      try {
        const many = 1_234; // 1,110 needs_human: more than one page of them
        for (let start = 0; start < many; start += 200) {
          await Promise.all(Array.from({ length: Math.min(200, many - start) }, (_, j) => waiting(ledger, "acme", `k${start + j}`, (start + j) % 10 === 0 ? "compensation_failed" : "needs_human")));
        }
        // One finding about each of the first 300 calls (listed with it), 1,100 about nothing waiting.
        for (let i = 0; i < 300; i++) await ledger.reconcile!.recordFinding(finding(`f_k${i}`, "acme", `k${i}`));
        for (let i = 0; i < 1_100; i++) await ledger.reconcile!.recordFinding(finding(`f_o${i}`, "acme", `gone${i}`, "orphan_downstream"));
        expect(await countQueue(ledger)).toBe(many + 1_100);
        expect(await countQueue(ledger)).toBe((await listQueue(ledger, { limit: 100_000 })).length);
      } finally {
        await ledger.close();
      }
    }, 60_000);
  });
}
