/**
 * effectgate/prometheus: Prometheus metrics for a gate (needs `npm install prom-client`, 15.x).
 *
 *   import { createGate } from "effectgate";
 *   import { prometheusObserver, ledgerGauges } from "effectgate/prometheus";
 *   const metrics = prometheusObserver({ ...ledgerGauges(ledger) });
 *   const gate = createGate({ tools, ledger, observers: [metrics] });
 *   // in your HTTP server: res.setHeader("Content-Type", metrics.contentType); res.end(await metrics.metrics());
 */
import type { Stores } from "./contracts/stores.js";
import { listQueue } from "./reconcile/queue.js";

export { prometheusObserver, type PrometheusObserver, type PrometheusOptions } from "./observability/prometheus.js";

/** The ledger gauges' readers: approvals pending and the human queue's size, as the console counts them. */
export function ledgerGauges(ledger: Stores): { approvalsPending: () => Promise<number>; queueSize: () => Promise<number> } {
  return {
    approvalsPending: async () => (ledger.governance ? (await ledger.governance.listApprovals({ state: "pending", limit: 100_000 })).length : 0),
    queueSize: async () => (await listQueue(ledger, { limit: 100_000 })).length,
  };
}
