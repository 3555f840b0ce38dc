/**
 * `effectgate serve`: the operator console and its JSON API on one ledger, until interrupted.
 * The token is made on first start, kept beside the ledger (or in --token-file) with mode 0600,
 * and printed only that once, inside the link that opens the console.
 */
import { dirname, join, resolve } from "node:path";
import { EffectgateError } from "../core/errors.js";
import type { Stores } from "../contracts/stores.js";
import { startConsole } from "../root/console/server.js";
import { loadOrCreateToken } from "../root/console/token.js";
import { defaultOperator } from "./operator.js";
import { chosenTarget, openLedgerForChanges, openNow } from "./open-ledger.js";
import { CliError, EXIT_USAGE } from "./errors.js";

export interface ServeOptions {
  readonly db: string;
  readonly port: number;
  readonly host: string;
  readonly allowRemote: boolean;
  readonly tokenFile?: string;
  readonly pollMs: number;
  readonly headersTimeoutMs: number;
  readonly requestTimeoutMs: number;
  readonly keepAliveTimeoutMs: number;
  readonly maxConnections: number;
  readonly maxEventStreams: number;
}

/** The token file: --token-file, else `console-token` beside a ledger file, else in .effectgate/ of the working directory. */
export function tokenFileFor(options: Pick<ServeOptions, "db" | "tokenFile">): string {
  if (options.tokenFile !== undefined) return resolve(options.tokenFile);
  const target = chosenTarget(options.db);
  return target.kind === "file" ? join(dirname(resolve(target.path)), "console-token") : resolve(".effectgate", "console-token");
}

/** `/metrics` with the ledger's gauges (approvals pending, queue size) when prom-client is installed; none otherwise. */
async function ledgerMetrics(ledger: Stores): Promise<(() => Promise<{ contentType: string; body: string }>) | undefined> {
  const prometheus = await import("../prometheus.js").catch(() => undefined); // prom-client is an optional peer
  if (!prometheus) return undefined;
  const observer = prometheus.prometheusObserver(prometheus.ledgerGauges(ledger));
  return async () => ({ contentType: observer.contentType, body: await observer.metrics() });
}

export async function serve(options: ServeOptions): Promise<void> {
  const opened = await openNow(openLedgerForChanges(options.db));
  let token;
  try {
    token = loadOrCreateToken(tokenFileFor(options));
  } catch (err) {
    await opened.ledger.close();
    throw err;
  }
  const metrics = await ledgerMetrics(opened.ledger);
  let server;
  try {
    server = await startConsole({
      ...(metrics ? { metrics } : {}),
      ledger: opened.ledger, token: token.token, host: options.host, port: options.port, allowRemote: options.allowRemote,
      pollMs: options.pollMs, operator: `${defaultOperator()} (console)`,
      headersTimeoutMs: options.headersTimeoutMs, requestTimeoutMs: options.requestTimeoutMs, keepAliveTimeoutMs: options.keepAliveTimeoutMs,
      maxConnections: options.maxConnections, maxEventStreams: options.maxEventStreams,
    });
  } catch (err) {
    await opened.ledger.close();
    if (err instanceof EffectgateError && err.code === "EG_BAD_OPTION") throw new CliError(err.message, EXIT_USAGE);
    throw err;
  }
  // Listen for the stop signals before printing: whoever reads the URL may stop the server at once.
  const stopped = new Promise<void>((done) => {
    const stop = () => {
      process.off("SIGINT", stop);
      process.off("SIGTERM", stop);
      void server.close().then(() => opened.ledger.close()).finally(done);
    };
    process.on("SIGINT", stop);
    process.on("SIGTERM", stop);
  });
  const out = (line: string) => process.stdout.write(`${line}\n`);
  out(`effectgate console for ${opened.file}`);
  out(`listening on ${server.url}`);
  if (token.created) {
    out(`A new token was made and saved in ${token.file} (mode 0600). It is shown this once; open the console with:`);
    out(`  ${server.url}#token=${encodeURIComponent(token.token)}`);
  } else {
    out(`Token: the one in ${token.file} (open ${server.url}#token=TOKEN, or paste it when asked).`);
  }
  if (metrics) out(`Metrics: ${server.url}metrics (Prometheus text, same token).`);
  out(`API: ${server.url}api/ with "Authorization: Bearer TOKEN" (described at ${server.url}api/openapi.json). Stop with Ctrl-C.`);
  await stopped;
}
