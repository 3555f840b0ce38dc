/**
 * Prometheus metrics from the gate's observer interface, with prom-client (an optional peer:
 * only this module imports it). Counters and the latency histogram are updated as calls end;
 * the ledger gauges (approvals pending, human-queue size) are read when Prometheus scrapes.
 */
import { Counter, Gauge, Histogram, Registry, type RegistryContentType } from "prom-client";
import type { Alert } from "../gate/alerts.js";
import type { GateObserver } from "../gate/observe.js";

export interface PrometheusOptions {
  /** Where the metrics are registered (default: a new Registry; pass prom-client's `register` to use the global one). */
  readonly registry?: Registry<RegistryContentType>;
  /** Metric name prefix (default "effectgate_"). */
  readonly prefix?: string;
  /** Latency buckets in seconds (default: 1 ms to 30 s). */
  readonly buckets?: readonly number[];
  /** Read at each scrape: how many approval requests are pending (see effectgate/prometheus's `ledgerGauges`). */
  readonly approvalsPending?: () => Promise<number>;
  /** Read at each scrape: how many items wait on the human queue. */
  readonly queueSize?: () => Promise<number>;
}

export interface PrometheusObserver extends GateObserver {
  readonly registry: Registry<RegistryContentType>;
  /** The registry's text exposition, for a `/metrics` handler. */
  metrics(): Promise<string>;
  readonly contentType: string;
}

const DEFAULT_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

export function prometheusObserver(options: PrometheusOptions = {}): PrometheusObserver {
  const registry = options.registry ?? new Registry();
  const p = options.prefix ?? "effectgate_";
  const registers = [registry];
  const calls = new Counter({
    name: `${p}calls_total`, help: "Gated tool calls answered, by tool, effect class, outcome (executed, replayed, probed, refused, waiting) and error code",
    labelNames: ["tool", "effect_class", "outcome", "error_type"] as const, registers,
  });
  const latency = new Histogram({
    name: `${p}call_duration_seconds`, help: "Time from a call entering the gate to its answer, by effect class and outcome",
    labelNames: ["effect_class", "outcome"] as const, buckets: [...(options.buckets ?? DEFAULT_BUCKETS)], registers,
  });
  const probes = new Counter({ name: `${p}probe_outcomes_total`, help: "What tools' probes answered (done, absent, running, not_yet, unknown)", labelNames: ["tool", "result"] as const, registers });
  const alerts = new Counter({ name: `${p}alerts_total`, help: "Operator alerts raised, by code", labelNames: ["code"] as const, registers });
  const writeFailures = new Counter({ name: `${p}ledger_write_failures_total`, help: "Outcome writes to the ledger that failed after the tool ran (kept and retried; each raises an alert)", registers });
  const scrapeErrors = new Counter({ name: `${p}ledger_gauge_errors_total`, help: "Scrapes whose ledger gauges could not be read", registers });
  const gauge = (name: string, help: string, read: (() => Promise<number>) | undefined) => {
    if (!read) return;
    new Gauge({
      name, help, registers,
      async collect() {
        try {
          this.set(await read());
        } catch {
          scrapeErrors.inc(); // a scrape must not fail because the ledger is busy or unreachable
        }
      },
    });
  };
  gauge(`${p}approvals_pending`, "Approval requests waiting for a person", options.approvalsPending);
  gauge(`${p}queue_size`, "Items on the human queue (needs_human and compensation_failed calls, open findings)", options.queueSize);

  return {
    registry,
    contentType: registry.contentType,
    metrics: () => registry.metrics(),
    callStarted(call) {
      const effect = call.effect ?? "unknown";
      return {
        end(outcome) {
          calls.inc({ tool: call.tool, effect_class: effect, outcome: outcome.outcome, error_type: outcome.errorType ?? "" });
          latency.observe({ effect_class: effect, outcome: outcome.outcome }, outcome.durationMs / 1000);
          for (const result of outcome.probes) probes.inc({ tool: call.tool, result });
        },
      };
    },
    alert(alert: Alert) {
      alerts.inc({ code: alert.code });
      if (alert.code === "record_failed") writeFailures.inc();
    },
  };
}
