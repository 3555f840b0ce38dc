/**
 * The explorer's PostgreSQL ledger behind the wire-level proxy (pg-proxy.ts): faults below the
 * store, on top of the schedule's own. Each schedule opens its own ledger (its own pool, so no
 * connection outlives it) on one shared schema, through one proxy whose plan is seeded by the
 * schedule's seed: the same seed sends the same requests in the same order (the world lets one
 * ledger step run at a time) and they meet the same cuts, dropped COMMIT replies, delays and
 * stalls, so a schedule replays alone exactly as it ran among others.
 *
 * The schedule's own bookkeeping is not under test, and it expects a ledger without faults once it
 * settles: the reads it makes on the ledger directly (calls.list for what is held and the final
 * records) and the person deciding approvals (governance.listApprovals, getApproval, moveApproval)
 * go to a second ledger on the same schema without the proxy, and a read through the proxy that a
 * wire fault failed is sent again (up to 3 times; the fault itself, and the broken connection under
 * it, still happened): gate.recover() lets a failed read of its own through to its caller, which
 * the settling schedule does not expect. Every write goes through the proxy and meets its faults,
 * whoever makes it; the schedule's own per-step faults (ledger.ts) reach every method as before.
 */
import { isEffectgateError } from "../../core/errors.js";
import type { Stores } from "../../contracts/stores.js";
import { migratePostgres, postgresLedger } from "../../stores/postgres/index.js";
import { dropSchema } from "./pg-schema.js";
import { DEFAULT_PROXY_RATES, seededProxyPlan, startPgProxy, type ProxyCounts, type ProxyFaultRates } from "./pg-proxy.js";
import { seededRng } from "./rng.js";
import { isReadMethod, withMethods, type StoreMethod } from "./store-methods.js";
import type { ScheduleLedger } from "./schedule.js";

export interface ProxiedOpener {
  readonly name: string;
  open(seed: number, clock: () => number): Promise<ScheduleLedger>;
  /** What the proxy injected so far, summed over the schedules. */
  counts(): ProxyCounts;
  close(): Promise<void>;
}

/** Mixed into the seed, so the proxy's draws are not the schedule's own. */
const PROXY_STREAM = 0x9e3779b1;

/** What the schedule itself calls on its ledger, sent without the proxy. */
const BOOKKEEPING = { calls: ["list"], governance: ["listApprovals", "getApproval", "moveApproval"] } as const;

const READ_TRIES = 3;

/** `store` with the `names` methods taken from `clean`, and its reads sent again after a failure to reach the database. */
function routed<T extends object>(store: T, clean: T, names: readonly string[] = []): T {
  return withMethods(store, (name, method) => {
    if (names.includes(name)) return (Reflect.get(clean, name) as StoreMethod).bind(clean);
    if (!isReadMethod(name)) return method;
    return async (...args) => {
      for (let tries = 1; ; tries++) {
        try {
          return await method(...args);
        } catch (err) {
          if (tries >= READ_TRIES || !isEffectgateError(err, "EG_LEDGER_UNAVAILABLE")) throw err;
        }
      }
    };
  });
}

export async function proxiedPostgres(connectionString: string, rates: ProxyFaultRates = DEFAULT_PROXY_RATES): Promise<ProxiedOpener> {
  const target = new URL(connectionString);
  const proxy = await startPgProxy({ target: { host: target.hostname || "127.0.0.1", port: Number(target.port || 5432) } });
  const schema = `effectgate_explore_${process.pid}_${Date.now().toString(36)}`;
  // Migrated before the first schedule, past the proxy: otherwise the first schedule's gates create the schema through it,
  // and those requests draw from its plan, so a seed replayed alone would meet other faults than among others.
  await migratePostgres(connectionString, schema);
  // The bookkeeping ledger's clock follows the schedule running now.
  let now: () => number = Date.now;
  const clean = postgresLedger({ connectionString, poolSize: 2 }, { schema, durability: "process", clock: () => now() });
  return {
    name: "postgres+proxy",
    async open(seed, clock) {
      now = clock;
      proxy.setPlan(seededProxyPlan(seededRng((seed ^ PROXY_STREAM) >>> 0), rates));
      const faulty = postgresLedger({ connectionString: proxy.through(connectionString), poolSize: 4, connectTimeoutMs: 5_000 }, { schema, durability: "process", clock });
      const stores: Stores = {
        location: faulty.location,
        calls: routed(faulty.calls, clean.calls, BOOKKEEPING.calls),
        checkpoints: routed(faulty.checkpoints, clean.checkpoints),
        ...(faulty.governance && clean.governance ? { governance: routed(faulty.governance, clean.governance, BOOKKEEPING.governance) } : {}),
        ...(faulty.sagas && clean.sagas ? { sagas: routed(faulty.sagas, clean.sagas) } : {}),
        ...(faulty.reconcile && clean.reconcile ? { reconcile: routed(faulty.reconcile, clean.reconcile) } : {}),
        close: () => faulty.close(),
      };
      return {
        stores, tenant: `s${seed}`, prefix: `s${seed}_`,
        async release() {
          proxy.setPlan(undefined);
          await faulty.close();
        },
      };
    },
    counts: () => proxy.counts(),
    async close() {
      await clean.close();
      await proxy.close();
      await dropSchema(connectionString, schema);
    },
  };
}
