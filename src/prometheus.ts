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
import { countQueue } from "./reconcile/queue.js";

export { prometheusObserver, type PrometheusObserver, type PrometheusOptions } from "./observability/prometheus.js";

/**
 * The ledger gauges' readers, exact and never capped, as the console counts them: approvals pending
 * (one indexed count) and the human queue's size (`countQueue`: its cost follows the calls waiting
 * for a person, not the ledger).
 */
export function ledgerGauges(ledger: Stores): { approvalsPending: () => Promise<number>; queueSize: () => Promise<number> } {
  return {
    approvalsPending: async () => (ledger.governance ? await ledger.governance.countApprovals({ state: "pending" }) : 0),
    queueSize: () => countQueue(ledger),
  };
}
