// The operator console (effectgate/console) on a real SQLite ledger. argv[2]: {"db": path, "token": string}.
import { startConsole } from "../../../dist/console.js";
import { sqliteLedger } from "../../../dist/sqlite.js";

const { db, token } = JSON.parse(process.argv[2]);
const ledger = sqliteLedger(db);
// Error lines are counted by the fuzzer: a client's mistake must log nothing at error level.
const logger = {
  debug() {}, info() {}, warn() {},
  error(fields, message) {
    process.stderr.write(`ERROR ${JSON.stringify({ ...fields, message })}\n`);
  },
};
const server = await startConsole({ ledger, token, port: 0, logger, pollMs: 60_000 });
process.send({ op: "ready", port: server.port });
process.on("message", (m) => {
  if (m?.op === "effects") process.send({ op: "effects", handled: 0, keys: 0, max: 0, repeated: [] });
});
process.once("SIGTERM", () => void server.close().then(() => ledger.close()).then(() => process.exit(0)));
// The fuzzer went away: so does the surface.
process.once("disconnect", () => process.exit(0));
