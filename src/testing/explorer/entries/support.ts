/**
 * What the world entries (mcp.ts, langchain-hitl.ts, middleware.ts) share beside schedule.ts's
 * own pieces: the machine clock the product reads through Date.now, the person deciding approval
 * requests on the ledger, and the violations list without repeats.
 */
import { isDeepStrictEqual } from "node:util";
import { canonicalJson } from "../../../core/keys.js";
import type { Json } from "../../../core/json.js";
import type { Stores } from "../../../contracts/stores.js";
import { decideApproval } from "../../../governance/approvals.js";
import type { Violation } from "../invariants.js";
import type { Rng } from "../rng.js";
import type { World } from "../world.js";

/**
 * Makes `Date.now()` read the world's clock (plus `skewMs`: the machine's clock against the
 * store's) until the returned function is called. Some of the product reads the machine's clock
 * directly instead of a TimeSource (the MCP gateway's dedupe window, decideCall's default `now`,
 * the Anthropic adapter's approval wait): under simulated time, they must see simulated time.
 * Schedules run one at a time, so one clock at a time is enough.
 */
export function machineClock(world: World, skewMs: number): () => void {
  const real = Date.now;
  Date.now = () => world.wall() + skewMs;
  return () => {
    Date.now = real;
  };
}

/** A person deciding every pending approval request of `tenant` on the ledger itself (85% approved). */
export async function decidePending(world: World, stores: Stores, tenant: string, rng: Rng): Promise<void> {
  const governance = stores.governance;
  if (!governance) return;
  for (const request of await world.track(governance.listApprovals({ tenant, state: "pending" }))) {
    const approve = rng.chance(0.85);
    await world.track(decideApproval(governance, request.id, { approve, by: "explorer", note: approve ? "looks right" : "not this one" }, world.wall()));
    world.log(`person ${approve ? "approved" : "denied"} ${request.id} (${request.tool})`);
  }
}

export function dedupe(violations: readonly Violation[]): Violation[] {
  const out: Violation[] = [];
  for (const v of violations) if (!out.some((o) => isDeepStrictEqual(o, v))) out.push(v);
  return out;
}

/** A JSON value with its keys in canonical order, so two spellings of one result compare equal as text. */
export function canonical(value: unknown): Json {
  return value === undefined ? null : (JSON.parse(canonicalJson(value)) as Json);
}

/** A promise that never settles: what a dead process's pending work comes to. */
export function never<T>(): Promise<T> {
  return new Promise<T>(() => undefined);
}
