// The receipts endpoint (effectgate/server receiptsEndpoint) on node:http, on a real SQLite ledger.
// argv[2]: {"db": path, "secret": string}.
import { createServer } from "node:http";
import { sqliteLedger } from "../../../dist/sqlite.js";
import { receiptsEndpoint } from "../../../dist/server.js";

const { db, secret } = JSON.parse(process.argv[2]);
const ledger = sqliteLedger(db);
const receipts = receiptsEndpoint({ ledger, secret });
const server = createServer((req, res) => void receipts(req, res));
server.listen(0, "127.0.0.1", () => process.send({ op: "ready", port: server.address().port }));
process.on("message", (m) => {
  if (m?.op === "effects") process.send({ op: "effects", handled: 0, keys: 0, max: 0, repeated: [] });
});
process.once("SIGTERM", () => {
  server.closeAllConnections();
  server.close(() => void ledger.close().then(() => process.exit(0)));
});
// The fuzzer went away: so does the surface.
process.once("disconnect", () => process.exit(0));
