import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { sqliteLedger } from "../../src/stores/sqlite/index.js";
import { tempDir } from "../support/tmp.js";
import { newApproval } from "../../src/testing/contract-suites/governance.js";

// The GovernanceStore contract suite runs on every store in test/ledger/{memory,sqlite,postgres}.test.ts.
const dir = tempDir();

describe("sqlite governance state", () => {
  it("lives in the ledger file: it survives close and reopen, and a read-only opening sees it", async () => {
    const file = join(dir, "reopen.db");
    const a = sqliteLedger(file);
    await a.governance!.setKillSwitch({ tenant: "acme" }, true, { by: "alice" }, 1);
    await a.governance!.putApproval(newApproval());
    await a.governance!.consumeQuota({ tenant: "acme", key: "k", charges: [{ counter: "c", limit: 5, amount: 2 }], now: 1 });
    await a.close();
    const b = sqliteLedger(file, { readOnly: true });
    expect(await b.governance!.activeKillSwitch("acme", undefined)).toMatchObject({ by: "alice" });
    expect((await b.governance!.getApproval("apr_1"))?.state).toBe("pending");
    expect((await b.governance!.quotaUsage(["c"])).get("c")).toBe(2);
    await expect(b.governance!.setKillSwitch({}, true, { by: "x" }, 1)).rejects.toThrow(/EG_LEDGER_UNAVAILABLE/);
    await b.close();
  });
});
