/**
 * The logger effectgate writes operational events and alerts to: the subset of pino's interface
 * it uses (`logger.error(obj, msg)`), so an application passes its own pino, bunyan-like or
 * custom logger and routes them. The default writes one JSON line per event on stderr.
 */
export interface Logger {
  error(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
  info(obj: object, msg?: string): void;
}

function line(level: "error" | "warn" | "info", obj: object, msg: string | undefined): void {
  process.stderr.write(`${JSON.stringify({ level, time: Date.now(), source: "effectgate", ...obj, ...(msg === undefined ? {} : { msg }) })}\n`);
}

/** JSON lines on stderr: effectgate's default. */
export const stderrLogger: Logger = {
  error: (obj, msg) => line("error", obj, msg),
  warn: (obj, msg) => line("warn", obj, msg),
  info: (obj, msg) => line("info", obj, msg),
};

/** Drops everything (for tests that check behaviour, not logs). */
export const silentLogger: Logger = { error: () => {}, warn: () => {}, info: () => {} };
