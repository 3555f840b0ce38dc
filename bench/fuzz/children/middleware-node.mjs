// The Idempotency-Key middleware on node:http, mounted exactly as docs/server.md shows, on a real
// SQLite ledger. The handler applies one counted effect per run. argv[2]: {"db": path}.
import { createServer } from "node:http";
import { sqliteLedger } from "../../../dist/sqlite.js";
import { idempotencyMiddleware } from "../../../dist/server.js";
import { effectCounter, serveIpc } from "./effects.mjs";

const { db } = JSON.parse(process.argv[2]);
const ledger = sqliteLedger(db);
const counter = effectCounter();
const idempotency = idempotencyMiddleware({ ledger });

function handle(req, res) {
  if (req.method !== "POST" && req.method !== "PATCH") {
    res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ passed: req.method }));
    return;
  }
  const n = counter.apply(req.headers.authorization, req.headers["idempotency-key"]);
  res.writeHead(201, { "content-type": "application/json" }).end(JSON.stringify({ effect: n }));
}

const server = createServer((req, res) => void idempotency(req, res, () => handle(req, res)));
server.listen(0, "127.0.0.1", () => process.send({ op: "ready", port: server.address().port }));
serveIpc(counter, async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
  await ledger.close();
});
// The fuzzer went away: so does the surface.
process.once("disconnect", () => process.exit(0));
