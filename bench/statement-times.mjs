/**
 * Where a gated write's time goes on SQLite: runs bench/gate-loop.mjs with every better-sqlite3
 * statement timed (`npm run build` first). Prints, per statement, how often it ran and its median
 * and 90th percentile, next to the loop's own median per call: the statements' share is what the
 * SQL (and its fsync) costs, the rest is the gate's and the store's JavaScript.
 *
 *   node bench/statement-times.mjs [fsync|process] [calls]
 */
import { createRequire } from "node:module";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const Database = createRequire(join(root, "package.json"))("better-sqlite3");
const times = new Map();
const prepare = Database.prototype.prepare;
Database.prototype.prepare = function timedPrepare(sql) {
  const statement = prepare.call(this, sql);
  const name = `${sql.replace(/\s+/g, " ").slice(0, 60)}${sql.includes("kill_switches") ? " … (with the kill-switch check)" : ""}`;
  for (const method of ["all", "get", "run"]) {
    const original = statement[method].bind(statement);
    statement[method] = (...args) => {
      const t0 = process.hrtime.bigint();
      try {
        return original(...args);
      } finally {
        const list = times.get(name) ?? [];
        list.push(Number(process.hrtime.bigint() - t0) / 1000);
        times.set(name, list);
      }
    };
  }
  return statement;
};
process.on("exit", () => {
  const rows = [...times].filter(([, list]) => list.length > 1).sort((a, b) => b[1].length - a[1].length);
  for (const [name, list] of rows) {
    list.sort((a, b) => a - b);
    const at = (q) => list[Math.min(list.length - 1, Math.floor(list.length * q))].toFixed(1);
    process.stdout.write(`${String(list.length).padStart(7)} × median ${at(0.5).padStart(7)} µs  p90 ${at(0.9).padStart(7)} µs  ${name}\n`);
  }
});
await import(pathToFileURL(join(root, "bench/gate-loop.mjs")).href);
